package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"climate/http/api"
)

// cli runs client commands against one server, as a user with CLIMATE_URL set would.
type cli struct {
	t   *testing.T
	url string
}

// newCLI starts a server and points CLIMATE_URL at it; the config directory is empty so a
// developer's own config file cannot leak in.
func newCLI(t *testing.T, o serveOptions) *cli {
	s := startServer(t, o)
	t.Setenv("CLIMATE_URL", s.url)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	return &cli{t: t, url: s.url}
}

// ok runs a command that must succeed and returns its stdout.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, err := runClimate(c.t, args...)
	if err != nil {
		c.t.Fatalf("climate %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// fails runs a command that must fail with a one-line error containing want, and print
// nothing on stdout.
func (c *cli) fails(want string, args ...string) {
	c.t.Helper()
	out, _, err := runClimate(c.t, args...)
	if err == nil {
		c.t.Fatalf("climate %s succeeded, want an error containing %q; stdout:\n%s", strings.Join(args, " "), want, out)
	}
	if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		c.t.Fatalf("climate %s: error %q, want one line containing %q", strings.Join(args, " "), err, want)
	}
	if out != "" {
		c.t.Fatalf("climate %s failed but printed on stdout:\n%s", strings.Join(args, " "), out)
	}
}

// leaseJSON runs a command printing one lease with -o json and decodes it.
func (c *cli) leaseJSON(args ...string) api.Lease {
	c.t.Helper()
	var l api.Lease
	out := c.ok(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		c.t.Fatalf("climate %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
	return l
}

// lines splits table output into rows of fields.
func lines(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := api.ParseTime(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCLIHosts(t *testing.T) {
	c := newCLI(t, serveOptions{})
	out := c.ok("host", "create", "node-1", "--extra", "gpu=true", "--extra", "rack=r1")
	if !strings.Contains(out, "hypervisor_hostname  node-1") || !strings.Contains(out, "gpu                  true") {
		t.Fatalf("host create table:\n%s", out)
	}
	var h api.Host
	if err := json.Unmarshal([]byte(c.ok("host", "create", "node-2", "--extra", "gpu=false", "-o", "json")), &h); err != nil || h.ID != "2" || h.Extra["gpu"] != "false" {
		t.Fatalf("host create -o json: %v %+v", err, h)
	}

	rows := lines(c.ok("host", "list"))
	want := [][]string{{"ID", "HYPERVISOR", "HOSTNAME", "VCPUS", "MEMORY", "MB", "LOCAL", "GB", "RESERVABLE"},
		{"1", "node-1", "0", "0", "0", "true"}, {"2", "node-2", "0", "0", "0", "true"}}
	if !equalRows(rows, want) {
		t.Fatalf("host list: %q", rows)
	}
	if got := c.ok("host", "list", "-o", "value", "-c", "hypervisor_hostname,gpu", "--sort-by", "hypervisor_hostname", "--reverse"); got != "node-2 false\nnode-1 true\n" {
		t.Fatalf("host list -o value: %q", got)
	}
	var hosts []api.Host
	if err := json.Unmarshal([]byte(c.ok("host", "list", "-o", "json")), &hosts); err != nil || len(hosts) != 2 || hosts[0].Extra["rack"] != "r1" {
		t.Fatalf("host list -o json: %v %+v", err, hosts)
	}
	var y []map[string]any
	if err := yaml.Unmarshal([]byte(c.ok("host", "list", "-o", "yaml", "-c", "id,gpu")), &y); err != nil || len(y) != 2 || y[1]["gpu"] != "false" || len(y[1]) != 2 {
		t.Fatalf("host list -o yaml -c id,gpu: %v %v", err, y)
	}

	// By name or by id.
	if got := c.ok("host", "show", "node-2", "-o", "value", "-c", "id"); got != "2\n" {
		t.Fatalf("host show by name: %q", got)
	}
	if got := c.ok("host", "show", "1", "-o", "value", "-c", "hypervisor_hostname"); got != "node-1\n" {
		t.Fatalf("host show by id: %q", got)
	}
	if got := c.ok("host", "update", "node-1", "--extra", "rack=r9", "-o", "value", "-c", "rack"); got != "r9\n" {
		t.Fatalf("host update: %q", got)
	}
	if got := c.ok("host", "set", "node-1", "--extra", "rack=r8", "-o", "value", "-c", "rack"); got != "r8\n" {
		t.Fatalf("host set (alias): %q", got)
	}

	// Properties.
	rows = lines(c.ok("host", "property", "list", "--detail"))
	if !equalRows(rows, [][]string{{"PROPERTY", "PRIVATE", "VALUES"}, {"gpu", "false", "false,", "true"}, {"rack", "false", "r8"}}) {
		t.Fatalf("property list --detail: %q", rows)
	}
	out = c.ok("host", "property", "set", "rack", "--private", "-o", "json")
	var p api.Property
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.Name != "rack" || p.Private == nil || !*p.Private {
		t.Fatalf("property set --private: %v %s", err, out)
	}
	if got := c.ok("host", "property", "show", "gpu", "-o", "value", "-c", "values"); got != "false\ntrue\n" {
		t.Fatalf("property show: %q", got)
	}

	// Errors.
	c.fails(`No host with name or id "node-9"`, "host", "show", "node-9")
	c.fails("already exists", "host", "create", "node-1")
	c.fails(`--extra "gpu": want KEY=VALUE`, "host", "create", "node-3", "--extra", "gpu")
	c.fails("nothing to change", "host", "update", "node-1")
	c.fails("give exactly one of --private and --public", "host", "property", "set", "gpu")
	c.fails(`No host property "nope"`, "host", "property", "show", "nope")
	c.fails(`--column "colour": no such field`, "host", "list", "-c", "colour")
	c.fails(`--output/--format "xml": want table, wide, json, yaml, value or jsonpath=TEMPLATE`, "host", "list", "-o", "xml")

	if got := c.ok("host", "delete", "node-2", "1"); got != "Deleted host node-2 (2)\nDeleted host node-1 (1)\n" {
		t.Fatalf("host delete: %q", got)
	}
	if got := c.ok("host", "list", "--no-headers"); got != "" {
		t.Fatalf("hosts left: %q", got)
	}
}

func equalRows(got, want [][]string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if strings.Join(got[i], " ") != strings.Join(want[i], " ") {
			return false
		}
	}
	return true
}

func TestCLILeaseLifecycle(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "gpu-1", "--extra", "gpu=true")
	c.ok("host", "create", "gpu-2", "--extra", "gpu=true")
	c.ok("host", "create", "cpu-1", "--extra", "gpu=false")

	day := time.Now().UTC().Add(72 * time.Hour).Format("2006-01-02")
	l := c.leaseJSON("lease", "create", "train",
		"--reservation", `resource_type=physical:host,min=1,max=2,resource_properties=["==","$gpu","true"]`,
		"--start-date", day+" 10:00", "--end-date", "+4h", "--before-end-date", "-30m", "--before-start-date", "-15m")
	if l.Name != "train" || l.Status != "PENDING" || l.StartDate != day+"T10:00:00.000000" || l.EndDate != day+"T14:00:00.000000" {
		t.Fatalf("created lease: %+v", l)
	}
	if r := l.Reservations[0].Fields; r["min"] != 1.0 || r["max"] != 2.0 || r["resource_properties"] != `["==","$gpu","true"]` {
		t.Fatalf("reservation: %+v", r)
	}
	heads := 0
	for _, e := range l.Events {
		if e.EventType == "before_end_lease" && e.Time != day+"T13:30:00.000000" {
			t.Fatalf("before_end_lease at %s, want 13:30", e.Time)
		}
		if e.EventType == "before_start_lease" {
			if heads++; e.Time != day+"T09:45:00.000000" {
				t.Fatalf("before_start_lease at %s, want 09:45", e.Time)
			}
		}
	}
	if heads != 1 {
		t.Fatalf("events %+v: want one before_start_lease", l.Events)
	}
	// Blazar's legacy flag and an RFC 3339 date.
	c.ok("lease", "create", "cpu", "--physical-reservation", `min=1,max=1,resource_properties=["==","$gpu","false"]`,
		"--start-date", day+"T12:00:00Z", "--end-date", day+"T13:00:00Z")

	// Lists: table, JSON, value, sorting, columns.
	rows := lines(c.ok("lease", "list"))
	if len(rows) != 3 || strings.Join(rows[0], " ") != "ID NAME START DATE END DATE STATUS" || rows[1][1] != "train" || rows[2][1] != "cpu" {
		t.Fatalf("lease list:\n%q", rows)
	}
	var leases []api.Lease
	if err := json.Unmarshal([]byte(c.ok("lease", "list", "-o", "json")), &leases); err != nil || len(leases) != 2 || len(leases[0].Reservations) != 1 {
		t.Fatalf("lease list -o json: %v %+v", err, leases)
	}
	if got := c.ok("lease", "list", "-o", "value", "-c", "name", "--sort-by", "name"); got != "cpu\ntrain\n" {
		t.Fatalf("lease list sorted by name: %q", got)
	}
	if got := c.ok("lease", "list", "-o", "value", "-c", "name", "--sort-by", "start-date", "--reverse"); got != "cpu\ntrain\n" {
		t.Fatalf("lease list sorted by start date, descending: %q", got)
	}
	out := c.ok("lease", "show", "train")
	if !strings.Contains(out, "status        PENDING") || !strings.Contains(out, "resource_type=physical:host") {
		t.Fatalf("lease show table:\n%s", out)
	}
	if got := c.leaseJSON("lease", "show", l.ID); got.Name != "train" {
		t.Fatalf("show by id: %+v", got)
	}

	// Allocations, filtered by lease.
	out = c.ok("allocation", "list", "--lease", "train", "-o", "value", "-c", "resource_id")
	if out != "1\n2\n" {
		t.Fatalf("allocation list --lease train: %q", out)
	}
	var allocs []api.Allocation
	if err := json.Unmarshal([]byte(c.ok("allocation", "list", "host", "-o", "json")), &allocs); err != nil || len(allocs) != 3 {
		t.Fatalf("allocation list -o json: %v %s", err, c.ok("allocation", "list", "-o", "json"))
	}
	var a api.Allocation
	if err := json.Unmarshal([]byte(c.ok("allocation", "show", "cpu-1", "-o", "json")), &a); err != nil || a.ResourceID != "3" || len(a.Reservations) != 1 {
		t.Fatalf("allocation show cpu-1: %v %+v", err, a)
	}
	// Time windows and limits (hosts), and lease list's filters.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"allocation", "list", "--from", day + " 13:30", "-c", "resource_id"}, "1\n2\n"},
		{[]string{"allocation", "list", "--to", day + " 10:30", "-c", "resource_id"}, "1\n2\n"},
		{[]string{"allocation", "list", "--from", day + " 12:30", "--to", "+10m", "-c", "resource_id"}, "1\n2\n3\n"},
		{[]string{"allocation", "list", "--limit", "1", "-c", "resource_id"}, "1\n"},
		{[]string{"allocation", "show", "cpu-1", "--from", day + " 13:00", "-c", "resource_id"}, ""},
		{[]string{"lease", "list", "--status", "pending", "--limit", "1", "-c", "name"}, "train\n"},
		{[]string{"lease", "list", "--status", "ACTIVE,ERROR", "-c", "name"}, ""},
		{[]string{"lease", "list", "--status", "ACTIVE", "--status", "PENDING", "-c", "name"}, "train\ncpu\n"},
	} {
		if got := c.ok(append(tc.args, "-o", "value")...); got != tc.want {
			t.Errorf("climate %s: %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	if err := json.Unmarshal([]byte(c.ok("allocation", "list", "--limit", "2", "-o", "json")), &allocs); err != nil || len(allocs) != 2 {
		t.Fatalf("allocation list --limit 2 -o json: %v %+v", err, allocs)
	}
	c.fails(`is not after --from`, "allocation", "list", "--from", day+" 12:30", "--to", day+" 12:30")
	c.fails("--limit -1: want a positive number", "allocation", "list", "--limit", "-1")
	c.fails("--limit -1: want a positive number", "lease", "list", "--limit", "-1")
	c.fails(`Invalid lease status "BOGUS"`, "lease", "list", "--status", "bogus")

	// Updates relative to the lease's current dates, as Blazar's client computes them.
	if got := c.leaseJSON("lease", "update", "train", "--prolong-for", "2h"); got.EndDate != day+"T16:00:00.000000" {
		t.Fatalf("--prolong-for 2h: end %s", got.EndDate)
	}
	if got := c.leaseJSON("lease", "update", "train", "--reduce-by", "1h"); got.EndDate != day+"T15:00:00.000000" {
		t.Fatalf("--reduce-by 1h: end %s", got.EndDate)
	}
	if got := c.leaseJSON("lease", "update", "train", "--defer-by", "1d", "--prolong-for", "1d"); got.StartDate != mustTime(t, l.StartDate).Add(24*time.Hour).Format(api.TimeFormat) || got.EndDate != mustTime(t, day+"T15:00:00.000000").Add(24*time.Hour).Format(api.TimeFormat) {
		t.Fatalf("--defer-by 1d --prolong-for 1d: %s – %s", got.StartDate, got.EndDate)
	}
	if got := c.leaseJSON("lease", "update", "train", "--advance-by", "1d", "--reduce-by", "1d"); got.StartDate != l.StartDate {
		t.Fatalf("--advance-by 1d: start %s", got.StartDate)
	}
	got := c.leaseJSON("lease", "update", "train", "--reservation", "id="+l.Reservations[0].ID+",min=2")
	if got.Reservations[0].Fields["min"] != 2.0 {
		t.Fatalf("--reservation id=…,min=2: %+v", got.Reservations[0])
	}
	// Only connection and output settings come from the environment.
	t.Setenv("CLIMATE_NAME", "from-env")
	c.fails("nothing to change", "lease", "update", "train")
	t.Setenv("CLIMATE_OUTPUT", "value")
	t.Setenv("CLIMATE_COLUMN", "name")
	if got := c.ok("lease", "show", "train"); got != "train\n" {
		t.Fatalf("CLIMATE_OUTPUT/CLIMATE_COLUMN: %q", got)
	}
	os.Unsetenv("CLIMATE_OUTPUT")
	os.Unsetenv("CLIMATE_COLUMN")
	if got := c.leaseJSON("lease", "set", "train", "--name", "train-v2"); got.Name != "train-v2" {
		t.Fatalf("rename: %+v", got)
	}

	// Deleting by name frees the hosts.
	if out := c.ok("lease", "delete", "train-v2"); out != "Deleted lease train-v2 ("+l.ID+")\n" {
		t.Fatalf("lease delete: %q", out)
	}
	c.fails(`No lease with name or id "train-v2"`, "lease", "show", "train-v2")
	if out := c.ok("allocation", "list", "-o", "value", "-c", "resource_id"); out != "3\n" {
		t.Fatalf("allocations after delete: %q", out)
	}
}

func TestCLILeaseErrors(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "only")
	res := "resource_type=physical:host,min=1,max=1"
	c.ok("lease", "create", "first", "--reservation", res, "--start-date", "+1h", "--end-date", "+1h")

	// The server's messages, one line each.
	c.fails("Not enough hosts available", "lease", "create", "second", "--reservation", res, "--start-date", "+1h", "--end-date", "+1h")
	c.fails(`No lease with name or id "ghost"`, "lease", "show", "ghost")
	c.fails(`No lease with name or id "ghost"`, "lease", "delete", "ghost")
	c.fails("ghost", "lease", "update", "ghost", "--prolong-for", "1h")
	c.fails("Unknown property", "lease", "create", "x", "--reservation", `resource_type=physical:host,min=1,max=1,resource_properties=["==","$nope","1"]`)

	// Bad input, refused before anything is sent.
	c.fails(`--start-date "tomorrow": not a date; want now, +DURATION`, "lease", "create", "x", "--reservation", res, "--start-date", "tomorrow")
	c.fails(`--end-date "+soon": "soon" is not a duration`, "lease", "create", "x", "--reservation", res, "--end-date", "+soon")
	c.fails(`--reservation "min=1,max=1": resource_type is required`, "lease", "create", "x", "--reservation", "min=1,max=1")
	c.fails(`unknown key "colour"`, "lease", "create", "x", "--reservation", res+",colour=red")
	c.fails("min is given twice", "lease", "create", "x", "--reservation", res+",min=2")
	c.fails("at least one --reservation", "lease", "create", "x")
	c.fails("climate lease create takes NAME (got 0 arguments)", "lease", "create", "--reservation", res)
	c.fails("unknown flag: --colour (see climate lease create --help)", "lease", "create", "x", "--colour", "red")
	c.fails("--start-date earliest needs --duration", "lease", "create", "x", "--reservation", res, "--start-date", "earliest")
	c.fails("--duration and --deadline go with --start-date earliest", "lease", "create", "x", "--reservation", res, "--duration", "1h")
	c.fails("give only one of --end-date, --prolong-for and --reduce-by", "lease", "update", "first", "--prolong-for", "1h", "--end-date", "+2h")
	c.fails("give only one of --start-date, --defer-by and --advance-by", "lease", "update", "first", "--defer-by", "1h", "--advance-by", "1h")
	c.fails(`--prolong-for "1 hour": not a positive duration`, "lease", "update", "first", "--prolong-for", "1 hour")
	c.fails("nothing to change", "lease", "update", "first")
	c.fails("--status goes with --wait", "lease", "create", "x", "--reservation", res, "--status", "ACTIVE")
	c.fails("Max must be equal to or larger than min", "lease", "update", "first", "--reservation", "min=3") // its only reservation, named for it
	c.fails(`--sort-by "colour": no such field`, "lease", "list", "--sort-by", "colour")
	c.fails(`--status "DONE": want one of`, "lease", "wait", "first", "--status", "done")
	c.fails("cannot reach Climate at http://127.0.0.1:1", "lease", "list", "--url", "http://127.0.0.1:1")
	c.fails(`--url: server URL "ftp://x": want http://HOST:PORT`, "lease", "list", "--url", "ftp://x")

	// Nothing half-written: still exactly one lease.
	if got := c.ok("lease", "list", "-o", "value", "-c", "name"); got != "first\n" {
		t.Fatalf("leases after failed commands: %q", got)
	}
}

func TestCLIEarliestAndDryRun(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "h1")
	day := time.Now().UTC().Add(48 * time.Hour).Format("2006-01-02")
	c.ok("lease", "create", "busy", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", day+" 10:00", "--end-date", day+" 14:00")

	// A dry run shows the host it would get and books nothing.
	out, errOut, err := runClimate(t, "lease", "create", "try", "--reservation", "resource_type=physical:host,min=1,max=1",
		"--start-date", day+" 14:00", "--end-date", day+" 15:00", "--dry-run", "-o", "json")
	var plan api.Lease
	if err != nil || json.Unmarshal([]byte(out), &plan) != nil || len(plan.Reservations) != 1 || strings.Join(plan.Reservations[0].Hosts, ",") != "h1" || !strings.Contains(errOut, "Dry run: nothing was booked") {
		t.Fatalf("dry run: %v\n%s\n%s", err, out, errOut)
	}
	c.fails("Not enough hosts available", "lease", "create", "try", "--reservation", "resource_type=physical:host,min=1,max=1",
		"--start-date", day+" 11:00", "--end-date", day+" 12:00", "--dry-run")

	// The earliest 3-hour window for the one host is when the lease holding it now ends.
	now := c.leaseJSON("lease", "create", "now", "--reservation", "resource_type=physical:host,min=1,max=1", "--end-date", "+4h")
	l := c.leaseJSON("lease", "create", "soon", "--reservation", "resource_type=physical:host,min=1,max=1",
		"--start-date", "earliest", "--duration", "3h", "--deadline", day+" 10:00")
	if l.StartDate != now.EndDate || mustTime(t, l.EndDate).Sub(mustTime(t, l.StartDate)) != 3*time.Hour {
		t.Fatalf("earliest booked %s – %s, want 3 hours from %s", l.StartDate, l.EndDate, now.EndDate)
	}
	if got := c.ok("lease", "list", "-o", "value", "-c", "name"); got != "busy\nnow\nsoon\n" {
		t.Fatalf("leases: %q", got)
	}
}

func TestCLIWait(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "h1")
	c.ok("host", "create", "h2")

	// create --wait returns once the engine has started the lease.
	out, errOut, err := runClimate(t, "lease", "create", "now", "--reservation", "resource_type=physical:host,min=1,max=1",
		"--end-date", "+1h", "--wait", "--interval", "20ms", "-o", "value", "-c", "status")
	if err != nil || out != "ACTIVE\n" || !strings.Contains(errOut, "Waiting for lease now to be ACTIVE: ") || !strings.Contains(errOut, "ends in") {
		t.Fatalf("create --wait: %v %q\nstderr:\n%s", err, out, errOut)
	}

	// A lease that ends in a moment: wait for TERMINATED (the poll lands just after the end).
	c.ok("lease", "create", "short", "--reservation", "resource_type=physical:host,min=1,max=1", "--end-date", "+2s") // long enough for a loaded machine to create it before it ends
	out, errOut, err = runClimate(t, "lease", "wait", "short", "--status", "terminated", "--timeout", "30s", "-o", "value", "-c", "status")
	if err != nil || out != "TERMINATED\n" {
		t.Fatalf("wait --status TERMINATED: %v %q\nstderr:\n%s", err, out, errOut)
	}
	// A terminated lease can no longer become ACTIVE.
	c.fails("lease short is TERMINATED: it can no longer become ACTIVE", "lease", "wait", "short")
	// A lease an hour away does not start within the timeout.
	c.ok("lease", "create", "later", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", "+1h", "--end-date", "+1h")
	c.fails("lease later is still PENDING after 100ms (--timeout)", "lease", "wait", "later", "--timeout", "100ms", "--interval", "20ms")
}

func TestCLITokensAndProjects(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("admin-token root ops admin\nalice-token alice physics member\nbob-token bob chemistry member\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, serveOptions{auth: "tokens", tokensFile: tokens})
	c.fails("Authentication required: send a token", "lease", "list")
	c.fails("the token is not valid", "lease", "list", "--token", "wrong")
	c.ok("host", "create", "h1", "--token", "admin-token")
	c.fails("Policy doesn't allow", "host", "list", "--token", "alice-token")

	t.Setenv("CLIMATE_TOKEN", "alice-token")
	c.ok("lease", "create", "mine", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", "+1h", "--end-date", "+1h")
	if got := c.ok("lease", "list", "-o", "value", "-c", "name,project_id"); got != "mine physics\n" {
		t.Fatalf("alice's leases: %q", got)
	}
	// Bob's project sees nothing of alice's and cannot touch it.
	c.fails(`No lease with name or id "mine"`, "lease", "show", "mine", "--token", "bob-token")
	c.fails(`No lease with name or id "mine"`, "lease", "delete", "mine", "--token", "bob-token")
	if got := c.ok("lease", "list", "--token", "bob-token", "-o", "json"); strings.TrimSpace(got) != "[]" {
		t.Fatalf("bob's leases: %q", got)
	}
	c.fails("Only admins may list the leases of another project", "lease", "list", "--project", "physics", "--token", "bob-token")
	if got := c.ok("lease", "list", "--project", "physics", "--token", "admin-token", "-o", "value", "-c", "name"); got != "mine\n" {
		t.Fatalf("admin's list of physics' leases: %q", got)
	}
	if got := c.ok("lease", "list", "--project", "chemistry", "--token", "admin-token", "-o", "value", "-c", "name"); got != "" {
		t.Fatalf("admin's list of chemistry's leases: %q", got)
	}
}

func TestCLIConfigFile(t *testing.T) {
	s := startServer(t, serveOptions{})
	cfgHome := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfgHome)
	t.Setenv("CLIMATE_URL", "")
	os.Unsetenv("CLIMATE_URL")
	path := filepath.Join(cfgHome, "climate", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("url: "+s.url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runClimate(t, "host", "create", "from-config", "-o", "value", "-c", "hypervisor_hostname"); err != nil || out != "from-config\n" {
		t.Fatalf("url from the default config file: %v %q", err, out)
	}
	// The environment wins over the file, and a flag over both.
	t.Setenv("CLIMATE_URL", "http://127.0.0.1:1")
	if _, _, err := runClimate(t, "host", "list"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("CLIMATE_URL did not win over the config file: %v", err)
	}
	if _, _, err := runClimate(t, "host", "list", "--url", s.url); err != nil {
		t.Fatalf("--url did not win: %v", err)
	}
	os.Unsetenv("CLIMATE_URL")

	// --config names another file; a token in a file others can read gets a warning.
	other := filepath.Join(t.TempDir(), "climate.yaml")
	if err := os.WriteFile(other, []byte("url: "+s.url+"\ntoken: abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := runClimate(t, "host", "list", "--config", other); err != nil || !strings.Contains(errOut, "can be read by others (chmod 600 it)") {
		t.Fatalf("--config: %v %q", err, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("server: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runClimate(t, "host", "list", "--config", bad); err == nil || !strings.Contains(err.Error(), `line 1: unknown key "server" (the keys are url and token)`) {
		t.Fatalf("bad config: %v", err)
	}
	if _, _, err := runClimate(t, "host", "list", "--config", filepath.Join(cfgHome, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "config file") {
		t.Fatalf("missing --config file: %v", err)
	}
}

// Every command a user can run documents itself with examples.
func TestCLIHelpHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		n++
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no examples in --help", c.CommandPath())
		}
		if c.Short == "" {
			t.Errorf("%s has no description", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := newRootCmd()
	root.InitDefaultHelpCmd()
	walk(root)
	if n < 30 {
		t.Fatalf("walked only %d commands", n)
	}
	out, _, err := runClimate(t, "lease", "create", "--help")
	if err != nil || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--reservation") {
		t.Fatalf("lease create --help: %v\n%s", err, out)
	}
}

func TestCLICompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, _, err := runClimate(t, "completion", shell)
		if err != nil || !strings.Contains(out, "climate") || len(out) < 500 {
			t.Fatalf("completion %s: %v (%d bytes)", shell, err, len(out))
		}
	}
	// Lease and host names complete from the server.
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "node-a")
	c.ok("lease", "create", "alpha", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", "+1h", "--end-date", "+1h")
	if out := c.ok("__complete", "lease", "show", ""); !strings.Contains(out, "alpha\tPENDING") {
		t.Fatalf("lease name completion:\n%s", out)
	}
	if out := c.ok("__complete", "host", "show", ""); !strings.Contains(out, "node-a") {
		t.Fatalf("host name completion:\n%s", out)
	}
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// TestMain removes the binary climateBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	stopTestKeystones() // keystone_test.go
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// climateBinary builds the climate binary once per test run (the tests that run it as a
// user or an operator would: CLI errors, crashes, replicas, the soak).
func climateBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the climate binary")
	}
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "climate-bin"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "climate")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return binPath
}

// The real binary: errors are one line on stderr with exit code 1, never a stack trace.
func TestCLIBinaryErrors(t *testing.T) {
	bin := climateBinary(t)
	s := startServer(t, serveOptions{})
	for _, args := range [][]string{
		{"lease", "show", "ghost"},
		{"lease", "create", "x", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", "someday"},
		{"lease", "list", "--bogus"},
		{"host", "show"},
	} {
		cmd := exec.Command(bin, append(args, "--url", s.url)...)
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		exit, ok := err.(*exec.ExitError)
		if !ok || exit.ExitCode() != 1 {
			t.Fatalf("climate %s: %v, want exit code 1", strings.Join(args, " "), err)
		}
		msg := stderr.String()
		if stdout.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "climate: ") || strings.Contains(msg, "goroutine") || strings.Contains(msg, "Usage:") {
			t.Fatalf("climate %s: stdout %q, stderr %q; want one line on stderr", strings.Join(args, " "), stdout.String(), msg)
		}
	}
}
