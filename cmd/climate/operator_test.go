package main

import (
	"os"

	"github.com/spf13/cobra"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 18 (8): OpenStack's habits: -f/--format as -o/--output on every command that has
// -o, -o wide, and lease list --all-projects with a PROJECT ID column when more than one
// project's leases are listed.
func TestOpenStackHabits(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("admin-token root ops admin\nalice-token alice physics member\nbob-token bob chemistry member\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, serveOptions{auth: "tokens", tokensFile: tokens})
	c.ok("host", "create", "n1", "--token", "admin-token")
	c.ok("host", "create", "n2", "--token", "admin-token")
	for _, who := range []string{"alice", "bob"} {
		c.ok("lease", "create", who+"-run", "--token", who+"-token", "--start-date", "2030-01-01 09:00", "--end-date", "2030-01-01 10:00",
			"--reservation", "resource_type=physical:host,min=1,max=1")
	}
	// -f is -o, everywhere -o is
	for _, sub := range allCommands(newRootCmd()) {
		o, f := sub.Flags().Lookup("output"), sub.Flags().Lookup("format")
		if o == nil && sub.InheritedFlags().Lookup("output") != nil {
			o, f = sub.InheritedFlags().Lookup("output"), sub.InheritedFlags().Lookup("format")
		}
		if o == nil {
			continue
		}
		if f == nil || f.Shorthand != "f" || o.Shorthand != "o" {
			t.Errorf("%s has -o but not -f/--format", sub.CommandPath())
		}
	}
	if out, want := c.ok("lease", "list", "-f", "value", "-c", "name", "--token", "alice-token"), c.ok("lease", "list", "-o", "value", "-c", "name", "--token", "alice-token"); out != want || out != "alice-run\n" {
		t.Errorf("lease list -f value: %q, -o value: %q", out, want)
	}
	if out := c.ok("lease", "show", "alice-run", "--format", "json", "--token", "alice-token"); !strings.HasPrefix(out, "{\n") {
		t.Errorf("lease show --format json:\n%s", out)
	}
	t.Setenv("CLIMATE_OUTPUT", "yaml") // the command line's -f wins over the environment, as -o does
	if out := c.ok("lease", "list", "-f", "value", "-c", "name", "--token", "alice-token"); out != "alice-run\n" {
		t.Errorf("CLIMATE_OUTPUT=yaml lease list -f value: %q", out)
	}
	if out := c.ok("lease", "list", "-c", "name", "--token", "alice-token"); !strings.HasPrefix(out, "- name: alice-run") {
		t.Errorf("CLIMATE_OUTPUT=yaml lease list: %q", out)
	}
	os.Unsetenv("CLIMATE_OUTPUT")
	c.fails(`--output/--format "x.ics": want table, wide, json, yaml or value (lease calendar always writes iCalendar; --file FILE writes it to a file)`,
		"lease", "calendar", "-f", "x.ics", "--token", "alice-token")

	// a member sees their project's leases: no project column
	if rows := lines(c.ok("lease", "list", "--token", "alice-token")); len(rows) != 2 || strings.Join(rows[0], " ") != "ID NAME START DATE END DATE STATUS" {
		t.Errorf("alice's lease list: %q", rows)
	}
	// an admin sees every project's, with the project
	for _, args := range [][]string{{}, {"--all-projects"}} {
		out := c.ok(append([]string{"lease", "list", "--token", "admin-token", "--sort-by", "name"}, args...)...)
		rows := lines(out)
		if len(rows) != 3 || strings.Join(rows[0], " ") != "ID NAME PROJECT ID START DATE END DATE STATUS" || rows[1][1] != "alice-run" || rows[1][2] != "physics" || rows[2][2] != "chemistry" {
			t.Errorf("admin's lease list %v:\n%s", args, out)
		}
	}
	// one project: no column, unless --all-projects asked for it
	if rows := lines(c.ok("lease", "list", "--token", "admin-token", "--project", "physics")); len(rows) != 2 || strings.Join(rows[0], " ") != "ID NAME START DATE END DATE STATUS" {
		t.Errorf("admin's lease list --project physics: %q", rows)
	}
	if rows := lines(c.ok("lease", "list", "--token", "alice-token", "--all-projects")); len(rows) != 2 || rows[0][2] != "PROJECT" || rows[1][2] != "physics" {
		t.Errorf("alice's lease list --all-projects: %q", rows)
	}
	c.fails("give --project or --all-projects, not both", "lease", "list", "--project", "physics", "--all-projects", "--token", "admin-token")
	// -o wide: every field
	out := c.ok("lease", "list", "-o", "wide", "--token", "alice-token")
	if head := strings.SplitN(out, "\n", 2)[0]; !strings.Contains(head, "USER ID") || !strings.Contains(head, "CREATED AT") || !strings.Contains(head, "RESERVATIONS") {
		t.Errorf("lease list -o wide:\n%s", out)
	}
	if out := c.ok("host", "list", "-f", "wide", "--no-headers", "-c", "hypervisor_hostname", "--token", "admin-token"); out != "n1\nn2\n" {
		t.Errorf("host list -f wide -c hypervisor_hostname: %q", out)
	}
}

// allCommands returns cmd and every command under it.
func allCommands(cmd *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{cmd}
	for _, sub := range cmd.Commands() {
		out = append(out, allCommands(sub)...)
	}
	return out
}

// Issue 18 (9): --no-headers leaves only the rows: no header line, no count, title or
// "nothing found" line before or after the table.
func TestNoHeadersMeansNoHeaders(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "n1")
	c.ok("host", "create", "n2")
	c.ok("host", "create", "n3")
	out := c.ok("availability", "timeline", "--from", "now", "--to", "+1d", "--step", "6h", "--no-headers")
	rows := lines(out)
	if len(rows) != 4 {
		t.Errorf("timeline --no-headers: want 4 rows:\n%s", out)
	}
	for _, r := range rows {
		if len(r) != 3 || r[2] != "3" {
			t.Errorf("timeline --no-headers: a line that is not a row: %q\n%s", r, out)
		}
	}
	if out := c.ok("availability", "timeline", "--from", "now", "--to", "+1d", "--step", "6h"); !strings.HasPrefix(out, "3 matching hosts\nSTART DATE") {
		t.Errorf("timeline:\n%s", out)
	}
	if out := c.ok("availability", "earliest", "--count", "4", "--duration", "1h", "--no-headers"); out != "" {
		t.Errorf("earliest --no-headers, nothing found: %q", out)
	}
	c.ok("lease", "create", "l", "--reservation", "resource_type=physical:host,min=3,max=3", "--start-date", "+1h", "--end-date", "+2h")
	for _, host := range []string{"n1", "n2"} { // n1 held by the lease, healed; n2 then nothing to heal
		out := c.ok("host", "maintenance", "add", host, "--end", "+3h", "--no-headers")
		if strings.Contains(out, "Reservations holding") || strings.Contains(out, "No reservation") || strings.Contains(out, "\n\n") || strings.Contains(out, "FIELD") {
			t.Errorf("maintenance add %s --no-headers:\n%s", host, out)
		}
	}
}
