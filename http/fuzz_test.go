package http_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// FuzzCreateLeaseBody posts arbitrary bodies to POST /v1/leases: the answer is never a
// 5xx, always a JSON object, and either a created lease or Blazar's error body whose
// error_code is the status.
func FuzzCreateLeaseBody(f *testing.F) {
	for _, seed := range []string{
		validLease,
		resWith(`{"resource_properties": "[\"==\", \"$gpu\", \"true\"]"}`),
		resWith(`{"hypervisor_properties": ["and", [">=", "$vcpus", "16"], ["in", "$rack", ["r1", "r2"]]]}`),
		resWith(`{"min": "2", "max": "3", "before_end": "snapshot"}`),
		leaseWith(`{"start_date": "now", "end_date": "2026-11-21T12:00:00Z", "before_end_date": "2026-11-21 11:00:00"}`),
		leaseWith(`{"reservations": []}`),
		leaseWith(`{"name": "\u00e9t\u00e9 \ud83c\udf1e", "events": null}`),
		``,
		`{}`,
		`[]`,
		`null`,
		`{"name": `,
		`{"name": 5}`,
		leaseWith(`{"reservations": {}}`),
		leaseWith(`{"reservations": [5]}`),
		resWith(`{"min": 1.5}`),
		resWith(`{"resource_properties": "[\"~\", \"$a\", \"1\"]"}`),
		resWith(`{"resource_properties": "` + strings.Repeat(`[\"not\", `, 40) + `[]` + strings.Repeat("]", 40) + `"}`),
		leaseWith(`{"start_date": "0001-01-01 00:00"}`),
		leaseWith(`{"end_date": "9999-12-31 23:59"}`),
		leaseWith(`{"before_end_date": "2026-11-23 10:00"}`),
		leaseWith(`{"events": [{"event_type": "start_lease"}]}`),
	} {
		f.Add(seed)
	}
	e := newEnv(f, nil)
	for _, body := range []string{
		`{"name": "compute-1", "vcpus": 32, "memory_mb": 131072, "gpu": "true", "rack": "r1"}`,
		`{"name": "compute-2", "vcpus": 16, "memory_mb": 65536, "gpu": "false", "rack": "r1"}`,
		`{"name": "compute-3", "vcpus": 64, "memory_mb": 262144, "gpu": "true", "rack": "r2"}`,
	} {
		e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: body}, http.StatusCreated)
	}

	f.Fuzz(func(t *testing.T, body string) {
		te := *e
		te.t = t
		r := te.do(call{method: "POST", path: "/v1/leases", body: body})
		if r.status >= 500 {
			t.Fatalf("POST /v1/leases %q: %s", body, r)
		}
		if !json.Valid(r.body) {
			t.Fatalf("POST /v1/leases %q: the response is not JSON: %s", body, r)
		}
		checkHeaders(t, r)
		switch {
		case r.status >= 400:
			checkErrorBody(t, r)
		case r.status == http.StatusCreated:
			b := decodeObject(t, r.body)
			id := lookup(t, b, "lease.id")
			// The lease reads back as created; deleting it keeps the hosts free for the
			// next inputs.
			got := te.do(call{method: "GET", path: "/v1/leases/" + id})
			if got.status != http.StatusOK || canonicalLease(t, got.body) != canonicalLease(t, r.body) {
				t.Errorf("GET the created lease: %s\ncreated: %s", got, r.body)
			}
			te.mustDo(call{method: "DELETE", path: "/v1/leases/" + id}, http.StatusNoContent)
		default:
			t.Fatalf("POST /v1/leases %q: status %d, want 201 or a 4xx", body, r.status)
		}
	})
}

// canonicalLease re-encodes a {"lease": …} body with its events and reservations sorted
// by id, since their order is unspecified.
func canonicalLease(t *testing.T, body []byte) string {
	t.Helper()
	var b struct{ Lease map[string]any }
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for _, key := range []string{"events", "reservations"} {
		list, _ := b.Lease[key].([]any)
		sort.Slice(list, func(i, j int) bool {
			a, _ := list[i].(map[string]any)
			c, _ := list[j].(map[string]any)
			return fmt.Sprint(a["id"]) < fmt.Sprint(c["id"])
		})
	}
	out, err := json.Marshal(b.Lease)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
