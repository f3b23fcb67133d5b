package http_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"climate/http/api"
)

// TestLimitsAndUsage drives GET/PUT /v1/projects/{id}/limits and GET /v1/usage on each
// store: an admin sets limits (the GET shape is accepted back), bad bodies are 400s that
// change nothing, members read their own project's limits and usage and not another's,
// a refused lease is a 403 naming the rule, and a lease shows its cost.
func TestLimitsAndUsage(t *testing.T) {
	onEachStore(t, testLimitsAndUsage)
}

func limitsOf(t *testing.T, r response) api.Limits {
	t.Helper()
	var body struct {
		Limits api.Limits `json:"limits"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &body) != nil {
		t.Fatalf("limits: %s", r)
	}
	return body.Limits
}

func testLimitsAndUsage(t *testing.T, e *env) {
	e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "node-1", "gpu": "true"}`}, http.StatusCreated)
	e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "node-2"}`}, http.StatusCreated)
	put := func(body string, who map[string]string) response {
		return e.do(call{method: "PUT", path: "/v1/projects/physics/limits", body: body, header: who})
	}
	set := limitsOf(t, put(`{"budget": 20, "max_hosts": 1, "max_lease_duration": "1d", "prices": {"host": 2},
		"multipliers": [{"property": "gpu", "value": "true", "factor": 4}]}`, nil))
	if *set.Budget != 20 || *set.MaxHosts != 1 || *set.MaxLeaseDuration != 86400 || set.Prices["host"] != 2 || set.Prices["vcpu"] != 1 || *set.Remaining != 20 {
		t.Errorf("after PUT: %+v", set)
	}
	// GET's own shape goes back in, read-only fields aside.
	again := limitsOf(t, put(`{"limits": {"project_id": "physics", "max_hosts": 1, "budget": 20}}`, nil))
	if *again.MaxHosts != 1 || *again.Budget != 20 {
		t.Errorf("after PUT of the GET shape: %+v", again)
	}
	for _, c := range []struct{ body, msg string }{
		{`{"max_hosts": -1}`, "max_hosts must be from 0"},
		{`{"max_hosts": "many"}`, "Malformed parameter max_hosts"},
		{`{"budget": "lots"}`, "Malformed parameter budget"},
		{`{"prices": {"gpu": 1}}`, `unknown resource class "gpu"`},
		{`{"prices": {"host": "cheap"}}`, "Malformed parameter prices"},
		{`{"prices": [1, 2]}`, "Malformed parameter prices"},
		{`{"multipliers": [{"property": "gpu", "value": "true", "factor": -2}]}`, "must be above 0"},
		{`{"multipliers": {"gpu": 4}}`, "Malformed parameter multipliers"},
		{`{"max_advance": 0}`, "max_advance must be a positive number of seconds"},
		{`{"max_advance": "soon"}`, "max_advance must be a number of seconds or a duration"},
		{`{"charged": 0}`, "charged is read-only"},
		{`{"max_host": 3}`, `Unknown parameter "max_host"`},
		{`{"exempt": "yes"}`, "Malformed parameter exempt"},
		{`[1]`, "Malformed request body"},
	} {
		checkError(t, put(c.body, nil), http.StatusBadRequest, c.msg)
	}
	checkError(t, put(`{"max_hosts": 100}`, asAlice), http.StatusForbidden, "climate:limits:put")
	now := limitsOf(t, e.do(call{method: "GET", path: "/v1/projects/physics/limits", header: asAlice}))
	if *now.MaxHosts != 1 || *now.Budget != 20 || now.UpdatedAt == nil || *now.UpdatedAt != *again.UpdatedAt {
		t.Errorf("refused changes changed the limits: %+v", now)
	}
	checkError(t, e.do(call{method: "GET", path: "/v1/projects/physics/limits", header: asBob}), http.StatusForbidden, "climate:limits:get")
	checkError(t, e.do(call{method: "GET", path: "/v1/usage?project_id=physics", header: asBob}), http.StatusForbidden, "climate:usage:get")
	checkError(t, e.do(call{method: "DELETE", path: "/v1/projects/physics/limits"}), http.StatusMethodNotAllowed)
	checkError(t, e.do(call{method: "GET", path: "/v1/usage?from=2030-01-02%2000:00&to=2030-01-01%2000:00", header: asAlice}), http.StatusBadRequest, "from must be earlier than to")

	lease := func(name, start, end string, hosts int) response {
		b, _ := json.Marshal(map[string]any{"name": name, "start_date": start, "end_date": end,
			"reservations": []map[string]any{{"resource_type": "physical:host", "min": hosts, "max": hosts}}})
		return e.do(call{method: "POST", path: "/v1/leases", header: asAlice, body: string(b)})
	}
	checkError(t, lease("two", "2030-01-01 10:00", "2030-01-01 12:00", 2), http.StatusForbidden, "may hold at most 1 hosts at once")
	checkError(t, lease("long", "2030-01-01 10:00", "2030-01-02 10:01", 1), http.StatusForbidden, "maximum lease duration of 86400 seconds")
	r := lease("one", "2030-01-01 10:00", "2030-01-01 12:00", 1)
	var created struct {
		Lease api.Lease `json:"lease"`
	}
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &created) != nil || created.Lease.Cost == nil {
		t.Fatalf("create: %s", r)
	}
	cost := *created.Lease.Cost // 2 h at 2 per host-hour, ×4 on the GPU host
	if cost != 4 && cost != 16 {
		t.Errorf("cost %v, want 4 or 16", cost)
	}
	var got struct {
		Lease api.Lease `json:"lease"`
	}
	if r := e.do(call{method: "GET", path: "/v1/leases/" + created.Lease.ID, header: asAlice}); json.Unmarshal(r.body, &got) != nil || got.Lease.Cost == nil || *got.Lease.Cost != cost {
		t.Errorf("GET lease: %s", r)
	}
	var usage struct {
		Usage []api.Usage `json:"usage"`
	}
	for _, who := range []map[string]string{asAlice, nil} {
		r = e.do(call{method: "GET", path: "/v1/usage", header: who})
		if json.Unmarshal(r.body, &usage) != nil || len(usage.Usage) != 1 {
			t.Fatalf("usage: %s", r)
		}
		if u := usage.Usage[0]; u.ProjectID != "physics" || u.ReservedHours != 2 || u.HeldHours != 0 || u.Charged != cost || u.Status != "open" || u.Class != "host" {
			t.Errorf("usage: %+v", u)
		}
	}
	if r := e.do(call{method: "GET", path: "/v1/usage", header: asBob}); json.Unmarshal(r.body, &usage) != nil || len(usage.Usage) != 0 {
		t.Errorf("another project's usage: %s", r)
	}
}
