package http_test

import (
	"fmt"
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
	checkError(t, r, http.StatusConflict, "no window of 3h0m0s in which the lease's reservations fit")
}

// Earliest windows for instance slots and floating IPs: "6 h with 8 slots of 4 vCPUs /
// 16 GB and 2 addresses of ext" waits for a whole-host lease to end (it takes half the
// slots' room) and then for a floating IP lease (it takes one of the two addresses).
func TestEarliestSlotsAndFloatingIPs(t *testing.T) {
	e := newEnv(t, nil)
	for _, name := range []string{"s1", "s2"} {
		e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "` + name + `", "vcpus": 16, "memory_mb": 65536}`}, 201)
	}
	for _, a := range []string{"172.24.4.1", "172.24.4.2"} {
		e.mustDo(call{method: "POST", path: "/v1/floatingips", body: `{"floating_network_id": "ext", "floating_ip_address": "` + a + `"}`}, 201)
	}
	e.mustDo(call{method: "POST", path: "/v1/leases", body: `{"name": "host", "start_date": "2026-11-22 10:00", "end_date": "2026-11-22 14:00",
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`}, 201)
	e.mustDo(call{method: "POST", path: "/v1/leases", body: `{"name": "ip", "start_date": "2026-11-22 12:00", "end_date": "2026-11-22 18:00",
		"reservations": [{"resource_type": "virtual:floatingip", "network_id": "ext", "amount": 1}]}`}, 201)

	q := url.Values{"slots": {"8"}, "vcpus": {"4"}, "memory_mb": {"16384"}, "floatingips": {"2"}, "network_id": {"ext"},
		"duration": {"6h"}, "after": {"2026-11-22 08:00"}, "limit": {"2"}}
	slots := e.mustDo(call{method: "GET", path: "/v1/availability/earliest?" + q.Encode()}, 200)["slots"].([]any)
	if len(slots) != 1 || slots[0].(map[string]any)["start_date"] != "2026-11-22T18:00:00.000000" {
		t.Fatalf("earliest 8 slots + 2 IPs: %v, want one window from 18:00", slots)
	}
	q.Set("floatingips", "1")
	slots = e.mustDo(call{method: "GET", path: "/v1/availability/earliest?" + q.Encode()}, 200)["slots"].([]any)
	if len(slots) != 2 || slots[0].(map[string]any)["start_date"] != "2026-11-22T14:00:00.000000" {
		t.Fatalf("earliest 8 slots + 1 IP: %v, want 14:00 first", slots)
	}
	q.Set("slots", "9") // more than both hosts hold even when nothing is booked
	if slots = e.mustDo(call{method: "GET", path: "/v1/availability/earliest?" + q.Encode()}, 200)["slots"].([]any); len(slots) != 0 {
		t.Fatalf("9 slots of 4 vCPUs on 2 hosts of 16: %v, want none", slots)
	}
	q.Set("slots", "4")
	slots = e.mustDo(call{method: "GET", path: "/v1/availability/earliest?" + q.Encode()}, 200)["slots"].([]any)
	if slots[0].(map[string]any)["start_date"] != "2026-11-22T08:00:00.000000" {
		t.Fatalf("earliest 4 slots + 1 IP: %v, want at once (one host has room for 4)", slots)
	}

	// A lease asking for the same with start_date "earliest" (for 30 h, from now: the fake
	// clock's 2026-11-21 10:00) is booked from when both have ended.
	l := e.mustDo(call{method: "POST", path: "/v1/leases", body: `{"name": "soonest", "start_date": "earliest", "duration": "30h",
		"reservations": [{"resource_type": "virtual:instance", "amount": 8, "vcpus": 4, "memory_mb": 16384, "disk_gb": 0, "affinity": null, "resource_properties": ""},
		{"resource_type": "virtual:floatingip", "network_id": "ext", "amount": 2}]}`}, 201)["lease"].(map[string]any)
	if l["start_date"] != "2026-11-22T18:00:00.000000" {
		t.Fatalf("earliest mixed lease starts %v", l["start_date"])
	}

	// The timeline counts slots of a size and addresses of a network free for a whole
	// bucket: 4 of the 8 slots of 4 vCPUs while a host is held whole (10–14), 1 of the 2
	// addresses while one is leased (12–18), nothing once "soonest" holds all (from 18).
	tl := e.mustDo(call{method: "GET", path: "/v1/availability/timeline?" + url.Values{
		"from": {"2026-11-22 08:00"}, "to": {"2026-11-22 20:00"}, "step": {"4h"}, "vcpus": {"4"}, "memory_mb": {"16384"}, "network_id": {"ext"}}.Encode()}, 200)
	var slotsFree, ipsFree []float64
	for _, b := range tl["timeline"].([]any) {
		slotsFree = append(slotsFree, b.(map[string]any)["free_slots"].(float64))
		ipsFree = append(ipsFree, b.(map[string]any)["free_floatingips"].(float64))
	}
	if fmt.Sprint(slotsFree) != "[4 4 0]" || fmt.Sprint(ipsFree) != "[2 1 0]" {
		t.Fatalf("timeline 08–12, 12–16, 16–20: free slots %v, free IPs %v; want [4 4 0] and [2 1 0]", slotsFree, ipsFree)
	}

	for _, c := range []struct{ query, msg string }{
		{"duration=1h&vcpus=2", "slots (how many instance slots) is required"},
		{"duration=1h&slots=2&vcpus=2", "Missing parameter memory_mb"},
		{"duration=1h&slots=2&vcpus=0&memory_mb=512", "Malformed parameter vcpus"},
		{"duration=1h&slots=2&vcpus=1&memory_mb=512&affinity=maybe", "Malformed parameter affinity"},
		{"duration=1h&network_id=ext", "floatingips (how many addresses) is required"},
		{"duration=1h&floatingips=1", "Missing parameter network_id"},
	} {
		checkError(t, e.do(call{method: "GET", path: "/v1/availability/earliest?" + c.query}), http.StatusBadRequest, c.msg)
	}
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
		{"GET", "/v1/availability/timeline?from=2026-11-22+00:00&to=2026-11-23+00:00&vcpus=2", "", "vcpus and memory_mb must be at least 1"},
		{"GET", "/v1/availability/timeline?from=2026-11-22+00:00&to=2026-11-23+00:00&vcpus=x&memory_mb=1", "", "not a non-negative integer"},
		{"POST", "/v1/leases", `{"name": "x", "start_date": "earliest", ` + res + `}`, "needs a positive duration"},
		{"POST", "/v1/leases", `{"name": "x", "start_date": "earliest", "duration": "1h", "end_date": "2026-11-23 00:00", ` + res + `}`, "not an end_date"},
		{"POST", "/v1/leases", `{"name": "x", "start_date": "earliest", "duration": "1h"}`, "needs at least one reservation"},
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
