package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// The differential test: random rules, credentials and targets evaluated here and by
// Debian's python3-oslo.policy (testdata/oslo_policy_diff.py, one process for all
// cases). Both must agree on every case: on which rules do not parse (oslo logs them and
// denies; New refuses them), and on the result of the others.

const pythonOslo = "/usr/bin/python3"

// osloAvailable reports whether oslo.policy can be imported; with
// CLIMATE_TEST_OSLO_POLICY=required its absence fails the test.
func osloAvailable(t *testing.T) {
	t.Helper()
	err := exec.Command(pythonOslo, "-c", "import oslo_policy").Run()
	if err == nil {
		return
	}
	if os.Getenv("CLIMATE_TEST_OSLO_POLICY") == "required" {
		t.Fatalf("CLIMATE_TEST_OSLO_POLICY=required but %s cannot import oslo_policy (apt-get install python3-oslo.policy): %v", pythonOslo, err)
	}
	t.Skipf("%s cannot import oslo_policy (apt-get install python3-oslo.policy; CLIMATE_TEST_OSLO_POLICY=required makes this a failure)", pythonOslo)
}

type diffCase struct {
	Rules  map[string]any `json:"rules"`
	Rule   string         `json:"rule"`
	Target map[string]any `json:"target"`
	Creds  map[string]any `json:"creds"`
}

type osloAnswer struct {
	Invalid []string `json:"invalid"`
	Result  bool     `json:"result"`
	Error   *string  `json:"error"`
}

// gen generates cases.
type gen struct{ r *rand.Rand }

func (g gen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

// atom is one check; refs are the rule names it may refer to, and nil allows none (not
// even an undefined one).
func (g gen) atom(refs []string) string {
	switch g.r.IntN(8) {
	case 2:
		if refs == nil {
			return g.pick("@", "!")
		}
		return "rule:" + g.pick(append(refs, "undefined")...)
	case 0:
		return g.pick("@", "!")
	case 1:
		return "role:" + g.pick("admin", "Admin", "member", "MEMBER", "reader", "foo", "%(role_name)s", "%(missing)s", "100%%")
	case 3:
		return "is_admin:" + g.pick("True", "False", "true")
	case 4:
		return g.pick("project_id:%(project_id)s", "user_id:%(user_id)s", "project_id:%(user_id)s",
			"project_id:%(missing)s", "project_id:p1", "project_id:'p1'", "user_id:u1", "user_id:u%(n)s")
	case 5:
		return g.pick("'p1':%(project_id)s", "\"member\":%(role_name)s", "True:%(flag)s", "1:%(num)s",
			"None:%(project_id)s", "'x':x", "1_000:%(n)s", "-1:%(neg)s", "'':%(empty)s", "False:False")
	case 6:
		return g.pick("roles:admin", "roles:Member", "domain_id:None", "nosuch:x", "roles:%(role_name)s")
	}
	return g.pick("token.user.enabled:True", "token.user.enabled:%(flag)s", "token.groups.name:dev", "token.groups.name:qa", "token.nosuch:x")
}

// expr is a random expression of depth at most d, rendered with random spacing, keyword
// case and parentheses (some of them needed, some not, some omitted).
func (g gen) expr(d int, refs []string) string {
	sp := func() string { return g.pick(" ", " ", " ", "  ", "\t", "\n", "\u00a0", "\u3000", "\x1c") }
	if d == 0 || g.r.IntN(3) == 0 {
		return g.atom(refs)
	}
	wrap := func(s string) string {
		switch g.r.IntN(3) {
		case 0:
			return "(" + s + ")"
		case 1:
			return "(" + sp() + s + sp() + ")"
		}
		return s
	}
	switch g.r.IntN(3) {
	case 0:
		return g.pick("not", "NOT", "Not") + sp() + wrap(g.expr(d-1, refs))
	default:
		op := g.pick("and", "or")
		if g.r.IntN(4) == 0 {
			op = strings.ToUpper(op)
		}
		n := 2 + g.r.IntN(3)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = wrap(g.expr(d-1, refs))
		}
		return strings.Join(parts, sp()+op+sp())
	}
}

// mangle breaks a rule in one of the ways oslo cannot parse (or, rarely, leaves it whole).
func (g gen) mangle(s string) string {
	switch g.r.IntN(10) {
	case 0:
		return s + " " + g.pick("and", "or", "not")
	case 1:
		return g.pick("and ", "or ", ") ") + s
	case 2:
		return "(" + s
	case 3:
		return s + ")"
	case 4:
		return s + " or " + g.pick("admin", "'quoted'", "\"member\"", "'a:b'", "'x')")
	case 5:
		return s + " role:extra"
	case 6:
		return g.pick("   ", "\t", "()", "( )", "not", "(((", ")")
	case 7:
		return strings.Replace(s, " ", " ) ", 1)
	case 8:
		return "(" + s + ") (" + g.atom(nil) + ")"
	}
	return s + " and ( )"
}

func (g gen) listRule(refs []string) []any {
	n := g.r.IntN(3)
	out := make([]any, 0, n)
	for range n {
		if g.r.IntN(4) == 0 {
			out = append(out, g.atom(refs))
			continue
		}
		m := g.r.IntN(3)
		inner := make([]any, 0, m)
		for range m {
			inner = append(inner, g.atom(refs))
		}
		out = append(out, inner)
	}
	return out
}

func (g gen) maybe(m map[string]any, key string, vals ...any) {
	if g.r.IntN(6) != 0 {
		m[key] = vals[g.r.IntN(len(vals))]
	}
}

func (g gen) creds() map[string]any {
	c := map[string]any{"domain_id": nil}
	g.maybe(c, "user_id", "u1", "u2", "u1000")
	g.maybe(c, "project_id", "p1", "p2")
	g.maybe(c, "is_admin", true, false)
	if g.r.IntN(8) != 0 {
		roles := []any{}
		for _, r := range []string{"admin", "Admin", "member", "Member", "reader", "foo", "100%"} {
			if g.r.IntN(4) == 0 {
				roles = append(roles, r)
			}
		}
		c["roles"] = roles
	}
	if g.r.IntN(2) == 0 {
		c["token"] = map[string]any{
			"user":   map[string]any{"enabled": g.r.IntN(2) == 0},
			"groups": []any{map[string]any{"name": "dev"}, map[string]any{"name": "ops"}},
		}
	}
	return c
}

func (g gen) target() map[string]any {
	t := map[string]any{}
	g.maybe(t, "project_id", "p1", "p2")
	g.maybe(t, "user_id", "u1", "u2")
	g.maybe(t, "role_name", "member", "admin", "Member")
	g.maybe(t, "flag", "True", true, false)
	g.maybe(t, "num", 1, "1", 2)
	g.maybe(t, "n", "1000", 1000)
	g.maybe(t, "neg", "-1", -1)
	g.maybe(t, "empty", "", "x")
	return t
}

// cases returns n cases: a rule r0 that may refer to h1 and h2 (h1 to h2, and both to
// an undefined rule), sometimes a "default" rule (standing for undefined ones, so
// referring to none: no cycles, which oslo.policy cannot evaluate), sometimes a legacy
// list rule, and in about one case in six a rule broken on purpose.
func (g gen) cases(n int) []diffCase {
	out := make([]diffCase, n)
	for i := range out {
		rules := map[string]any{}
		if g.r.IntN(2) == 0 {
			if g.r.IntN(5) == 0 {
				rules["h2"] = g.listRule([]string{})
			} else {
				rules["h2"] = g.expr(2, []string{})
			}
		}
		if g.r.IntN(2) == 0 {
			rules["h1"] = g.expr(2, []string{"h2"})
		}
		if g.r.IntN(4) == 0 {
			rules["default"] = g.expr(2, nil)
		}
		main := g.expr(4, []string{"h1", "h2"})
		if g.r.IntN(20) == 0 {
			main = ""
		}
		if g.r.IntN(6) == 0 {
			main = g.mangle(main)
		}
		rules["r0"] = main
		rule := "r0"
		if g.r.IntN(15) == 0 {
			rule = "nope" // undefined: the default rule's result, or false
		}
		out[i] = diffCase{Rules: rules, Rule: rule, Target: g.target(), Creds: g.creds()}
	}
	return out
}

// goInvalid returns the rules of c that do not parse here.
func goInvalid(c diffCase) []string {
	var bad []string
	for name, r := range c.Rules {
		var err error
		switch v := r.(type) {
		case string:
			_, err = Parse(v)
		case []any:
			_, err = ParseList(v)
		}
		if err != nil {
			bad = append(bad, name)
		}
	}
	sort.Strings(bad)
	return bad
}

func TestDifferentialOsloPolicy(t *testing.T) {
	osloAvailable(t)
	g := gen{rand.New(rand.NewPCG(2024, 6))}
	cases := g.cases(600)
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pythonOslo, "testdata/oslo_policy_diff.py")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oslo_policy_diff.py: %v\n%s", err, stderr.String())
	}
	var answers []osloAnswer
	if err := json.Unmarshal(out, &answers); err != nil {
		t.Fatalf("oslo_policy_diff.py's answer: %v", err)
	}
	if len(answers) != len(cases) {
		t.Fatalf("%d answers for %d cases", len(answers), len(cases))
	}
	var invalid, allowed, denied, failures int
	for i, c := range cases {
		a := answers[i]
		desc := func() string {
			j, _ := json.Marshal(c)
			return string(j)
		}
		if a.Error != nil {
			failures++
			t.Errorf("case %d: oslo.policy raised %s\n%s", i, *a.Error, desc())
			continue
		}
		bad := goInvalid(c)
		if fmt.Sprint(bad) != fmt.Sprint(nonNil(a.Invalid)) {
			failures++
			t.Errorf("case %d: rules that do not parse: here %v, oslo.policy %v\n%s", i, bad, a.Invalid, desc())
			continue
		}
		if len(bad) > 0 {
			invalid++
			continue
		}
		e, _, err := New(c.Rules)
		if err != nil {
			failures++
			t.Errorf("case %d: %v\n%s", i, err, desc())
			continue
		}
		got := e.Enforce(c.Rule, c.Target, c.Creds)
		if got != a.Result {
			failures++
			t.Errorf("case %d: %v here, %v by oslo.policy\n%s", i, got, a.Result, desc())
		}
		if got {
			allowed++
		} else {
			denied++
		}
	}
	t.Logf("%d cases: %d allowed and %d denied by both, %d with rules both refuse; %d disagreements", len(cases), allowed, denied, invalid, failures)
	if allowed < len(cases)/5 || denied < len(cases)/5 || invalid < len(cases)/20 {
		t.Errorf("the generator is lopsided: %d allowed, %d denied, %d invalid", allowed, denied, invalid)
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
