package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"climate/http/api"
)

// TestCLIAudit reads a lease's audit trail with climate audit list against a real server:
// JSON entries in order, each with its request id and changed fields; a table, columns
// and the host filter; and a deleted lease's entries by id.
func TestCLIAudit(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "node-1")
	l := c.leaseJSON("lease", "create", "train", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", "+1h", "--end-date", "+2h")
	c.ok("lease", "update", "train", "--name", "train-2")

	var es []api.AuditEntry
	if err := json.Unmarshal([]byte(c.ok("audit", "list", "--lease", "train-2", "-o", "json")), &es); err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Action != "lease.create" || es[1].Action != "lease.update" {
		t.Fatalf("audit list --lease -o json: %+v", es)
	}
	for _, e := range es {
		if e.LeaseID != l.ID || e.Actor != "user" || !strings.HasPrefix(e.RequestID, "req-") {
			t.Errorf("entry %+v", e)
		}
	}
	if es[0].RequestID == es[1].RequestID {
		t.Errorf("two requests, one request id %s", es[0].RequestID)
	}
	var before, after map[string]any
	if json.Unmarshal(es[1].Before, &before) != nil || json.Unmarshal(es[1].After, &after) != nil ||
		!reflect.DeepEqual(before, map[string]any{"name": "train"}) || !reflect.DeepEqual(after, map[string]any{"name": "train-2"}) {
		t.Errorf("update: before %s, after %s", es[1].Before, es[1].After)
	}

	rows := lines(c.ok("audit", "list", "--host", "node-1"))
	if len(rows) != 2 || rows[0][0] != "ID" || !strings.Contains(strings.Join(rows[1], " "), "host.create") {
		t.Fatalf("audit list --host:\n%v", rows)
	}
	if out := c.ok("audit", "list", "--lease", l.ID, "-o", "value", "-c", "action"); out != "lease.create\nlease.update\n" {
		t.Fatalf("audit list -o value -c action: %q", out)
	}
	// A deleted lease is found by its id.
	c.ok("lease", "delete", l.ID)
	if out := c.ok("audit", "list", "--lease", l.ID, "-o", "value", "-c", "action", "--limit", "5"); out != "lease.create\nlease.update\nlease.delete\n" {
		t.Fatalf("a deleted lease's entries: %q", out)
	}
	c.fails("No lease with name or id", "audit", "list", "--lease", "nope")
	c.fails("is not after --since", "audit", "list", "--since", "2030-01-02 00:00", "--until", "2030-01-01 00:00")
	c.fails("--limit -1", "audit", "list", "--limit", "-1")

	// The rule that guards it is one of Climate's, admins only by default.
	if out := c.ok("policy", "list"); !strings.Contains(out, `"climate:audit:get": "rule:admin"`) {
		t.Errorf("policy list lacks climate:audit:get:\n%s", out)
	}
}
