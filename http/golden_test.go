package http_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// step is one request of the golden scenario. path and body may use {{var}} placeholders
// saved by earlier steps.
type step struct {
	name    string // golden file testdata/<name>.golden.json; "" for bodiless responses
	advance time.Duration
	call
	status int
	save   map[string]string                    // var → dotted path in the response body
	check  func(t *testing.T, b map[string]any) // extra assertions
}

const gpuLease = `{
	"name": "gpu-lease",
	"start_date": "2026-11-22 10:00",
	"end_date": "2026-11-23 10:00",
	"reservations": [{
		"resource_type": "physical:host", "min": 1, "max": 2,
		"hypervisor_properties": "",
		"resource_properties": "[\"==\", \"$gpu\", \"true\"]"
	}],
	"events": []
}`

const cpuLease = `{
	"name": "cpu-lease",
	"start_date": "2026-11-22 12:00",
	"end_date": "2026-11-22 18:00",
	"before_end_date": "2026-11-22 17:00",
	"reservations": [{
		"resource_type": "physical:host", "min": "1", "max": 1,
		"hypervisor_properties": "[\">=\", \"$memory_mb\", \"65536\"]",
		"resource_properties": ["==", "$rack", "r1"]
	}]
}`

// TestGolden walks through the API as a client would and compares every response body
// with a golden file: hosts, properties, leases, allocations, the version document and
// representative errors.
func TestGolden(t *testing.T) {
	e := newEnv(t, nil)
	norm := newNormalizer(e.url)
	vars := map[string]string{}
	seenIDs := map[string]bool{}

	steps := []step{
		{name: "versions_root", call: call{method: "GET", path: "/"}, status: 300},
		{name: "versions", call: call{method: "GET", path: "/versions"}, status: 300},
		{name: "versions_v1", call: call{method: "GET", path: "/v1/"}, status: 300},

		{name: "host_create_1", call: call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-1", "vcpus": 32,
			"memory_mb": 131072, "local_gb": 800, "availability_zone": "nova", "gpu": "true", "rack": "r1"}`},
			status: 201, save: map[string]string{"host1": "host.id"}, check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "host.created_at", "2026-11-21 10:00:00")
				wantField(t, b, "host.gpu", "true")
			}},
		{name: "host_create_2", call: call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-2", "vcpus": "16",
			"memory_mb": 65536, "gpu": "false", "rack": "r1"}`},
			status: 201, save: map[string]string{"host2": "host.id"}},
		{name: "host_create_3", call: call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-3", "vcpus": 64,
			"memory_mb": 262144, "gpu": true, "rack": "r2", "reservable": "true"}`},
			status: 201, save: map[string]string{"host3": "host.id"}},
		{name: "hosts_list", call: call{method: "GET", path: "/v1/os-hosts"}, status: 200},
		{name: "host_show", call: call{method: "GET", path: "/v1/os-hosts/{{host1}}"}, status: 200},
		{name: "host_update", advance: 30 * time.Minute,
			call:   call{method: "PUT", path: "/v1/os-hosts/{{host2}}", body: `{"cpu_info": "x86_64", "ssd": "yes"}`},
			status: 200, check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "host.updated_at", "2026-11-21 10:30:00")
			}},
		{name: "host_show_json_suffix", call: call{method: "GET", path: "/v1/os-hosts/{{host2}}.json"}, status: 200},

		{name: "properties", call: call{method: "GET", path: "/v1/os-hosts/properties"}, status: 200},
		{name: "properties_detail", call: call{method: "GET", path: "/v1/os-hosts/properties?detail=True"}, status: 200},
		{name: "property_patch", call: call{method: "PATCH", path: "/v1/os-hosts/properties/ssd", body: `{"private": true}`},
			status: 200, check: func(t *testing.T, b map[string]any) {
				// ssd was first registered by the host update at 10:30.
				wantField(t, b, "resource_property.created_at", "2026-11-21 10:30:00")
				wantField(t, b, "resource_property.updated_at", "2026-11-21 10:30:00")
			}},
		{name: "properties_detail_public", call: call{method: "GET", path: "/v1/os-hosts/properties?detail=True"}, status: 200},
		{name: "properties_detail_all", call: call{method: "GET", path: "/v1/os-hosts/properties?detail=True&all=True"}, status: 200},
		{name: "properties_detail_false", call: call{method: "GET", path: "/v1/os-hosts/properties?detail=False"}, status: 200},

		{name: "lease_create", call: call{method: "POST", path: "/v1/leases", body: gpuLease}, status: 201,
			save: map[string]string{"lease1": "lease.id", "res1": "lease.reservations.0.id"},
			check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "lease.start_date", "2026-11-22T10:00:00.000000")
				wantField(t, b, "lease.end_date", "2026-11-23T10:00:00.000000")
				wantField(t, b, "lease.created_at", "2026-11-21 10:30:00")
				wantField(t, b, "lease.status", "PENDING")
				wantField(t, b, "lease.reservations.0.status", "pending")
				wantField(t, b, "lease.reservations.0.created_at", "2026-11-21 10:30:00")
				times := eventTimes(t, b)
				for typ, want := range map[string]string{
					"start_lease":      "2026-11-22T10:00:00.000000",
					"end_lease":        "2026-11-23T10:00:00.000000",
					"before_end_lease": "2026-11-23T09:00:00.000000",
				} {
					if times[typ] != want {
						t.Errorf("%s time = %q, want %q", typ, times[typ], want)
					}
				}
			}},
		{name: "lease_show", call: call{method: "GET", path: "/v1/leases/{{lease1}}"}, status: 200},
		{name: "lease_create_member", advance: time.Minute, call: call{method: "POST", path: "/v1/leases", body: cpuLease, header: asAlice},
			status: 201, save: map[string]string{"lease2": "lease.id"}, check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "lease.user_id", "alice")
				wantField(t, b, "lease.project_id", "physics")
				wantField(t, b, "lease.created_at", "2026-11-21 10:31:00")
				if got := eventTimes(t, b)["before_end_lease"]; got != "2026-11-22T17:00:00.000000" {
					t.Errorf("before_end_lease time = %q, want the before_end_date", got)
				}
			}},
		{name: "leases_list", call: call{method: "GET", path: "/v1/leases"}, status: 200},
		{name: "leases_list_member", call: call{method: "GET", path: "/v1/leases.json", header: asAlice}, status: 200},
		{name: "leases_list_other_project", call: call{method: "GET", path: "/v1/leases", header: asBob}, status: 200},

		{name: "allocations", call: call{method: "GET", path: "/v1/os-hosts/allocations"}, status: 200},
		{name: "lease_update", advance: time.Hour, call: call{method: "PUT", path: "/v1/leases/{{lease1}}", body: `{
			"name": "gpu-lease-2", "end_date": "2026-11-24 10:00",
			"reservations": [{"id": "{{res1}}", "max": 1}]}`}, status: 200,
			check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "lease.end_date", "2026-11-24T10:00:00.000000")
				wantField(t, b, "lease.updated_at", "2026-11-21 11:31:00")
				wantField(t, b, "lease.reservations.0.updated_at", "2026-11-21 11:31:00")
				if got := eventTimes(t, b)["before_end_lease"]; got != "2026-11-24T09:00:00.000000" {
					t.Errorf("before_end_lease time = %q, want it to keep its hour before the end", got)
				}
			}},
		{name: "lease_rename", call: call{method: "PUT", path: "/v1/leases/{{lease2}}", body: `{"name": "renamed"}`, header: asAlice}, status: 200},
		{name: "allocations_after_update", call: call{method: "GET", path: "/v1/os-hosts/allocations"}, status: 200},
		{name: "allocations_by_lease", call: call{method: "GET", path: "/v1/os-hosts/allocations?lease_id={{lease1}}"}, status: 200},
		{name: "allocations_by_reservation", call: call{method: "GET", path: "/v1/os-hosts/allocations?reservation_id={{res1}}"}, status: 200},
		{name: "host_allocation", call: call{method: "GET", path: "/v1/os-hosts/{{host2}}/allocation"}, status: 200},
		{name: "host_allocation_free", call: call{method: "GET", path: "/v1/os-hosts/{{host3}}/allocation"}, status: 200},

		// Representative errors.
		{name: "error_not_found", call: call{method: "GET", path: "/v1/leases/no-such-lease"}, status: 404},
		{name: "error_other_project", call: call{method: "GET", path: "/v1/leases/{{lease1}}", header: asBob}, status: 404},
		{name: "error_host_not_found", call: call{method: "GET", path: "/v1/os-hosts/999"}, status: 404},
		{name: "error_malformed_json", call: call{method: "POST", path: "/v1/leases", body: `{"name": `}, status: 400},
		{name: "error_malformed_parameter", call: call{method: "POST", path: "/v1/leases", body: `{"name": 5}`}, status: 400},
		{name: "error_missing_parameter", call: call{method: "POST", path: "/v1/leases", body: `{"name": "x"}`}, status: 400},
		{name: "error_invalid_date", call: call{method: "POST", path: "/v1/leases", body: `{"name": "x", "start_date": "Bogus-date 13:13", "end_date": "2026-11-23 10:00"}`}, status: 400},
		{name: "error_unknown_parameter", call: call{method: "POST", path: "/v1/leases", body: `{"name": "x", "project_id": "admin"}`}, status: 400},
		{name: "error_min_max", call: call{method: "POST", path: "/v1/leases", body: `{"name": "x", "start_date": "2026-11-22 10:00",
			"end_date": "2026-11-23 10:00", "reservations": [{"resource_type": "physical:host", "min": 3, "max": 2}]}`}, status: 400},
		{name: "error_no_capacity", call: call{method: "POST", path: "/v1/leases", body: `{"name": "x", "start_date": "2026-11-22 10:00",
			"end_date": "2026-11-23 10:00", "reservations": [{"resource_type": "physical:host", "min": 3, "max": 3}]}`}, status: 409},
		{name: "error_host_reserved", call: call{method: "DELETE", path: "/v1/os-hosts/{{host2}}"}, status: 409},
		{name: "error_forbidden", call: call{method: "GET", path: "/v1/os-hosts", header: asAlice}, status: 403},
		{name: "error_no_data", call: call{method: "PUT", path: "/v1/os-hosts/{{host1}}"}, status: 400},
		{name: "error_unknown_route", call: call{method: "GET", path: "/v1/nothing"}, status: 404},
		{name: "error_method", call: call{method: "PATCH", path: "/v1/leases"}, status: 405},
		{name: "error_version_406", call: call{method: "GET", path: "/v1/leases", header: map[string]string{"OpenStack-API-Version": "reservation 2.0"}}, status: 406},
		{name: "error_version_400", call: call{method: "GET", path: "/v1/leases", header: map[string]string{"OpenStack-API-Version": "reservation x"}}, status: 400},
		{name: "error_content_type", call: call{method: "POST", path: "/v1/leases", body: `{}`, header: map[string]string{"Content-Type": "text/plain"}}, status: 400},

		{name: "floatingip_create", call: call{method: "POST", path: "/v1/floatingips",
			body: `{"floating_network_id": "ext-net", "floating_ip_address": "172.24.4.101"}`},
			status: 201, save: map[string]string{"fip1": "floatingip.id"}, check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "floatingip.floating_ip_address", "172.24.4.101")
				wantField(t, b, "floatingip.created_at", "2026-11-21 11:31:00")
			}},
		{name: "floatingip_create_subnet", advance: time.Minute, call: call{method: "POST", path: "/v1/floatingips",
			body: `{"floating_network_id": "ext-net", "floating_ip_address": "2001:DB8::0:1", "subnet_id": "ext-subnet-v6"}`},
			status: 201, save: map[string]string{"fip2": "floatingip.id"}, check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "floatingip.floating_ip_address", "2001:db8::1")
			}},
		{name: "floatingips_list", call: call{method: "GET", path: "/v1/floatingips", header: asReader}, status: 200},
		{name: "floatingip_show", call: call{method: "GET", path: "/v1/floatingips/{{fip1}}", header: asAlice}, status: 200},
		{name: "error_floatingip_duplicate", call: call{method: "POST", path: "/v1/floatingips",
			body: `{"floating_network_id": "ext-net", "floating_ip_address": "172.24.4.101"}`}, status: 409},
		{name: "error_floatingip_address", call: call{method: "POST", path: "/v1/floatingips",
			body: `{"floating_network_id": "ext-net", "floating_ip_address": "300.1.1.1"}`}, status: 400},
		{call: call{method: "DELETE", path: "/v1/floatingips/{{fip2}}"}, status: 204},
		{name: "error_floatingip_not_found", call: call{method: "GET", path: "/v1/floatingips/{{fip2}}"}, status: 404},

		{call: call{method: "DELETE", path: "/v1/leases/{{lease2}}", header: asAlice}, status: 204},
		{call: call{method: "DELETE", path: "/v1/os-hosts/{{host3}}"}, status: 204},
		{name: "leases_list_after_delete", call: call{method: "GET", path: "/v1/leases"}, status: 200},
		{name: "hosts_list_after_delete", call: call{method: "GET", path: "/v1/os-hosts"}, status: 200},
		{name: "lease_gone", call: call{method: "GET", path: "/v1/leases/{{lease2}}"}, status: 404},

		// Flavors (Climate's extension, shaped as Nova's).
		{name: "flavor_create", advance: time.Minute, call: call{method: "POST", path: "/v1/flavors",
			body: `{"id": "m1.gpu", "name": "gpu.large", "vcpus": 8, "ram": 32768, "disk": 80, "OS-FLV-EXT-DATA:ephemeral": 20,
				"extra_specs": {"trait:HW_GPU_API_VULKAN": "required", "resources:VGPU": "1", "hw:cpu_policy": "dedicated"}}`},
			status: 201, check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "flavor.id", "m1.gpu")
				wantField(t, b, "flavor.extra_specs.trait:HW_GPU_API_VULKAN", "required")
			}},
		{name: "flavor_create_generated_id", advance: time.Minute, call: call{method: "POST", path: "/v1/flavors",
			body: `{"name": "small", "vcpus": 1, "ram": 2048, "disk": 20, "ephemeral": 0}`},
			status: 201},
		{name: "flavors_list", call: call{method: "GET", path: "/v1/flavors", header: asReader}, status: 200},
		{name: "flavor_show", call: call{method: "GET", path: "/v1/flavors/m1.gpu", header: asAlice}, status: 200},
		{name: "error_flavor_duplicate", call: call{method: "POST", path: "/v1/flavors",
			body: `{"name": "small", "vcpus": 1, "ram": 2048, "disk": 20}`}, status: 409},
		{name: "error_flavor_trait", call: call{method: "POST", path: "/v1/flavors",
			body: `{"name": "bad", "vcpus": 1, "ram": 2048, "disk": 20, "extra_specs": {"trait:HW_CPU_X86_AVX2": "preferred"}}`}, status: 400},
		{call: call{method: "DELETE", path: "/v1/flavors/m1.gpu"}, status: 204},
		{name: "error_flavor_not_found", call: call{method: "GET", path: "/v1/flavors/m1.gpu"}, status: 404},
	}
	for i, s := range steps {
		if s.advance > 0 {
			e.clk.Advance(s.advance)
		}
		c := s.call
		c.path = expand(t, c.path, vars)
		c.body = expand(t, c.body, vars)
		r := e.do(c)
		label := s.name
		if label == "" {
			label = c.method + " " + c.path
		}
		t.Run(label, func(t *testing.T) {
			if r.status != s.status {
				t.Fatalf("step %d %s %s: got %s, want status %d", i, c.method, c.path, r, s.status)
			}
			checkHeaders(t, r)
			id := r.header.Get("X-OpenStack-Request-ID")
			if seenIDs[id] {
				t.Errorf("request id %s was used before", id)
			}
			seenIDs[id] = true
			if s.status == http.StatusNoContent {
				if len(r.body) != 0 {
					t.Errorf("204 with a body: %q", r.body)
				}
				return
			}
			if s.status >= 400 {
				checkError(t, r, s.status)
			}
			b := decodeObject(t, r.body)
			for name, path := range s.save {
				vars[name] = lookup(t, b, path)
			}
			if s.check != nil {
				s.check(t, b)
			}
			golden(t, s.name, norm.normalize(t, r.body))
		})
	}
}

func decodeObject(t testing.TB, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		t.Fatalf("body is not a JSON object (%v): %s", err, body)
	}
	return m
}

func wantField(t *testing.T, b map[string]any, path, want string) {
	t.Helper()
	if got := lookup(t, b, path); got != want {
		t.Errorf("%s = %q, want %q", path, got, want)
	}
}

// eventTimes returns a lease response's event times by type.
func eventTimes(t *testing.T, b map[string]any) map[string]string {
	t.Helper()
	lease, _ := b["lease"].(map[string]any)
	events, _ := lease["events"].([]any)
	out := map[string]string{}
	for _, x := range events {
		ev, _ := x.(map[string]any)
		typ, _ := ev["event_type"].(string)
		tm, _ := ev["time"].(string)
		if _, dup := out[typ]; dup {
			t.Errorf("two %s events", typ)
		}
		out[typ] = tm
		if ev["status"] != "UNDONE" {
			t.Errorf("%s event status = %v, want UNDONE", typ, ev["status"])
		}
	}
	return out
}
