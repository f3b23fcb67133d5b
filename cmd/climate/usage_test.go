package main

import (
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"

	"climate/http/api"
)

// TestCLILimitsAndUsage sets and shows a project's limits with climate limits, and reads
// usage with climate usage against a real server: a lease refused over the budget with
// the rule's message, usage as a table with totals and as CSV, and bad flags refused
// before any request.
func TestCLILimitsAndUsage(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "node-1", "--extra", "gpu=true")
	c.ok("host", "create", "node-2")
	var l api.Limits
	out := c.ok("limits", "set", "admin", "--budget", "10", "--max-hosts", "2", "--max-lease-duration", "1d",
		"--price", "host=2", "--multiplier", "gpu=true:4", "-o", "json")
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("limits set -o json: %v\n%s", err, out)
	}
	if *l.Budget != 10 || *l.MaxHosts != 2 || *l.MaxLeaseDuration != 86400 || l.Prices["host"] != 2 || len(l.Multipliers) != 1 || l.Multipliers[0].Factor != 4 {
		t.Errorf("limits set: %+v", l)
	}
	if got := c.ok("limits", "show", "admin", "-c", "budget", "-c", "remaining", "-o", "value"); got != "10\n10\n" {
		t.Errorf("limits show -o value: %q", got)
	}
	// The admin's own project (admin, in noauth) is the one limited: 1 h on the plain host
	// costs 2, on the GPU host 8; 2 h on both costs 20, over the budget.
	c.fails("project admin has 10 units of its budget of 10 units left", "lease", "create", "big",
		"--reservation", "resource_type=physical:host,min=2,max=2", "--start-date", "+1h", "--end-date", "+2h")
	c.ok("lease", "create", "small", "--reservation", "resource_type=physical:host,min=2,max=2", "--start-date", "+1h", "--end-date", "+30m")
	table := c.ok("usage")
	if !strings.Contains(table, "small") || !strings.Contains(table, "Totals") {
		t.Errorf("usage table:\n%s", table)
	}
	rows, err := csv.NewReader(strings.NewReader(c.ok("usage", "-o", "csv", "-c", "lease_name", "-c", "reserved_hours", "-c", "charged"))).ReadAll()
	if err != nil || len(rows) != 2 || strings.Join(rows[0], ",") != "lease_name,reserved_hours,charged" || strings.Join(rows[1], ",") != "small,1,5" {
		t.Errorf("usage -o csv: %v %v", rows, err)
	}
	if got := c.ok("limits", "show", "admin", "-c", "charged", "-o", "value"); got != "5\n" {
		t.Errorf("charged after the lease: %q", got)
	}
	c.ok("limits", "set", "admin", "--budget", "none", "--price", "none", "--multiplier", "none")
	if got := c.ok("limits", "show", "admin", "-c", "budget", "-c", "prices", "-o", "value"); got != "\nfloatingip=1 host=1 vcpu=1\n" {
		t.Errorf("after clearing: %q", got)
	}
	c.fails("nothing to set", "limits", "set", "admin")
	c.fails(`--max-hosts "many": want a whole number`, "limits", "set", "admin", "--max-hosts", "many")
	c.fails(`--price "gpu"`, "limits", "set", "admin", "--price", "gpu")
	c.fails(`--multiplier "gpu=true"`, "limits", "set", "admin", "--multiplier", "gpu=true")
	c.fails(`unknown resource class "disk"`, "limits", "set", "admin", "--price", "disk=3")
	c.fails("is not after --from", "usage", "--from", "2030-01-02 00:00", "--to", "2030-01-01 00:00")
}
