package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"climate/http/api"
)

// dateHelp is what the date flags accept, for their errors and help.
const dateHelp = `now, +DURATION (+30m, +2h, +1d12h), "YYYY-MM-DD HH:MM" (UTC) or RFC 3339 (2030-01-02T15:04:05Z)`

// dateLayouts are the absolute date forms accepted; dates without an offset are UTC, as
// in Blazar.
var dateLayouts = []string{api.DateFormat, "2006-01-02 15:04:05", time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02T15:04:05", api.TimeFormat, "2006-01-02"}

// parseDate reads a date flag. A +DURATION is relative to base. It returns the instant
// (zero for "now") and whether it was "now".
func parseDate(flag, s string, base time.Time) (t time.Time, now bool, err error) {
	s = strings.TrimSpace(s)
	if s == "now" {
		return time.Time{}, true, nil
	}
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		d, ok := api.ParseDuration(rest)
		if !ok {
			return time.Time{}, false, fmt.Errorf("--%s %q: %q is not a duration; use forms like +30m, +2h, +1d12h", flag, s, rest)
		}
		return base.Add(d).UTC().Truncate(time.Microsecond), false, nil // the server keeps microseconds
	}
	for _, layout := range dateLayouts {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), false, nil
		}
	}
	return time.Time{}, false, fmt.Errorf("--%s %q: not a date; want %s", flag, s, dateHelp)
}

// wireDate formats an instant for a request, to the microsecond (the server's precision).
func wireDate(t time.Time) string { return t.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano) }

// parseDelta reads the duration of --prolong-for and friends: Blazar's N[s|m|h|d] and
// Go-style forms such as 1d12h.
func parseDelta(flag, s string) (time.Duration, error) {
	d, ok := api.ParseDuration(s)
	if !ok {
		return 0, fmt.Errorf("--%s %q: not a positive duration; use forms like 30m, 2h, 1d or 1d12h", flag, s)
	}
	return d, nil
}

// reservationKeys are the keys --reservation accepts (Blazar's client list, plus
// resource_type and before_end).
var reservationKeys = []string{"id", "resource_type", "min", "max", "hypervisor_properties", "resource_properties",
	"before_end", "vcpus", "memory_mb", "disk_gb", "amount", "affinity", "network_id", "required_floatingips", "flavor_id"}

// textKeys are reservation keys whose values stay strings even when they look like
// numbers (Nova flavor ids are often "1", "42").
var textKeys = []string{"id", "resource_type", "hypervisor_properties", "resource_properties", "network_id", "flavor_id", "before_end"}

// lastKeyValue splits "…,key=value" from the right at the last known key, so values may
// hold commas (JSON filters) as in Blazar's client.
var lastKeyValue = regexp.MustCompile(`^(?:(.*),)?(` + strings.Join(reservationKeys, "|") + `)=(.*)$`)

// strayKey finds an unknown ",key=" inside a value that is not JSON (which may hold anything).
var strayKey = regexp.MustCompile(`,\s*([A-Za-z_][A-Za-z0-9_]*)=`)

const reservationHelp = `KEY=VALUE,… with keys ` + "resource_type, min, max, hypervisor_properties, resource_properties, before_end, id (on update), vcpus, memory_mb, disk_gb, amount, affinity, flavor_id, network_id, required_floatingips"

// parseReservation reads a --reservation value into a request dictionary. Integers go out
// as JSON numbers and required_floatingips as a JSON list, like Blazar's client.
func parseReservation(flag, s string) (map[string]any, error) {
	out := map[string]any{}
	rest := strings.TrimSpace(s)
	if rest == "" {
		return nil, fmt.Errorf("--%s is empty: want %s", flag, reservationHelp)
	}
	for rest != "" {
		m := lastKeyValue.FindStringSubmatch(rest)
		if m == nil {
			key, _, _ := strings.Cut(rest[strings.LastIndex(rest, ",")+1:], "=")
			if !strings.Contains(rest, "=") || slices.Contains(reservationKeys, key) {
				return nil, fmt.Errorf("--%s %q: want %s", flag, s, reservationHelp)
			}
			return nil, fmt.Errorf("--%s %q: unknown key %q; want %s", flag, s, key, reservationHelp)
		}
		key, value := m[2], m[3]
		if u := strayKey.FindStringSubmatch(value); u != nil && !strings.HasPrefix(value, "[") {
			return nil, fmt.Errorf("--%s %q: unknown key %q; want %s", flag, s, u[1], reservationHelp)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("--%s %q: %s is given twice", flag, s, key)
		}
		switch {
		case key == "required_floatingips":
			var list []string
			if err := json.Unmarshal([]byte(value), &list); err != nil {
				return nil, fmt.Errorf("--%s: required_floatingips=%q is not a JSON list of strings", flag, value)
			}
			out[key] = list
		case isInteger(value) && !slices.Contains(textKeys, key):
			n, _ := strconv.Atoi(value)
			out[key] = n
		default:
			out[key] = value
		}
		rest = m[1]
	}
	return out, nil
}

func isInteger(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}
