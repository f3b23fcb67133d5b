package http_test

import (
	"net/http"
	"reflect"
	"testing"
)

// TestMaintenances walks a host's maintenance window through the API on each store: an
// admin adds one (201, with what healing did: the lease holding the host moved), lists
// and shows it, members and readers are refused in Blazar's words, bad requests are 4xx
// and change nothing, and deleting it puts the host back (204, then 404).
func TestMaintenances(t *testing.T) {
	onEachStore(t, testMaintenances)
}

func testMaintenances(t *testing.T, e *env) {
	h1 := e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "node-1"}`}, http.StatusCreated)["host"].(map[string]any)["id"].(string)
	h2 := e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "node-2"}`}, http.StatusCreated)["host"].(map[string]any)["id"].(string)
	lease := e.mustDo(call{method: "POST", path: "/v1/leases", header: asAlice, body: `{"name": "l", "start_date": "2026-11-21 12:00",
		"end_date": "2026-11-21 14:00", "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]}`}, http.StatusCreated)["lease"].(map[string]any)
	hostOf := func(l map[string]any) string { // the host whose allocations name the lease
		for _, a := range e.mustDo(call{method: "GET", path: "/v1/os-hosts/allocations"}, http.StatusOK)["allocations"].([]any) {
			for _, r := range a.(map[string]any)["reservations"].([]any) {
				if r.(map[string]any)["lease_id"] == l["id"] {
					return a.(map[string]any)["resource_id"].(string)
				}
			}
		}
		t.Fatalf("no host holds lease %v", l["id"])
		return ""
	}
	down := hostOf(lease)
	spare := h1
	if down == h1 {
		spare = h2
	}
	base := "/v1/os-hosts/" + down + "/maintenances"

	// Refusals, before any window: 4xx, nothing recorded.
	for _, c := range []struct {
		name   string
		call   call
		status int
		msg    string
	}{
		{"member", call{method: "POST", path: base, header: asAlice, body: `{"start": "now"}`}, 403, "Policy doesn't allow climate:oshosts:maintenance to be performed."},
		{"reader lists", call{method: "GET", path: "/v1/os-hosts/maintenances", header: asReader}, 403, "climate:oshosts:maintenance"},
		{"end before start", call{method: "POST", path: base, body: `{"start": "2026-11-21 13:00", "end": "2026-11-21 12:00"}`}, 400, "must be later than its start"},
		{"unknown key", call{method: "POST", path: base, body: `{"start": "now", "until": "never"}`}, 400, "until"},
		{"bad date", call{method: "POST", path: base, body: `{"start": "tomorrow"}`}, 400, "tomorrow is an invalid date"},
		{"no start", call{method: "POST", path: base, body: `{"end": "2026-11-21 13:00"}`}, 400, "Missing parameter start"},
		{"reason not text", call{method: "POST", path: base, body: `{"start": "now", "reason": 42}`}, 400, "Malformed parameter reason"},
		{"unknown host", call{method: "POST", path: "/v1/os-hosts/999/maintenances", body: `{"start": "now"}`}, 404, "Object with {'host_id': '999'} not found"},
		{"unknown window", call{method: "DELETE", path: base + "/nope"}, 404, "maintenance_id"},
		{"wrong method", call{method: "PUT", path: base, body: `{}`}, 405, "PUT"},
	} {
		t.Run(c.name, func(t *testing.T) { checkError(t, e.do(c.call), c.status, c.msg) })
	}
	if r := e.do(call{method: "GET", path: "/v1/os-hosts/maintenances"}); r.status != 200 || string(r.body) != `{"maintenances":[]}` {
		t.Fatalf("after refusals: %s", r)
	}

	// Added: the lease moves to the other host.
	out := e.mustDo(call{method: "POST", path: base, body: `{"start": "now", "end": null, "reason": "disk"}`}, http.StatusCreated)
	m := out["maintenance"].(map[string]any)
	want := map[string]any{"id": m["id"], "host_id": down, "start": "2026-11-21T10:00:00.000000", "end": nil, "reason": "disk",
		"created_at": "2026-11-21 10:00:00"}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("maintenance %v, want %v", m, want)
	}
	healing := out["healing"].([]any)
	if len(healing) != 1 {
		t.Fatalf("healing %v", healing)
	}
	h := healing[0].(map[string]any)
	if h["lease_id"] != lease["id"] || h["outcome"] != "replanned" || !reflect.DeepEqual(h["down"], []any{down}) || !reflect.DeepEqual(h["hosts"], []any{spare}) {
		t.Fatalf("healing %v", h)
	}
	if got := hostOf(lease); got != spare {
		t.Fatalf("the lease holds %s, want %s", got, spare)
	}
	id := m["id"].(string)
	for _, path := range []string{base, "/v1/os-hosts/maintenances"} {
		list := e.mustDo(call{method: "GET", path: path}, http.StatusOK)["maintenances"].([]any)
		if len(list) != 1 || !reflect.DeepEqual(list[0], m) {
			t.Errorf("GET %s: %v", path, list)
		}
	}
	if got := e.mustDo(call{method: "GET", path: base + "/" + id}, http.StatusOK)["maintenance"]; !reflect.DeepEqual(got, m) {
		t.Errorf("show: %v", got)
	}
	if got := e.mustDo(call{method: "GET", path: "/v1/os-hosts/" + spare + "/maintenances"}, http.StatusOK)["maintenances"].([]any); len(got) != 0 {
		t.Errorf("the other host's windows: %v", got)
	}
	checkError(t, e.do(call{method: "GET", path: "/v1/os-hosts/" + spare + "/maintenances/" + id}), 404, "maintenance_id")
	checkError(t, e.do(call{method: "DELETE", path: base + "/" + id, header: asAlice}), 403, "climate:oshosts:maintenance")

	// A second window with an end, then both deleted.
	second := e.mustDo(call{method: "POST", path: "/v1/os-hosts/" + spare + "/maintenances",
		body: `{"start": "2026-11-22 10:00", "end": "2026-11-22 12:00"}`}, http.StatusCreated)
	if sm := second["maintenance"].(map[string]any); sm["end"] != "2026-11-22T12:00:00.000000" || sm["reason"] != "" || len(second["healing"].([]any)) != 0 {
		t.Errorf("second window: %v", second)
	}
	e.mustDo(call{method: "DELETE", path: base + "/" + id}, http.StatusNoContent)
	checkError(t, e.do(call{method: "GET", path: base + "/" + id}), 404, "maintenance_id")
	if list := e.mustDo(call{method: "GET", path: "/v1/os-hosts/maintenances"}, http.StatusOK)["maintenances"].([]any); len(list) != 1 {
		t.Errorf("after delete: %v", list)
	}
}
