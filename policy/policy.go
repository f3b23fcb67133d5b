// Package policy is Climate's oslo.policy: Blazar's rule language (role:admin,
// project_id:%(project_id)s, rule:NAME, is_admin:True, @, !, and/or/not, parentheses),
// Blazar's default rules and Climate's, and an operator's policy file (YAML or JSON,
// "rule name": "rule text") overriding them rule by rule. An Enforcer implements
// climate.Policy for every service and every authentication mode.
package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"climate"
)

// Rule is one effective rule, for listing.
type Rule struct {
	Name string
	// Check is the rule's text: the policy file's when it overrides the default, else the
	// default's. A legacy list rule is shown as the text it stands for.
	Check string
	// Description says what the rule guards; empty for rules not among the defaults.
	Description string
	// Default is the default's text; empty for rules not among the defaults.
	Default string
	// Overridden is set when the policy file gives the rule (a default or not).
	Overridden bool
	// Custom is set for a rule of the policy file that is not a default (kept, as
	// rule:NAME may refer to it).
	Custom bool
}

// Enforcer holds the effective rules. It is immutable, so safe for concurrent use.
type Enforcer struct {
	rules map[string]Check
	list  []Rule
}

// DefaultRule is the rule that stands for undefined ones when it is defined, as
// oslo.policy's policy_default_rule ("default"): an unknown rule:NAME, or a check of a
// rule the Enforcer does not have, is then this rule's result, instead of false.
const DefaultRule = "default"

var defaultEnforcer = sync.OnceValue(func() *Enforcer {
	e, _, err := New(nil)
	if err != nil {
		panic("policy: the default rules do not load: " + err.Error())
	}
	return e
})

// Default returns the Enforcer of the default rules.
func Default() *Enforcer { return defaultEnforcer() }

// New returns the Enforcer of the default rules overridden by overrides, whose values are
// rule texts (string) or legacy list rules ([]any), as a policy file's. It returns
// warnings for rules that are not defaults and references to undefined rules; an error
// for a rule that does not parse or rules that refer to each other in a cycle.
func New(overrides map[string]any) (*Enforcer, []string, error) {
	e := &Enforcer{rules: map[string]Check{}}
	var warnings []string
	for _, d := range Defaults {
		c, err := Parse(d.Check)
		if err != nil {
			return nil, nil, fmt.Errorf("default rule %q: %w", d.Name, err)
		}
		e.rules[d.Name] = c
		e.list = append(e.list, Rule{Name: d.Name, Check: d.Check, Description: d.Description, Default: d.Check})
	}
	index := map[string]int{}
	for i, r := range e.list {
		index[r.Name] = i
	}
	names := make([]string, 0, len(overrides))
	for name := range overrides {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var c Check
		var text string
		var err error
		switch v := overrides[name].(type) {
		case string:
			c, err = Parse(v)
			text = v
		case []any:
			c, err = ParseList(v)
			if err == nil {
				text = c.String()
				if _, ok := c.(trueCheck); ok {
					text = ""
				}
			}
		case nil:
			err = fmt.Errorf("no rule text (write \"\" to allow everyone)")
		default:
			err = fmt.Errorf("expected the rule's text (a string), found %v", v)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("rule %q: %w", name, err)
		}
		e.rules[name] = c
		if i, ok := index[name]; ok {
			e.list[i].Check, e.list[i].Overridden = text, true
			continue
		}
		e.list = append(e.list, Rule{Name: name, Check: text, Overridden: true, Custom: true})
		if name != DefaultRule {
			warnings = append(warnings, fmt.Sprintf("rule %q is not one of Climate's rules: kept, for rule:%s", name, name))
		}
	}
	for _, r := range e.list {
		for _, ref := range refs(e.rules[r.Name]) {
			if _, ok := e.rules[ref]; !ok {
				fallback := "false"
				if _, ok := e.rules[DefaultRule]; ok {
					fallback = "rule " + DefaultRule + "'s result"
				}
				warnings = append(warnings, fmt.Sprintf("rule %q refers to rule:%s, which is not defined: that check is %s", r.Name, ref, fallback))
			}
		}
	}
	if cycle := e.cycle(); cycle != nil {
		return nil, nil, fmt.Errorf("rules refer to each other in a cycle: %s", strings.Join(cycle, " → "))
	}
	return e, warnings, nil
}

// Load reads a policy file (oslo.policy's format, YAML or JSON: "rule name": "rule text")
// and returns the Enforcer of the defaults it overrides, with New's warnings.
func Load(path string) (*Enforcer, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("policy file: %w", err)
	}
	e, warnings, err := Read(data)
	if err != nil {
		return nil, nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return e, warnings, nil
}

// Read is Load of a file's content.
func Read(data []byte) (*Enforcer, []string, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, nil, err
	}
	var overrides map[string]any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&overrides); err != nil {
		return nil, nil, fmt.Errorf("expected a mapping of rule names to rule texts (%v)", err)
	}
	return New(overrides)
}

// rule returns the check of a rule, or the default rule's for an undefined one.
func (e *Enforcer) rule(name string) (Check, bool) {
	if c, ok := e.rules[name]; ok {
		return c, true
	}
	c, ok := e.rules[DefaultRule]
	return c, ok
}

// Enforce evaluates rule for the credentials creds on target, as oslo.policy's
// Enforcer.enforce: false for an undefined rule (unless "default" is defined).
func (e *Enforcer) Enforce(rule string, target, creds map[string]any) bool {
	c, ok := e.rule(rule)
	if !ok {
		return false
	}
	return c.eval(&evaluator{rules: e.rule}, target, creds)
}

// Check implements climate.Policy: Enforce with the identity's credentials and the
// target's project_id and user_id; climate.Forbidden(rule) when refused.
func (e *Enforcer) Check(who climate.Identity, rule string, target climate.Target) error {
	if !e.Enforce(rule, TargetMap(target), Credentials(who)) {
		return climate.Forbidden(rule)
	}
	return nil
}

// Credentials are an identity's attributes for rules, as oslo.context's
// to_policy_values gives them to Blazar: user_id, project_id, roles, user_domain_id and
// project_domain_id (Keystone's; None in the other modes), and domain_id (None: Climate's
// identities are project-scoped). Blazar's admin rule also reads is_admin, the context's
// flag, which Blazar sets for admins: here it is true when the identity has the role
// admin (exactly as spelt, as Climate's other admin checks).
func Credentials(who climate.Identity) map[string]any {
	roles := who.Roles
	if roles == nil {
		roles = []string{}
	}
	orNone := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	return map[string]any{
		"user_id":           who.UserID,
		"project_id":        who.ProjectID,
		"user_domain_id":    orNone(who.UserDomainID),
		"project_domain_id": orNone(who.ProjectDomainID),
		"domain_id":         nil,
		"roles":             roles,
		"is_admin":          who.IsAdmin(),
	}
}

// TargetMap is a target's attributes for rules: project_id and user_id.
func TargetMap(t climate.Target) map[string]any {
	return map[string]any{"project_id": t.ProjectID, "user_id": t.UserID}
}

// Rules returns the effective rules: the defaults in their order (as the policy file
// leaves or overrides them), then the file's other rules by name.
func (e *Enforcer) Rules() []Rule { return slices.Clone(e.list) }

// refs returns the rule names c refers to.
func refs(c Check) []string {
	switch x := c.(type) {
	case ruleCheck:
		return []string{x.name}
	case notCheck:
		return refs(x.rule)
	case andCheck:
		var out []string
		for _, r := range x {
			out = append(out, refs(r)...)
		}
		return out
	case orCheck:
		var out []string
		for _, r := range x {
			out = append(out, refs(r)...)
		}
		return out
	}
	return nil
}

// cycle returns a cycle of rule:NAME references (through the default rule for undefined
// names), or nil.
func (e *Enforcer) cycle() []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(name string) []string
	visit = func(name string) []string {
		switch state[name] {
		case onPath:
			i := slices.Index(path, name)
			return append(slices.Clone(path[i:]), name)
		case done:
			return nil
		}
		c, ok := e.rules[name]
		if !ok {
			return nil
		}
		state[name] = onPath
		path = append(path, name)
		for _, ref := range refs(c) {
			if _, ok := e.rules[ref]; !ok {
				if _, ok := e.rules[DefaultRule]; !ok {
					continue
				}
				ref = DefaultRule
			}
			if cyc := visit(ref); cyc != nil {
				return cyc
			}
		}
		path = path[:len(path)-1]
		state[name] = done
		return nil
	}
	for _, r := range e.list {
		if cyc := visit(r.Name); cyc != nil {
			return cyc
		}
	}
	return nil
}
