package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"climate/policy"
)

func TestPolicyList(t *testing.T) {
	// The defaults, as a policy file that reads back unchanged.
	out, _, err := runClimate(t, "policy", "list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "# Policy rule for Create Lease API (POST /v1/leases).\n\"blazar:leases:post\": \"rule:project_member_or_admin\"\n") {
		t.Errorf("policy list:\n%s", out)
	}
	e, warnings, err := policy.Read([]byte(out))
	if err != nil || len(warnings) != 0 {
		t.Fatalf("the listing does not read back: %v %q", err, warnings)
	}
	for i, r := range e.Rules() {
		if d := policy.Defaults[i]; r.Name != d.Name || r.Check != d.Check {
			t.Errorf("read back %+v, want %+v", r, d)
		}
	}

	// A file's overrides and other rules, in every format.
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(file, []byte("\"blazar:leases:post\": \"rule:admin\"\n\"readers\": \"role:reader\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runClimate(t, "policy", "list", "--policy-file", file)
	if err != nil || !strings.Contains(out, "# Overridden by the policy file; default: \"rule:project_member_or_admin\"\n\"blazar:leases:post\": \"rule:admin\"\n") ||
		!strings.HasSuffix(out, "# Not one of Climate's rules: from the policy file.\n\"readers\": \"role:reader\"\n") {
		t.Errorf("policy list --policy-file: %v\n%s", err, out)
	}
	if !strings.Contains(stderr, `warning: policy file `+file+`: rule "readers" is not one of Climate's rules`) {
		t.Errorf("stderr: %q", stderr)
	}
	out, _, err = runClimate(t, "policy", "list", "--policy-file", file, "-o", "json")
	var m map[string]string
	if err != nil || json.Unmarshal([]byte(out), &m) != nil || m["blazar:leases:post"] != "rule:admin" || m["readers"] != "role:reader" || len(m) != len(policy.Defaults)+1 {
		t.Errorf("-o json: %v\n%s", err, out)
	}
	out, _, err = runClimate(t, "policy", "list", "--policy-file", file, "-o", "table")
	if err != nil || !strings.Contains(out, "blazar:leases:post ") || !strings.Contains(out, "rule:admin") || !strings.Contains(out, "file (not Climate's)") {
		t.Errorf("-o table: %v\n%s", err, out)
	}

	// A rule that does not parse is an error naming it and the column.
	if err := os.WriteFile(file, []byte(`"blazar:leases:post": "role:admin and (role:member"`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runClimate(t, "policy", "list", "--policy-file", file); err == nil || !strings.Contains(err.Error(), `rule "blazar:leases:post": column 16: this '(' is never closed`) {
		t.Errorf("bad file: %v", err)
	}
	if _, _, err := runClimate(t, "policy", "list", "-o", "value"); err == nil {
		t.Error("-o value should be refused")
	}
}
