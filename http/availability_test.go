package http_test

import (
	"net/http"
	"net/url"
	"testing"
)

// The availability extensions on a small calendar: two gpu hosts, one booked tomorrow
// 10:00–14:00 (the fake clock starts 2026-11-21 10:00).
func TestAvailabilityAndEarliestLeases(t *testing.T) {
	e := newEnv(t, nil)
	for _, name := range []string{"g1", "g2"} {
		e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "` + name + `", "gpu": "true"}`}, 201)
	}
	e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "c1", "gpu": "false"}`}, 201)
	gpu := `"resource_properties": "[\"==\", \"$gpu\", \"true\"]"`
	e.mustDo(call{method: "POST", path: "/v1/leases", body: `{"name": "busy", "start_date": "2026-11-22 10:00", "end_date": "2026-11-22 14:00",
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, ` + gpu + `}]}`}, 201)

	q := url.Values{"count": {"2"}, "duration": {"3h"}, "after": {"2026-11-22 08:00"}, "resource_properties": {`["==", "$gpu", "true"]`}, "limit": {"2"}}
	got := e.mustDo(call{method: "GET", path: "/v1/availability/earliest?" + q.Encode()}, 200)
	slots := got["slots"].([]any)
	// 08:00–11:00 collides with the 10:00 booking; both gpu hosts are free again from 14:00
	// and stay free, so there is no second, distinct window to offer.
	if len(slots) != 1 || slots[0].(map[string]any)["start_date"] != "2026-11-22T14:00:00.000000" || slots[0].(map[string]any)["free_hosts"] != float64(2) {
		t.Fatalf("earliest slots: %v", slots)
	}
	q.Set("count", "1")
	got = e.mustDo(call{method: "GET", path: "/v1/availability/earliest?" + q.Encode()}, 200)
	if s := got["slots"].([]any)[0].(map[string]any); s["start_date"] != "2026-11-22T08:00:00.000000" || s["free_hosts"] != float64(1) {
		t.Fatalf("one host is free at once: %v", s)
	}

	tl := e.mustDo(call{method: "GET", path: "/v1/availability/timeline?" + url.Values{
		"from": {"2026-11-22 08:00"}, "to": {"2026-11-22 16:00"}, "step": {"2h"}, "resource_properties": {`["==", "$gpu", "true"]`}}.Encode()}, 200)
	var free []float64
	for _, b := range tl["timeline"].([]any) {
		free = append(free, b.(map[string]any)["free_hosts"].(float64))
	}
	if tl["matching_hosts"] != float64(2) || len(free) != 4 || free[0] != 2 || free[1] != 1 || free[2] != 1 || free[3] != 2 {
		t.Fatalf("timeline: matching %v, free %v", tl["matching_hosts"], free)
	}

	// A dry run shows the plan and writes nothing.
	before := e.mustDo(call{method: "GET", path: "/v1/leases"}, 200)
	dry := e.mustDo(call{method: "POST", path: "/v1/leases", body: `{"name": "try", "start_date": "2026-11-22 10:00", "end_date": "2026-11-22 11:00", "dry_run": true,
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, ` + gpu + `}]}`}, 200)
	hosts := dry["lease"].(map[string]any)["reservations"].([]any)[0].(map[string]any)["hosts"].([]any)
	if dry["dry_run"] != true || len(hosts) != 1 {
		t.Fatalf("dry run: %v", dry)
	}
	after := e.mustDo(call{method: "GET", path: "/v1/leases"}, 200)
	if len(after["leases"].([]any)) != len(before["leases"].([]any)) {
		t.Fatal("a dry run wrote a lease")
	}
	r := e.do(call{method: "POST", path: "/v1/leases", body: `{"name": "try", "start_date": "2026-11-22 10:00", "end_date": "2026-11-22 11:00", "dry_run": true,
		"reservations": [{"resource_type": "physical:host", "min": 2, "max": 2, ` + gpu + `}]}`})
	checkError(t, r, http.StatusConflict, "Not enough hosts available")

	// start_date "earliest" books the first window where both gpu hosts are free.
	l := e.mustDo(call{method: "POST", path: "/v1/leases", body: `{"name": "soonest", "start_date": "earliest", "duration": "3h", "deadline": "2026-11-23 00:00",
		"reservations": [{"resource_type": "physical:host", "min": 2, "max": 2, ` + gpu + `}]}`}, 201)["lease"].(map[string]any)
	if l["start_date"] != "2026-11-21T10:00:00.000000" || l["end_date"] != "2026-11-21T13:00:00.000000" {
		t.Fatalf("earliest lease at %v–%v, want now (both hosts free until tomorrow 10:00)", l["start_date"], l["end_date"])
	}
	l = e.mustDo(call{method: "POST", path: "/v1/leases", body: `{"name": "next", "start_date": "earliest", "duration": "1d", 
		"reservations": [{"resource_type": "physical:host", "min": 2, "max": 2, ` + gpu + `}]}`}, 201)["lease"].(map[string]any)
	if l["start_date"] != "2026-11-22T14:00:00.000000" {
		t.Fatalf("a day-long lease for both gpu hosts starts %v, want after the busy lease", l["start_date"])
	}
	r = e.do(call{method: "POST", path: "/v1/leases", body: `{"name": "never", "start_date": "earliest", "duration": "3h", "deadline": "2026-11-21 15:00",
		"reservations": [{"resource_type": "physical:host", "min": 2, "max": 2, ` + gpu + `}]}`})
	checkError(t, r, http.StatusConflict, "no window of 3h0m0s with 2 matching hosts free")
}

func TestAvailabilityBadInput(t *testing.T) {
	e := newEnv(t, nil)
	e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "h"}`}, 201)
	res := `"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]`
	cases := []struct {
		method, path, body, msg string
	}{
		{"GET", "/v1/availability/earliest?duration=", "", "duration must be positive"},
		{"GET", "/v1/availability/earliest?duration=soon", "", `duration="soon" is not a positive duration`},
		{"GET", "/v1/availability/earliest?duration=1h&count=-1", "", "not a non-negative integer"},
		{"GET", "/v1/availability/earliest?duration=1h&limit=500", "", "limit must be at most"},
		{"GET", "/v1/availability/earliest?duration=1h&after=tomorrow", "", "is an invalid date"},
		{"GET", "/v1/availability/earliest?duration=1h&colour=red", "", `Unknown query parameter "colour"`},
		{"GET", "/v1/availability/earliest?duration=1h&count=1&count=2", "", "given 2 times"},
		{"GET", "/v1/availability/earliest?duration=1h&resource_properties=%5B%22%3D%3D%22%2C%22%24nope%22%2C%221%22%5D", "", `Unknown property "nope"`},
		{"GET", "/v1/availability/timeline?from=2026-11-22+00:00", "", "from and to are required"},
		{"GET", "/v1/availability/timeline?from=2026-11-22+00:00&to=2026-11-21+00:00", "", "to must be later than from"},
		{"GET", "/v1/availability/timeline?from=2026-11-22+00:00&to=2027-11-21+00:00&step=1m", "", "use a larger step"},
		{"POST", "/v1/leases", `{"name": "x", "start_date": "earliest", ` + res + `}`, "needs a positive duration"},
		{"POST", "/v1/leases", `{"name": "x", "start_date": "earliest", "duration": "1h", "end_date": "2026-11-23 00:00", ` + res + `}`, "not an end_date"},
		{"POST", "/v1/leases", `{"name": "x", "start_date": "earliest", "duration": "1h"}`, "exactly one physical:host reservation"},
		{"POST", "/v1/leases", `{"name": "x", "start_date": "earliest", "duration": "1h", "deadline": "2026-11-21 10:30", ` + res + `}`, "leaves no room"},
		{"POST", "/v1/leases", `{"name": "x", "start_date": "2026-11-22 00:00", "end_date": "2026-11-23 00:00", "duration": "1h", ` + res + `}`, `go with start_date "earliest"`},
		{"POST", "/v1/leases", `{"name": "x", "start_date": "2026-11-22 00:00", "end_date": "2026-11-23 00:00", "dry_run": "yes", ` + res + `}`, "Malformed parameter dry_run"},
		{"POST", "/v1/leases", `{"name": "x", "start_date": "earliest", "duration": 3600, ` + res + `}`, "Malformed parameter duration"},
		{"POST", "/v1/leases", `{"name": "x", "start_date": "now", "end_date": "earliest", ` + res + `}`, `end_date cannot be "earliest"`},
	}
	for _, c := range cases {
		r := e.do(call{method: c.method, path: c.path, body: c.body})
		checkError(t, r, http.StatusBadRequest, c.msg)
	}
	if leases := e.mustDo(call{method: "GET", path: "/v1/leases"}, 200)["leases"].([]any); len(leases) != 0 {
		t.Fatalf("bad requests wrote %d leases", len(leases))
	}
	// Updates take no "earliest".
	id := e.mustDo(call{method: "POST", path: "/v1/leases", body: `{"name": "x", "start_date": "2026-11-22 00:00", "end_date": "2026-11-23 00:00", ` + res + `}`}, 201)["lease"].(map[string]any)["id"].(string)
	checkError(t, e.do(call{method: "PUT", path: "/v1/leases/" + id, body: `{"start_date": "earliest"}`}), http.StatusBadRequest, "only accepted when creating")
}
