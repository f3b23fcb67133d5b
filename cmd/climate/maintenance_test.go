package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLIMaintenance takes a host out of service with climate host maintenance add: the
// lease on it moves to the other host and the answer says so; list shows the windows
// (one until further notice), delete puts the host back; bad flags are refused before
// any request.
func TestCLIMaintenance(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "node-1")
	l := c.leaseJSON("lease", "create", "l", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", "+1h", "--end-date", "+2h")
	c.ok("host", "create", "node-2") // after the lease: it holds node-1

	c.fails("give exactly one of --end DATE and --until-further-notice", "host", "maintenance", "add", "node-1")
	c.fails("give exactly one of --end DATE and --until-further-notice", "host", "maintenance", "add", "node-1", "--end", "+1h", "--until-further-notice")
	c.fails("is not after --start", "host", "maintenance", "add", "node-1", "--start", "+2h", "--end", "2020-01-01 00:00")
	c.fails("not a date", "host", "maintenance", "add", "node-1", "--end", "soon")
	c.fails("No host with name or id", "host", "maintenance", "add", "node-9", "--end", "+1h")

	out := c.ok("host", "maintenance", "add", "node-1", "--end", "+3h", "--reason", "firmware update")
	if !strings.Contains(out, "firmware update") || !strings.Contains(out, "replanned") || !strings.Contains(out, l.ID) {
		t.Fatalf("maintenance add:\n%s", out)
	}
	var m maintenanceAdded
	if err := json.Unmarshal([]byte(c.ok("host", "maintenance", "add", "node-2", "--start", "+1d", "--until-further-notice", "-o", "json")), &m); err != nil {
		t.Fatal(err)
	}
	if m.Host != "node-2" || m.End != untilFurtherNotice || m.Healing == nil || len(m.Healing) != 0 {
		t.Fatalf("maintenance add -o json: %+v", m)
	}
	rows := lines(c.ok("host", "maintenance", "list"))
	if len(rows) != 3 || strings.Join(rows[0], " ") != "ID HOST START END REASON" || rows[1][1] != "node-1" || rows[2][1] != "node-2" ||
		!strings.Contains(strings.Join(rows[2], " "), "until further notice") {
		t.Fatalf("maintenance list:\n%v", rows)
	}
	first := rows[1][0]
	if out := c.ok("host", "maintenance", "list", "node-2", "-o", "value", "-c", "id"); strings.TrimSpace(out) != m.ID {
		t.Fatalf("maintenance list node-2: %q, want %s", out, m.ID)
	}
	if out := c.ok("host", "maintenance", "show", "node-1", first, "-o", "value", "-c", "reason"); out != "firmware update\n" {
		t.Fatalf("maintenance show: %q", out)
	}
	c.fails("maintenance_id", "host", "maintenance", "delete", "node-2", first)
	if out := c.ok("host", "maintenance", "delete", "node-1", first); !strings.Contains(out, "Deleted maintenance "+first+" of host node-1") {
		t.Fatalf("maintenance delete: %q", out)
	}
	if rows := lines(c.ok("host", "maintenance", "list", "--no-headers")); len(rows) != 1 || rows[0][0] != m.ID {
		t.Fatalf("after delete: %v", rows)
	}
	if help := c.ok("host", "maintenance", "--help"); !strings.Contains(help, "climate host maintenance add node-3 --until-further-notice") {
		t.Fatalf("help lacks examples:\n%s", help)
	}
}
