package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"climate"
)

func TestReadFile(t *testing.T) {
	yamlFile := `
# An operator's overrides.
"blazar:leases:post": "rule:admin"
"blazar:oshosts:get": "rule:project_reader_or_admin or rule:readers"
"readers": "role:reader"
"blazar:leases:delete": [["role:admin"], ["role:member", "user_id:%(user_id)s"]]
`
	jsonFile := `{
  "blazar:leases:post": "rule:admin",
  "blazar:oshosts:get": "rule:project_reader_or_admin or rule:readers",
  "readers": "role:reader",
  "blazar:leases:delete": [["role:admin"], ["role:member", "user_id:%(user_id)s"]]
}`
	for name, data := range map[string]string{"yaml": yamlFile, "json": jsonFile} {
		e, warnings, err := Read([]byte(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], `rule "readers" is not one of Climate's rules`) {
			t.Errorf("%s: warnings %q", name, warnings)
		}
		member := climate.Identity{UserID: "bob", ProjectID: "p", Roles: []string{"member"}}
		reader := climate.Identity{UserID: "rita", ProjectID: "p", Roles: []string{"reader"}}
		admin := climate.Identity{UserID: "al", ProjectID: "ops", Roles: []string{"admin"}}
		for _, c := range []struct {
			who    climate.Identity
			rule   string
			target climate.Target
			ok     bool
		}{
			{member, "blazar:leases:post", member.OwnTarget(), false},
			{admin, "blazar:leases:post", admin.OwnTarget(), true},
			{reader, "blazar:oshosts:get", reader.OwnTarget(), true},
			{member, "blazar:oshosts:get", member.OwnTarget(), true},
			{member, "blazar:oshosts:post", member.OwnTarget(), false},
			{member, "blazar:leases:delete", member.OwnTarget(), true},
			{member, "blazar:leases:delete", climate.Target{ProjectID: "p", UserID: "other"}, false},
			{admin, "blazar:leases:delete", climate.Target{ProjectID: "p", UserID: "other"}, true},
			{member, "blazar:leases:get", climate.Target{ProjectID: "p", UserID: "other"}, true}, // default kept
		} {
			err := e.Check(c.who, c.rule, c.target)
			if (err == nil) != c.ok {
				t.Errorf("%s: %s by %v on %v: %v, want allowed=%v", name, c.rule, c.who.Roles, c.target, err, c.ok)
			}
			var ce *climate.Error
			if err != nil && (!errors.As(err, &ce) || ce.Code != climate.CodeForbidden || ce.Message != "Policy doesn't allow "+c.rule+" to be performed.") {
				t.Errorf("%s: refusal %#v", name, err)
			}
		}
		var rules = map[string]Rule{}
		for _, r := range e.Rules() {
			rules[r.Name] = r
		}
		if r := rules["blazar:leases:post"]; r.Check != "rule:admin" || r.Default != "rule:project_member_or_admin" || !r.Overridden || r.Custom {
			t.Errorf("%s: %+v", name, r)
		}
		if r := rules["readers"]; r.Check != "role:reader" || !r.Custom {
			t.Errorf("%s: %+v", name, r)
		}
		if r := rules["blazar:leases:delete"]; r.Check != "(role:admin or (role:member and user_id:%(user_id)s))" {
			t.Errorf("%s: %+v", name, r)
		}
		if r := rules["blazar:leases:get"]; r.Overridden || r.Check != r.Default {
			t.Errorf("%s: %+v", name, r)
		}
	}
}

func TestReadFileErrors(t *testing.T) {
	for data, want := range map[string]string{
		`"blazar:leases:post": "role:admin or"`:              `rule "blazar:leases:post": column 14: the rule ends after 'or'`,
		`"blazar:leases:post": "role:admin and (role:x"`:     `rule "blazar:leases:post": column 16: this '(' is never closed`,
		`"blazar:leases:post":`:                              `rule "blazar:leases:post": no rule text`,
		`"blazar:leases:post": true`:                         `rule "blazar:leases:post": expected the rule's text`,
		`"blazar:leases:post": [["admin"]]`:                  `rule "blazar:leases:post": item 1.1: "admin" is not a check`,
		"a: rule:b\nb: rule:a\n":                             "rules refer to each other in a cycle: a → b → a",
		"default: rule:x\n":                                  "cycle: default → default",
		"admin: rule:project_member_or_admin\n":              "cycle: admin → project_member_or_admin → admin",
		"- a\n- b\n":                                         "expected a mapping of rule names to rule texts",
		"\"a\": \"@\"\n\"a\": \"!\"\n":                       `key "a" already set`, // strict YAML: no duplicate
		`"blazar:oshosts:get": "http://authz.example.org/x"`: "external http: checks",
	} {
		_, _, err := Read([]byte(data))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", data, err, want)
		}
	}
	// A blank file, or one of comments only, keeps the defaults.
	for _, data := range []string{"", "# nothing\n", "{}"} {
		if _, w, err := Read([]byte(data)); err != nil || len(w) != 0 {
			t.Errorf("%q: %v %v", data, w, err)
		}
	}
}

func TestUndefinedReferenceWarns(t *testing.T) {
	_, w, err := New(map[string]any{"blazar:leases:get": "rule:typo or rule:admin"})
	if err != nil || len(w) != 1 || !strings.Contains(w[0], `rule "blazar:leases:get" refers to rule:typo, which is not defined: that check is false`) {
		t.Errorf("%q %v", w, err)
	}
	_, w, err = New(map[string]any{"blazar:leases:get": "rule:typo or rule:admin", "default": "!"})
	if err != nil || len(w) != 1 || !strings.Contains(w[0], "that check is rule default's result") {
		t.Errorf("%q %v", w, err)
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(`"blazar:leases:post": "role:admin or"`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "policy file "+path+`: rule "blazar:leases:post": column 14:`) {
		t.Errorf("%v", err)
	}
	if _, _, err := Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("a missing file should be an error")
	}
}

func TestDefaultsParseAndAreListed(t *testing.T) {
	rules := Default().Rules()
	if len(rules) != len(Defaults) {
		t.Fatalf("%d rules, %d defaults", len(rules), len(Defaults))
	}
	seen := map[string]bool{}
	for i, r := range rules {
		if r.Name != Defaults[i].Name || r.Check != Defaults[i].Check || r.Overridden || r.Custom || r.Description == "" {
			t.Errorf("%+v", r)
		}
		if seen[r.Name] {
			t.Errorf("%s twice", r.Name)
		}
		seen[r.Name] = true
	}
}

func TestCredentials(t *testing.T) {
	e, _, err := New(map[string]any{
		"in_default_domain": "project_domain_id:default and user_domain_id:default",
		"no_domain":         "project_domain_id:None and domain_id:None",
		"is_admin":          "is_admin:True",
	})
	if err != nil {
		t.Fatal(err)
	}
	ks := climate.Identity{UserID: "u", ProjectID: "p", Roles: []string{"member"}, UserDomainID: "default", ProjectDomainID: "default"}
	plain := climate.Identity{UserID: "u", ProjectID: "p", Roles: []string{"Admin"}}
	for _, c := range []struct {
		who  climate.Identity
		rule string
		ok   bool
	}{
		{ks, "in_default_domain", true}, {plain, "in_default_domain", false},
		{ks, "no_domain", false}, {plain, "no_domain", true},
		{plain, "is_admin", false}, // is_admin is the role admin exactly as spelt
		{plain, "admin", true},     // role:admin ignores case
	} {
		if got := e.Check(c.who, c.rule, c.who.OwnTarget()) == nil; got != c.ok {
			t.Errorf("%s for %+v: %v", c.rule, c.who, got)
		}
	}
}
