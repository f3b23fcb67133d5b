package policy

import (
	"strings"
	"testing"

	"climate"
)

// eval parses rule as "r" among others and enforces it.
func eval(t *testing.T, rule string, others map[string]any, target, creds map[string]any) bool {
	t.Helper()
	o := map[string]any{"r": rule}
	for k, v := range others {
		o[k] = v
	}
	e, _, err := New(o)
	if err != nil {
		t.Fatalf("%q: %v", rule, err)
	}
	return e.Enforce("r", target, creds)
}

var (
	adminCreds  = map[string]any{"user_id": "u1", "project_id": "p1", "roles": []any{"admin"}, "is_admin": true}
	memberCreds = map[string]any{"user_id": "u2", "project_id": "p1", "roles": []any{"Member", "reader"}, "is_admin": false}
	noCreds     = map[string]any{"user_id": "u3", "project_id": "p2", "roles": []any{}, "is_admin": false}
	ownTarget   = map[string]any{"project_id": "p1", "user_id": "u2"}
)

func TestEvaluate(t *testing.T) {
	cases := []struct {
		rule                 string
		admin, member, other bool
	}{
		{"", true, true, true},
		{"@", true, true, true},
		{"!", false, false, false},
		{"role:admin", true, false, false},
		{"role:ADMIN", true, false, false}, // roles ignore case
		{"role:member", false, true, false},
		{"roles:member", false, false, false}, // a generic check does not
		{"roles:Member", false, true, false},
		{"is_admin:True", true, false, false},
		{"is_admin:true", false, false, false}, // str(True) is "True"
		{"is_admin:False", false, true, true},
		{"project_id:%(project_id)s", true, true, false},
		{"user_id:%(user_id)s", false, true, false},
		{"project_id:p1", true, true, false},
		{"project_id:'p1'", false, false, false},  // the quotes are part of the match
		{"'p1':%(project_id)s", true, true, true}, // a literal against the target
		{"\"p2\":%(project_id)s", false, false, false},
		{"True:True", true, true, true},
		{"None:%(project_id)s", false, false, false},
		{"domain_id:None", false, false, false}, // absent from these credentials
		{"nosuch:x", false, false, false},
		{"project_id:%(nosuch)s", false, false, false}, // missing target attribute
		{"role:%(nosuch)s or @", true, true, true},
		{"not role:admin", false, true, true},
		{"not not role:admin", true, false, false},
		{"role:admin or role:member", true, true, false},
		{"role:admin and role:member", false, false, false},
		// "and" binds tighter than "or", "not" tighter than both.
		{"role:admin or role:member and !", true, false, false},
		{"! and role:member or role:admin", true, false, false},
		{"(role:admin or role:member) and !", false, false, false},
		{"not role:admin and role:member", false, true, false},
		{"not (role:admin or role:member)", false, false, true},
		{"((role:admin)) OR (Role:x) Or ROLE:member", true, false, false}, // Role:x is generic
		{"role:member AND NOT project_id:%(project_id)s", false, false, false},
		{"rule:admin_or_owner", true, true, false},
		{"rule:nosuch", false, false, false},
		{"not rule:nosuch", true, true, true},
		{"rule:project_member_or_admin", true, true, false},
		{"rule:project_reader_or_admin", true, true, false},
		{"role:member)and(role:reader", false, false, false}, // one word, one check (role "member)and(role:reader")
		{"(role:member)and(role:reader)", false, false, false},
		{"(role:member) and (role:reader)", false, true, false}, // parentheses come off words' ends
	}
	for _, c := range cases {
		for i, creds := range []map[string]any{adminCreds, memberCreds, noCreds} {
			want := []bool{c.admin, c.member, c.other}[i]
			if got := eval(t, c.rule, nil, ownTarget, creds); got != want {
				t.Errorf("%q for %v: %v, want %v", c.rule, creds["roles"], got, want)
			}
		}
	}
}

func TestNestedCredentials(t *testing.T) {
	creds := map[string]any{
		"token": map[string]any{"user": map[string]any{"enabled": true}, "groups": []any{map[string]any{"name": "ops"}, map[string]any{"name": "dev"}}},
		"roles": []any{"a"},
	}
	for rule, want := range map[string]bool{
		"token.user.enabled:True":  true,
		"token.user.enabled:%(x)s": true,
		"token.groups.name:dev":    true,
		"token.groups.name:qa":     false,
		"token.nosuch:x":           false,
		"token.user:x":             false,
		"roles.x:a":                false, // Python would raise; false here
	} {
		if got := eval(t, rule, nil, map[string]any{"x": true}, creds); got != want {
			t.Errorf("%q: %v, want %v", rule, got, want)
		}
	}
}

func TestDefaultRuleStandsForUndefined(t *testing.T) {
	e, _, err := New(map[string]any{"default": "role:admin", "r": "rule:nosuch or role:x"})
	if err != nil {
		t.Fatal(err)
	}
	if !e.Enforce("r", ownTarget, adminCreds) || e.Enforce("r", ownTarget, memberCreds) {
		t.Error("rule:nosuch should be rule default's result")
	}
	if !e.Enforce("not:a:rule", ownTarget, adminCreds) || e.Enforce("not:a:rule", ownTarget, memberCreds) {
		t.Error("an undefined rule should be rule default's result")
	}
	if Default().Enforce("not:a:rule", ownTarget, adminCreds) {
		t.Error("without default, an undefined rule is false")
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		"   ":                           "column 1: the rule is blank",
		"role:admin or":                 "column 14: the rule ends after 'or'",
		"or role:admin":                 "column 1: expected a check, '(' or 'not', found 'or'",
		"role:admin role:member":        "column 12: expected 'and', 'or' or the end of the rule, found the check \"role:member\"",
		"(role:admin":                   "column 1: this '(' is never closed",
		"role:admin)":                   "column 11: ')' without a '(' before it",
		"()":                            "column 2: expected a check, '(' or 'not', found ')'",
		"role:admin and admin":          "column 16: \"admin\" is not a check",
		"'member':'member'":             "column 1: expected a check, '(' or 'not', found the quoted string 'member':'member'",
		"role:50%":                      "column 6: \"role:50%\": a % that is neither",
		"project_id:%(project_id)d":     "column 12: \"project_id:%(project_id)d\": %(project_id) must be followed by s",
		"http://example.org/check:x":    "oslo.policy's external http: checks",
		"a-b:x":                         "KIND \"a-b\" is neither",
		":x":                            "empty KIND",
		"if:x":                          "KIND \"if\" is neither",
		"007:%(x)s":                     "KIND \"007\" is neither",
		"'it\\'s':x":                    "only simple quoted literals",
		"role:admin or not":             "column 18: the rule ends after 'not'",
		"role:admin and (role:x or )":   "column 27: expected a check, '(' or 'not', found ')'",
		"role:a and (role:b role:c)":    "column 20: expected 'and', 'or' or ')', found the check \"role:c\"",
		"role:a\u3000or\u3000role:b or": "column 20: the rule ends after 'or'",
	}
	for rule, want := range cases {
		_, err := Parse(rule)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", rule, err, want)
		}
	}
	for _, ok := range []string{"", "@", "rule:x", "role:%(a(b)c)s", "role:100%%", "1_000:%(n)s", "-1:x", "a.b.c:%(x)s", "'':x", "role:"} {
		if _, err := Parse(ok); err != nil {
			t.Errorf("Parse(%q): %v", ok, err)
		}
	}
}

func TestLiterals(t *testing.T) {
	target := map[string]any{"n": "1000", "neg": "-1", "zero": "0", "empty": ""}
	for rule, want := range map[string]bool{
		"1_000:%(n)s":    true,
		"-1:%(neg)s":     true,
		"+0:%(zero)s":    true,
		"000:%(zero)s":   true,
		"'':%(empty)s":   true,
		"\"\":%(empty)s": true,
		"role:100%%":     false,
	} {
		if got := eval(t, rule, nil, target, adminCreds); got != want {
			t.Errorf("%q: %v, want %v", rule, got, want)
		}
	}
}

func TestListRules(t *testing.T) {
	for _, c := range []struct {
		rule             []any
		admin, member    bool
		text             string
		adminOnlyIsFalse bool
	}{
		{[]any{}, true, true, "@", false},
		{[]any{[]any{}}, false, false, "!", false},
		{[]any{[]any{"role:admin"}}, true, false, "role:admin", false},
		{[]any{"role:admin", []any{"role:reader", "project_id:%(project_id)s"}}, true, true, "(role:admin or (role:reader and project_id:%(project_id)s))", false},
		// Each item is one check: "or" here is part of role:'s match.
		{[]any{[]any{"role:admin or role:reader"}}, false, false, "role:admin or role:reader", false},
	} {
		c2, err := ParseList(c.rule)
		if err != nil {
			t.Fatal(err)
		}
		if c2.String() != c.text {
			t.Errorf("%v: %q, want %q", c.rule, c2.String(), c.text)
		}
		if got := eval(t, "", nil, nil, nil); !got {
			t.Fatal("empty rule")
		}
		e, _, err := New(map[string]any{"r": c.rule})
		if err != nil {
			t.Fatal(err)
		}
		if a, m := e.Enforce("r", ownTarget, adminCreds), e.Enforce("r", ownTarget, memberCreds); a != c.admin || m != c.member {
			t.Errorf("%v: admin %v member %v, want %v %v", c.rule, a, m, c.admin, c.member)
		}
	}
	if _, err := ParseList([]any{[]any{"admin"}}); err == nil {
		t.Error("a list item without a colon should not parse")
	}
}

func TestString(t *testing.T) {
	c, err := Parse("not role:a or role:b and (role:c or !) and @")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.String(), "(not role:a or (role:b and (role:c or !) and @))"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

func TestDefaultsMatchTheOldHelpers(t *testing.T) {
	// What RequireAdmin, RequireMember and RequireReader allowed, by the rule's group.
	admin := func(who climate.Identity) bool { return who.HasRole("admin") }
	member := func(who climate.Identity) bool { return who.HasRole("admin", "member") }
	reader := func(who climate.Identity) bool { return who.HasRole("admin", "member", "reader") }
	old := map[string]func(climate.Identity) bool{
		"rule:admin": admin, "rule:project_member_or_admin": member, "rule:project_reader_or_admin": reader,
	}
	roleSets := [][]string{nil, {"admin"}, {"member"}, {"reader"}, {"other"}, {"member", "reader"}, {"admin", "other"}, {"reader", "other"}}
	for _, d := range Defaults {
		want, ok := old[d.Check]
		if !strings.Contains(d.Name, ":") {
			continue
		}
		if !ok {
			t.Errorf("%s: default %q is none of the old helpers", d.Name, d.Check)
			continue
		}
		for _, roles := range roleSets {
			who := climate.Identity{UserID: "u", ProjectID: "p", Roles: roles}
			for _, target := range []climate.Target{who.OwnTarget(), {ProjectID: "p", UserID: "other"}} {
				got := Default().Check(who, d.Name, target) == nil
				if got != want(who) {
					t.Errorf("%s for roles %v: %v, want %v", d.Name, roles, got, want(who))
				}
			}
		}
	}
}
