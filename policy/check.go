package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Check is a parsed rule: a tree of checks, evaluated as oslo.policy's _checks.py does.
// String renders it as oslo's str() of the tree does.
type Check interface {
	String() string
	eval(ev *evaluator, target, creds map[string]any) bool
}

// maxDepth bounds rule:NAME indirection. Cycles are refused when rules are loaded; this
// only guards rules built by hand (oslo would overflow Python's stack).
const maxDepth = 64

// evaluator resolves rule:NAME while one rule is evaluated.
type evaluator struct {
	rules func(name string) (Check, bool)
	depth int
}

type trueCheck struct{}

func (trueCheck) String() string                                       { return "@" }
func (trueCheck) eval(*evaluator, map[string]any, map[string]any) bool { return true }

type falseCheck struct{}

func (falseCheck) String() string                                       { return "!" }
func (falseCheck) eval(*evaluator, map[string]any, map[string]any) bool { return false }

type notCheck struct{ rule Check }

func (c notCheck) String() string { return "not " + c.rule.String() }
func (c notCheck) eval(ev *evaluator, target, creds map[string]any) bool {
	return !c.rule.eval(ev, target, creds)
}

type andCheck []Check

func (c andCheck) String() string { return "(" + join(c, " and ") + ")" }
func (c andCheck) eval(ev *evaluator, target, creds map[string]any) bool {
	for _, r := range c {
		if !r.eval(ev, target, creds) {
			return false
		}
	}
	return true
}

type orCheck []Check

func (c orCheck) String() string { return "(" + join(c, " or ") + ")" }
func (c orCheck) eval(ev *evaluator, target, creds map[string]any) bool {
	for _, r := range c {
		if r.eval(ev, target, creds) {
			return true
		}
	}
	return false
}

func join(cs []Check, sep string) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.String()
	}
	return strings.Join(s, sep)
}

// ruleCheck is rule:NAME: another rule's result; false when NAME is not defined (unless
// a "default" rule is, which then stands for it, as oslo's Rules does).
type ruleCheck struct{ name string }

func (c ruleCheck) String() string { return "rule:" + c.name }
func (c ruleCheck) eval(ev *evaluator, target, creds map[string]any) bool {
	r, ok := ev.rules(c.name)
	if !ok || ev.depth >= maxDepth {
		return false
	}
	ev.depth++
	defer func() { ev.depth-- }()
	return r.eval(ev, target, creds)
}

// roleCheck is role:NAME: one of the credentials' roles is NAME, ignoring case.
type roleCheck struct{ match match }

func (c roleCheck) String() string { return "role:" + c.match.raw }
func (c roleCheck) eval(_ *evaluator, target, creds map[string]any) bool {
	m, ok := c.match.format(target)
	if !ok {
		return false
	}
	roles, ok := creds["roles"]
	if !ok {
		return false
	}
	m = strings.ToLower(m)
	for _, r := range list(roles) {
		if s, ok := r.(string); ok && strings.ToLower(s) == m {
			return true
		}
	}
	return false
}

// genericCheck is KIND:MATCH otherwise: MATCH (formatted with the target) equals str() of
// KIND when KIND is a literal, else of the credential at KIND's dotted path (any element,
// where the path meets a list).
type genericCheck struct {
	kind    string
	literal bool
	value   string   // str() of the literal
	path    []string // credential path otherwise
	match   match
}

func (c genericCheck) String() string { return c.kind + ":" + c.match.raw }
func (c genericCheck) eval(_ *evaluator, target, creds map[string]any) bool {
	m, ok := c.match.format(target)
	if !ok {
		return false
	}
	if c.literal {
		return m == c.value
	}
	return findInDict(creds, c.path, m)
}

// findInDict is oslo's GenericCheck._find_in_dict. Where Python would raise (indexing a
// string or None), it is false.
func findInDict(v any, path []string, m string) bool {
	if len(path) == 0 {
		return m == pyStr(v)
	}
	d, ok := v.(map[string]any)
	if !ok {
		return false
	}
	v, ok = d[path[0]]
	if !ok {
		return false
	}
	if l, isList := asList(v); isList {
		for _, e := range l {
			if findInDict(e, path[1:], m) {
				return true
			}
		}
		return false
	}
	return findInDict(v, path[1:], m)
}

func asList(v any) ([]any, bool) {
	switch l := v.(type) {
	case []any:
		return l, true
	case []string:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

// list returns v's elements when it is a list; a string's characters when it is a
// string (Python iterates them); nothing otherwise.
func list(v any) []any {
	if l, ok := asList(v); ok {
		return l
	}
	if s, ok := v.(string); ok {
		out := make([]any, 0, len(s))
		for _, r := range s {
			out = append(out, string(r))
		}
		return out
	}
	return nil
}

// pyStr is Python's str() of a credential or target value decoded from JSON or built by
// Climate: strings, booleans, None, integers (and lists and maps, as their repr).
func pyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case fmt.Stringer: // json.Number
		return x.String()
	case []string, []any:
		l, _ := asList(x)
		s := make([]string, len(l))
		for i, e := range l {
			s[i] = pyRepr(e)
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// pyRepr is Python's repr() for the values pyStr handles (strings quoted as Python does
// for text without quotes or backslashes).
func pyRepr(v any) string {
	if s, ok := v.(string); ok {
		if strings.Contains(s, "'") && !strings.Contains(s, "\"") {
			return "\"" + s + "\""
		}
		return "'" + strings.ReplaceAll(s, "'", "\\'") + "'"
	}
	return pyStr(v)
}
