package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// climate lease calendar writes the leases as an iCalendar file, to stdout or --file, with
// the list's filters.
func TestLeaseCalendar(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "n1")
	l := c.leaseJSON("lease", "create", "train", "--start-date", "2030-01-07 09:00", "--end-date", "2030-01-07 17:00",
		"--reservation", "resource_type=physical:host,min=1,max=1")
	out := c.ok("lease", "calendar")
	for _, want := range []string{"BEGIN:VCALENDAR\r\n", "UID:" + l.ID + "@climate\r\n", "DTSTART:20300107T090000Z\r\n", "SUMMARY:train\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("climate lease calendar lacks %q:\n%s", want, out)
		}
	}
	file := filepath.Join(t.TempDir(), "leases.ics")
	if out := c.ok("lease", "calendar", "--status", "ACTIVE", "--file", file); out != "" {
		t.Errorf("with --file, stdout %q", out)
	}
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), "BEGIN:VCALENDAR") || strings.Contains(string(b), "BEGIN:VEVENT") {
		t.Errorf("--status ACTIVE --file: %v\n%s", err, b)
	}
	c.fails("unknown flag", "lease", "calendar", "--bogus")
}
