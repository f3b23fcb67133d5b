package ical_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"climate/ical"
)

var t0 = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)

func sample() []ical.Event {
	long := strings.Repeat("é, ;\\ ", 30) + "\nnext line"
	return []ical.Event{
		{UID: "a@climate", Start: t0, End: t0.Add(8 * time.Hour), Summary: "gpu-run", Description: "2 hosts: node-1, node-2", Status: "CONFIRMED", Stamp: t0.Add(-time.Hour)},
		{UID: "b@climate", Start: t0.Add(24 * time.Hour), End: t0.Add(26 * time.Hour), Summary: "weird; name, with\\ text", Description: long, Status: "TENTATIVE", Stamp: t0},
	}
}

// Lines end in CRLF, none is longer than 75 octets, folding never splits a character,
// and unfolding gives back the escaped values.
func TestWriteFoldsAndEscapes(t *testing.T) {
	var b bytes.Buffer
	if err := ical.Write(&b, "-//Climate//EN", "physics", sample()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, "BEGIN:VCALENDAR\r\nVERSION:2.0\r\n") || !strings.HasSuffix(out, "END:VCALENDAR\r\n") {
		t.Fatalf("calendar:\n%s", out)
	}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\r\n"), "\r\n") {
		if len(l) > 75 || strings.ContainsAny(l, "\r\n") || !utf8.ValidString(l) {
			t.Errorf("line %q: %d octets", l, len(l))
		}
	}
	unfolded := strings.ReplaceAll(out, "\r\n ", "")
	for _, want := range []string{"DTSTART:20300107T090000Z", "DTEND:20300107T170000Z", `SUMMARY:weird\; name\, with\\ text`,
		`DESCRIPTION:` + strings.Repeat(`é\, \;\\ `, 30) + `\nnext line`, "STATUS:TENTATIVE", "UID:a@climate", "DTSTAMP:20300107T080000Z"} {
		if !strings.Contains(unfolded, want+"\r\n") {
			t.Errorf("unfolded calendar lacks %q", want)
		}
	}
}

// Python's icalendar (Debian's python3-icalendar), a real parser, reads the calendar back:
// the same events, times and texts.
func TestPythonIcalendarReadsIt(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import icalendar").Run(); err != nil {
		if os.Getenv("CLIMATE_TEST_ICALENDAR") == "required" {
			t.Fatalf("python3-icalendar is required: %v", err)
		}
		t.Skip("python3-icalendar is not installed (apt-get install python3-icalendar)")
	}
	var b bytes.Buffer
	if err := ical.Write(&b, "-//Climate//EN", "physics", sample()); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "-c", `
import sys, icalendar
cal = icalendar.Calendar.from_ical(sys.stdin.buffer.read())
for e in cal.walk("VEVENT"):
    print(e["UID"], e.decoded("DTSTART").isoformat(), e.decoded("DTEND").isoformat(), e["STATUS"], repr(str(e["SUMMARY"])), repr(str(e["DESCRIPTION"])))
`)
	cmd.Stdin = &b
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 icalendar: %v\n%s", err, out)
	}
	s := sample()
	want := "a@climate 2030-01-07T09:00:00+00:00 2030-01-07T17:00:00+00:00 CONFIRMED 'gpu-run' '2 hosts: node-1, node-2'\n" +
		"b@climate 2030-01-08T09:00:00+00:00 2030-01-08T11:00:00+00:00 TENTATIVE " + pyRepr(s[1].Summary) + " " + pyRepr(s[1].Description) + "\n"
	if string(out) != want {
		t.Errorf("python3 icalendar read:\n%s\nwant:\n%s", out, want)
	}
}

// pyRepr is Python's repr of a str without quotes inside (enough for these samples).
func pyRepr(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s) + "'"
}
