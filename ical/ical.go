// Package ical writes iCalendar (RFC 5545) calendars of events: what calendar tools import
// or subscribe to. It writes only what Climate needs: VEVENTs with a UID, times in UTC, a
// summary, a description and a status, escaped and folded as the RFC asks.
package ical

import (
	"bufio"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Event is one VEVENT.
type Event struct {
	UID         string
	Start, End  time.Time
	Summary     string
	Description string
	// Status is TENTATIVE, CONFIRMED or CANCELLED ("" for none).
	Status string
	// Stamp is when the event was last changed (DTSTAMP).
	Stamp time.Time
}

// Write writes a calendar named name holding events.
func Write(w io.Writer, prodID, name string, events []Event) error {
	bw := bufio.NewWriter(w)
	line := func(name, value string) { writeLine(bw, name+":"+value) }
	line("BEGIN", "VCALENDAR")
	line("VERSION", "2.0")
	line("PRODID", escape(prodID))
	line("CALSCALE", "GREGORIAN")
	line("X-WR-CALNAME", escape(name))
	for _, e := range events {
		line("BEGIN", "VEVENT")
		line("UID", escape(e.UID))
		line("DTSTAMP", utc(e.Stamp))
		line("DTSTART", utc(e.Start))
		line("DTEND", utc(e.End))
		line("SUMMARY", escape(e.Summary))
		if e.Description != "" {
			line("DESCRIPTION", escape(e.Description))
		}
		if e.Status != "" {
			line("STATUS", e.Status)
		}
		line("END", "VEVENT")
	}
	line("END", "VCALENDAR")
	return bw.Flush()
}

// utc formats t as a UTC date-time (RFC 5545 §3.3.5, form #2).
func utc(t time.Time) string { return t.UTC().Format("20060102T150405Z") }

// escape escapes a TEXT value (§3.3.11): backslash, semicolon, comma and newlines.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, ";", `\;`, ",", `\,`, "\r\n", `\n`, "\n", `\n`, "\r", `\n`).Replace(s)
}

// writeLine writes a content line folded at 75 octets (§3.1), never inside a UTF-8
// character, each line ending in CRLF.
func writeLine(w *bufio.Writer, s string) {
	limit := 75
	for len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		w.WriteString(s[:cut] + "\r\n ")
		s = s[cut:]
		limit = 74 // the continuation's leading space counts
	}
	w.WriteString(s + "\r\n")
}
