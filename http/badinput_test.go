package http_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"climate"
	climatehttp "climate/http"
)

// validRes and validLease are accepted as they are: the bad-input cases each break one
// thing about them, so that the one thing is what the API must reject.
const (
	validRes   = `{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}`
	validLease = `{"name": "ok", "start_date": "2026-11-22 10:00", "end_date": "2026-11-23 10:00",
		"reservations": [` + validRes + `], "events": []}`
)

// validFloatingIP is the floating IP seed registers (so posting it again is a duplicate);
// fipWith changes it.
const validFloatingIP = `{"floating_network_id": "ext-net", "floating_ip_address": "172.24.4.101"}`

func fipWith(patch string) string { return patchJSON(validFloatingIP, patch) }

// validFlavor is the flavor seed registers (so posting it again is a duplicate);
// newFlavor is another, accepted as it is, and flavorWith changes it.
const (
	validFlavor = `{"id": "m1.small", "name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20}`
	newFlavor   = `{"name": "m1.new", "vcpus": 2, "ram": 4096, "disk": 40, "OS-FLV-EXT-DATA:ephemeral": 0,
		"extra_specs": {"trait:HW_CPU_X86_AVX2": "required", "resources:VGPU": "1"}}`
)

func flavorWith(patch string) string { return patchJSON(newFlavor, patch) }

// flavorSpecs is newFlavor with extra_specs replaced by specs (a JSON value).
func flavorSpecs(specs string) string { return flavorWith(`{"extra_specs": ` + specs + `}`) }

// leaseWith is validLease with patch's keys replaced ("<delete>" removes a key).
func leaseWith(patch string) string { return patchJSON(validLease, patch) }

// resWith is validLease whose one reservation has patch's keys replaced.
// fipResWith is a lease with one virtual:floatingip reservation on seed's network, patched.
func fipResWith(patch string) string {
	return patchJSON(validLease, `{"reservations": [`+patchJSON(`{"resource_type": "virtual:floatingip", "network_id": "ext-net", "amount": 1}`, patch)+`]}`)
}

// instResWith is a lease with one virtual:instance reservation (one 2-vCPU slot), patched.
func instResWith(patch string) string {
	return patchJSON(validLease, `{"reservations": [`+patchJSON(`{"resource_type": "virtual:instance", "amount": 1, "vcpus": 2, "memory_mb": 2048, "disk_gb": 0, "affinity": null, "resource_properties": ""}`, patch)+`]}`)
}

func resWith(patch string) string {
	return patchJSON(validLease, `{"reservations": [`+patchJSON(validRes, patch)+`]}`)
}

// seed registers three hosts (1 and 3 with gpu=true) and books two leases over
// [2026-11-22 10:00, 2026-11-23 10:00): the admin's on a gpu host (host 1) and alice's on
// any host (host 2), leaving host 3 free; and alice subscribes a webhook (ahook) to the
// env's receiver (hook); and the admin registers floating IP 172.24.4.101 on ext-net
// (fip), and flavor m1.small (flavor). It returns the ids as template variables.
func seed(e *env) map[string]string {
	e.t.Helper()
	for _, body := range []string{
		`{"name": "compute-1", "vcpus": 32, "memory_mb": 131072, "gpu": "true", "rack": "r1"}`,
		`{"name": "compute-2", "vcpus": 16, "memory_mb": 65536, "gpu": "false", "rack": "r1"}`,
		`{"name": "compute-3", "vcpus": 64, "memory_mb": 262144, "gpu": "true", "rack": "r2"}`,
	} {
		e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: body}, http.StatusCreated)
	}
	l1 := e.mustDo(call{method: "POST", path: "/v1/leases", body: resWith(`{"resource_properties": "[\"==\", \"$gpu\", \"true\"]"}`)}, http.StatusCreated)
	l2 := e.mustDo(call{method: "POST", path: "/v1/leases", body: validLease, header: asAlice}, http.StatusCreated)
	vars := map[string]string{
		"lease": lookup(e.t, l1, "lease.id"), "res": lookup(e.t, l1, "lease.reservations.0.id"),
		"alease": lookup(e.t, l2, "lease.id"), "ares": lookup(e.t, l2, "lease.reservations.0.id"),
	}
	f := e.mustDo(call{method: "POST", path: "/v1/floatingips", body: validFloatingIP}, http.StatusCreated)
	vars["fip"] = lookup(e.t, f, "floatingip.id")
	fl := e.mustDo(call{method: "POST", path: "/v1/flavors", body: validFlavor}, http.StatusCreated)
	vars["flavor"] = lookup(e.t, fl, "flavor.id")
	if e.recv != nil {
		vars["hook"] = e.recv.url
		w := e.mustDo(call{method: "POST", path: "/v1/webhooks", body: `{"url": "` + e.recv.url + `/alice", "event_types": ["lease.create"]}`, header: asAlice}, http.StatusCreated)
		vars["ahook"] = lookup(e.t, w, "webhook.id")
	}
	return vars
}

// state is everything a request could change, as the admin sees it.
func (e *env) state(vars map[string]string) string {
	e.t.Helper()
	return e.snapshot(nil, "/v1/leases", "/v1/os-hosts", "/v1/os-hosts/properties?detail=True&all=True",
		expand(e.t, "/v1/os-hosts/allocations?lease_id={{lease}}", vars), "/v1/os-hosts/allocations", "/v1/webhooks",
		"/v1/floatingips", "/v1/flavors")
}

// snapshot GETs paths with header and returns the statuses and bodies, one line each.
func (e *env) snapshot(header map[string]string, paths ...string) string {
	e.t.Helper()
	var b strings.Builder
	for _, path := range paths {
		r := e.do(call{method: "GET", path: path, header: header})
		fmt.Fprintf(&b, "%s %d %s\n", path, r.status, r.body)
	}
	return b.String()
}

// stateDiff describes the first difference between two states.
func stateDiff(before, after string) string {
	bl, al := strings.Split(before, "\n"), strings.Split(after, "\n")
	for i := range bl {
		if i >= len(al) || bl[i] == al[i] {
			continue
		}
		j := 0
		for j < len(bl[i]) && j < len(al[i]) && bl[i][j] == al[i][j] {
			j++
		}
		from := max(0, j-150)
		path, _, _ := strings.Cut(bl[i], " ")
		return fmt.Sprintf("GET %s differs at byte %d:\nbefore: …%s\nafter:  …%s", path, j, bl[i][from:min(len(bl[i]), j+100)], al[i][from:min(len(al[i]), j+100)])
	}
	return "states differ"
}

type badCase struct {
	name string
	call
	status int
	msg    []string // substrings of error_message
}

func badCases() []badCase {
	post := func(name, body string, status int, msg ...string) badCase {
		return badCase{name: name, call: call{method: "POST", path: "/v1/leases", body: body}, status: status, msg: msg}
	}
	put := func(name, body string, status int, msg ...string) badCase {
		return badCase{name: name, call: call{method: "PUT", path: "/v1/leases/{{lease}}", body: body}, status: status, msg: msg}
	}
	req := func(name, method, path, body string, header map[string]string, status int, msg ...string) badCase {
		return badCase{name: name, call: call{method: method, path: path, body: body, header: header}, status: status, msg: msg}
	}
	fip := func(name, body string, status int, msg ...string) badCase { // the admin registers a floating IP
		return badCase{name: name, call: call{method: "POST", path: "/v1/floatingips", body: body}, status: status, msg: msg}
	}
	flavor := func(name, body string, status int, msg ...string) badCase { // the admin registers a flavor
		return badCase{name: name, call: call{method: "POST", path: "/v1/flavors", body: body}, status: status, msg: msg}
	}
	hook := func(name, body string, status int, msg ...string) badCase { // alice creates a webhook
		return badCase{name: name, call: call{method: "POST", path: "/v1/webhooks", body: body, header: asAlice}, status: status, msg: msg}
	}
	huge := `{"name": "` + strings.Repeat("x", climatehttp.MaxBodyBytes) + `"}`
	return []badCase{
		// Bodies that are not a JSON object.
		post("invalid JSON", `{"name": `, 400, "Malformed request body", "invalid JSON"),
		post("invalid JSON token", `{name: "x"}`, 400, "Malformed request body", "invalid JSON"),
		post("trailing data", validLease+` {}`, 400, "Malformed request body"),
		post("array body", `[`+validLease+`]`, 400, "must be a JSON object"),
		post("null body", `null`, 400, "must be a JSON object"),
		post("string body", `"lease"`, 400, "must be a JSON object"),
		post("number body", `5`, 400, "must be a JSON object"),

		// Wrong types.
		post("name number", leaseWith(`{"name": 5}`), 400, "Malformed parameter name"),
		post("name object", leaseWith(`{"name": {}}`), 400, "Malformed parameter name"),
		post("min string", resWith(`{"min": "x"}`), 400, "Malformed parameter min"),
		post("min float", resWith(`{"min": 1.5}`), 400, "Malformed parameter min"),
		post("min exponent", resWith(`{"min": 1e100}`), 400, "Malformed parameter min"),
		post("min bool", resWith(`{"min": true}`), 400, "Malformed parameter min"),
		post("min too big", resWith(`{"min": 2147483648, "max": 2147483648}`), 400, "Malformed parameter min"),
		post("max list", resWith(`{"max": [1]}`), 400, "Malformed parameter max"),
		post("reservations object", leaseWith(`{"reservations": {}}`), 400, "Malformed parameter reservations"),
		post("reservations number item", leaseWith(`{"reservations": [5]}`), 400, "Malformed parameter reservations"),
		post("reservations null item", leaseWith(`{"reservations": [null]}`), 400, "Malformed parameter reservations"),
		post("reservations string", leaseWith(`{"reservations": "physical:host"}`), 400, "Malformed parameter reservations"),
		post("hypervisor_properties number", resWith(`{"hypervisor_properties": 5}`), 400, "Malformed parameter hypervisor_properties"),
		post("resource_properties object", resWith(`{"resource_properties": {"gpu": true}}`), 400, "Malformed parameter resource_properties"),
		post("resource_type number", resWith(`{"resource_type": 5}`), 400, "Malformed parameter resource_type"),
		post("before_end number", resWith(`{"before_end": 5}`), 400, "Malformed parameter before_end"),
		post("before_end unknown", resWith(`{"before_end": "later"}`), 400, "Malformed parameter before_end"),
		post("events item", leaseWith(`{"events": [{}]}`), 400, "User-defined events are not supported"),
		post("events user event", leaseWith(`{"events": [{"event_type": "start_lease", "event_date": "2026-11-22 10:00"}]}`), 400, "User-defined events"),
		post("events object", leaseWith(`{"events": {}}`), 400, "Malformed parameter events"),
		post("before_end_date number", leaseWith(`{"before_end_date": 5}`), 400, "Malformed parameter before_end_date"),

		// Missing keys.
		post("missing name", leaseWith(`{"name": "<delete>"}`), 400, "Missing parameter name"),
		post("null name", leaseWith(`{"name": null}`), 400, "Missing parameter name"),
		post("empty name", leaseWith(`{"name": ""}`), 400, "Missing parameter name"),
		post("name too long", leaseWith(`{"name": "`+strings.Repeat("n", 81)+`"}`), 400, "too long"),
		post("missing start_date", leaseWith(`{"start_date": "<delete>"}`), 400, "Missing parameter start_date"),
		post("missing end_date", leaseWith(`{"end_date": "<delete>"}`), 400, "Missing parameter end_date"),
		post("missing resource_type", resWith(`{"resource_type": "<delete>"}`), 400, "Missing parameter resource_type"),
		post("missing min", resWith(`{"min": "<delete>"}`), 400, "Missing parameter min"),
		post("missing max", resWith(`{"max": "<delete>"}`), 400, "Missing parameter max"),
		post("empty body", ``, 400, "Missing parameter name"),

		// Bad dates.
		post("bogus start_date", leaseWith(`{"start_date": "Bogus-date 13:13"}`), 400, "Bogus-date 13:13 is an invalid date", "Required format"),
		post("month 13", leaseWith(`{"start_date": "2026-13-01 10:00"}`), 400, "2026-13-01 10:00 is an invalid date"),
		post("start_date number", leaseWith(`{"start_date": 12345}`), 400, "Malformed parameter start_date"),
		post("empty start_date", leaseWith(`{"start_date": ""}`), 400, "is an invalid date"),
		post("date without time", leaseWith(`{"start_date": "2026-11-22"}`), 400, "2026-11-22 is an invalid date"),
		post("year 1 start_date", leaseWith(`{"start_date": "0001-01-01 00:00"}`), 400, "0001-01-01 00:00"),
		post("bogus end_date", leaseWith(`{"end_date": "tomorrow"}`), 400, "tomorrow is an invalid date"),
		post("end before start", leaseWith(`{"end_date": "2026-11-22 09:00"}`), 400, "End date must be later than start date"),
		post("end equals start", leaseWith(`{"end_date": "2026-11-22 10:00"}`), 400, "End date must be later than start date"),
		post("end now", leaseWith(`{"start_date": "now", "end_date": "now"}`), 400, "End date must be later than start date"),
		post("start in the past", leaseWith(`{"start_date": "2026-11-21 09:59"}`), 400, "Start date must be later than current date"),
		post("start in the past RFC 3339", leaseWith(`{"start_date": "2026-11-21T10:30:00+02:00"}`), 400, "Start date must be later than current date"),
		post("before_end_date after end", leaseWith(`{"before_end_date": "2026-11-23 11:00"}`), 400, "Datetime is out of lease limits"),
		post("before_end_date at end", leaseWith(`{"before_end_date": "2026-11-23 10:00"}`), 400, "Datetime is out of lease limits"),
		post("before_end_date before start", leaseWith(`{"before_end_date": "2026-11-22 09:00"}`), 400, "Datetime is out of lease limits"),
		post("before_end_date at start", leaseWith(`{"before_end_date": "2026-11-22 10:00"}`), 400, "Datetime is out of lease limits"),
		post("before_end_date now", leaseWith(`{"before_end_date": "now"}`), 400, "before_end_date must be a date"),
		post("before_end_date bogus", leaseWith(`{"before_end_date": "soon"}`), 400, "soon is an invalid date"),
		post("before_start_date after start", leaseWith(`{"before_start_date": "2026-11-22 11:00"}`), 400, "before_start_date must be between now and the start date"),
		post("before_start_date at start", leaseWith(`{"before_start_date": "2026-11-22 10:00"}`), 400, "before_start_date must be between now and the start date"),
		post("before_start_date in the past", leaseWith(`{"before_start_date": "2026-11-21 09:00"}`), 400, "before_start_date must be between now and the start date"),
		post("before_start_date now", leaseWith(`{"before_start_date": "now"}`), 400, "before_start_date must be a date"),
		post("before_start_date number", leaseWith(`{"before_start_date": 5}`), 400, "Malformed parameter before_start_date"),

		// Property queries.
		post("query missing value", resWith(`{"resource_properties": "[\"==\", \"gpu\"]"}`), 400, "Malformed requirements"),
		post("query unknown operator", resWith(`{"resource_properties": "[\"~\", \"$a\", \"1\"]"}`), 400, "Malformed requirements"),
		post("query not json", resWith(`{"resource_properties": "not json"}`), 400, "Malformed requirements"),
		post("query object", resWith(`{"hypervisor_properties": "{\"gpu\": true}"}`), 400, "Malformed requirements"),
		post("query bare array", resWith(`{"hypervisor_properties": ["==", "$gpu"]}`), 400, "Malformed requirements"),
		post("query no dollar", resWith(`{"hypervisor_properties": "[\"==\", \"gpu\", \"true\"]"}`), 400, "Malformed requirements"),
		post("query unknown property", resWith(`{"resource_properties": "[\"==\", \"$nosuch\", \"1\"]"}`), 400, `Unknown property "nosuch"`),
		post("query unknown property nested", resWith(`{"hypervisor_properties": "[\"and\", [\"==\", \"$gpu\", \"true\"], [\">\", \"$vcpu\", \"4\"]]"}`), 400, `Unknown property "vcpu"`),
		post("query too deep", resWith(`{"resource_properties": "`+strings.Repeat(`[\"not\", `, 40)+`[\"==\", \"$gpu\", \"true\"]`+strings.Repeat("]", 40)+`"}`), 400, "Malformed requirements"),

		// Unknown keys and values.
		post("unknown lease key", leaseWith(`{"project_id": "other"}`), 400, `Unknown parameter "project_id"`),
		post("lease_type number", leaseWith(`{"lease_type": 2}`), 400, "Malformed parameter lease_type"),
		post("lease_type unknown", leaseWith(`{"lease_type": "eventually"}`), 400, `Unknown lease_type "eventually"`),
		post("retry_until garbage", leaseWith(`{"lease_type": "retry", "retry_until": "soon"}`), 400, "soon is an invalid date"),
		post("retry_until before start", leaseWith(`{"lease_type": "retry", "retry_until": "2026-11-22 09:00"}`), 400, "retry_until must be later"),
		post("priority text", leaseWith(`{"lease_type": "retry", "priority": "high"}`), 400, "Malformed parameter priority"),
		post("priority without retry", leaseWith(`{"priority": 3}`), 400, "retry_until, max_retries and priority go with"),
		post("max_retries without retry", leaseWith(`{"max_retries": 3}`), 400, "retry_until, max_retries and priority go with"),
		post("max_retries negative", leaseWith(`{"lease_type": "retry", "max_retries": -1}`), 400, "max_retries -1: want 0"),
		post("preemptible text", leaseWith(`{"preemptible": "yes"}`), 400, "Malformed parameter preemptible"),
		post("on_preempt without preemptible", leaseWith(`{"on_preempt": "end"}`), 400, "on_preempt goes with preemptible: true"),
		post("on_preempt unknown", leaseWith(`{"preemptible": true, "on_preempt": "pause"}`), 400, `Unknown on_preempt "pause" (accepted: shrink, end)`),
		post("preemptible retry lease", leaseWith(`{"preemptible": true, "lease_type": "retry"}`), 400, "lease_type retry cannot be preemptible"),
		post("unknown lease key id", leaseWith(`{"id": "6ee55c78-0000-4000-8000-000000000000"}`), 400, `Unknown parameter "id"`),
		post("unknown reservation key", resWith(`{"amount": 1}`), 400, `Unknown parameter "amount"`),
		post("reservation id on create", resWith(`{"id": "x"}`), 400, `Unknown parameter "id"`),
		post("unsupported resource_type", resWith(`{"resource_type": "virtual:volume"}`), 400, "The virtual:volume resource type is not supported"),
		post("floating IP reservation without network", fipResWith(`{"network_id": "<delete>"}`), 400, "Missing parameter network_id"),
		post("floating IP reservation network number", fipResWith(`{"network_id": 7}`), 400, "Malformed parameter network_id"),
		post("floating IP reservation without amount", fipResWith(`{"amount": "<delete>"}`), 400, "Missing parameter amount"),
		post("floating IP reservation amount text", fipResWith(`{"amount": "two"}`), 400, "Malformed parameter amount"),
		post("floating IP reservation amount 0", fipResWith(`{"amount": 0}`), 400, "Malformed parameter amount"),
		post("floating IP reservation required not a list", fipResWith(`{"required_floatingips": 5}`), 400, "Malformed parameter required_floatingips"),
		post("floating IP reservation malformed required", fipResWith(`{"required_floatingips": ["300.1.1.1"]}`), 400, `IP address "300.1.1.1" is invalid form.`),
		post("floating IP reservation required of another network", fipResWith(`{"network_id": "other-net", "required_floatingips": ["172.24.4.101"]}`), 400, "is not a registered floating IP of network other-net"),
		post("floating IP reservation more required than amount", fipResWith(`{"required_floatingips": ["172.24.4.101", "172.24.4.102"]}`), 400, "larger than amount"),
		post("floating IP reservation with a host key", fipResWith(`{"min": 1}`), 400, `Unknown parameter "min" in a virtual:floatingip reservation`),
		post("floating IP reservation beyond the inventory", fipResWith(`{"amount": 2}`), 409, "Not enough floating IPs available"),
		post("instance reservation without sizes", instResWith(`{"vcpus": "<delete>", "memory_mb": "<delete>"}`), 400, "Missing parameter vcpus, memory_mb"),
		post("instance reservation without amount", instResWith(`{"amount": "<delete>"}`), 400, "Missing parameter amount"),
		post("instance reservation vcpus text", instResWith(`{"vcpus": "two"}`), 400, "Malformed parameter vcpus"),
		post("instance reservation vcpus float", instResWith(`{"vcpus": 1.5}`), 400, "Malformed parameter vcpus"),
		post("instance reservation vcpus 0", instResWith(`{"vcpus": 0}`), 400, "Malformed parameter vcpus"),
		post("instance reservation memory negative", instResWith(`{"memory_mb": -1}`), 400, "Malformed parameter memory_mb"),
		post("instance reservation disk negative", instResWith(`{"disk_gb": -5}`), 400, "Malformed parameter disk_gb"),
		post("instance reservation amount 0", instResWith(`{"amount": 0}`), 400, "Malformed parameter amount"),
		post("instance reservation amount list", instResWith(`{"amount": [1]}`), 400, "Malformed parameter amount"),
		post("instance reservation affinity maybe", instResWith(`{"affinity": "maybe"}`), 400, "Malformed parameter affinity"),
		post("instance reservation affinity 2", instResWith(`{"affinity": 2}`), 400, "Malformed parameter affinity"),
		post("instance reservation affinity object", instResWith(`{"affinity": {}}`), 400, "Malformed parameter affinity"),
		post("instance reservation unknown property", instResWith(`{"resource_properties": "[\"==\", \"$colour\", \"red\"]"}`), 400, `Unknown property "colour"`),
		post("instance reservation bad query", instResWith(`{"resource_properties": "[\"~\", \"$gpu\"]"}`), 400),
		post("instance reservation with a host key", instResWith(`{"min": 1}`), 400, `Unknown parameter "min" in a virtual:instance reservation`),
		post("instance reservation bigger than any host", instResWith(`{"vcpus": 128}`), 409, "Not enough hosts available", "1 slots of 128 vCPUs"),
		post("instance reservation beyond the free host", instResWith(`{"vcpus": 32, "amount": 3}`), 409, "Not enough hosts available"),
		post("instance reservation affinity beyond one host", instResWith(`{"vcpus": 16, "amount": 5, "affinity": true}`), 409, "on one host (affinity)"),
		post("host reservation with a floating IP key", resWith(`{"network_id": "ext-net"}`), 400, `Unknown parameter "network_id" in a physical:host reservation`),
		post("min greater than max", resWith(`{"min": 2, "max": 1}`), 400, "Max must be equal to or larger than min"),
		post("min 0", resWith(`{"min": 0}`), 400, "must be greater than or equal to 1"),
		post("min and max 0", resWith(`{"min": 0, "max": 0}`), 400, "must be greater than or equal to 1"),
		post("min negative", resWith(`{"min": -1}`), 400, "must be greater than or equal to 1"),
		post("no capacity", resWith(`{"min": 2, "max": 2}`), 409, "Not enough hosts available"),
		post("no capacity filtered", resWith(`{"resource_properties": "[\"==\", \"$rack\", \"r9\"]"}`), 409, "Not enough hosts available"),
		post("no capacity second reservation", leaseWith(`{"reservations": [`+validRes+`, `+validRes+`]}`), 409, "Not enough hosts available"),

		// Lease updates.
		put("update array body", `[]`, 400, "must be a JSON object"),
		put("update invalid JSON", `{"name"`, 400, "Malformed request body"),
		put("update name number", `{"name": 5}`, 400, "Malformed parameter name"),
		put("update empty name", `{"name": ""}`, 400, "Lease name must not be empty"),
		put("update name too long", `{"name": "`+strings.Repeat("n", 81)+`"}`, 400, "too long"),
		put("update unknown key", `{"name": "x", "project_id": "other"}`, 400, `Unknown parameter "project_id"`),
		put("update user_id", `{"user_id": "mallory"}`, 400, `Unknown parameter "user_id"`),
		put("update bogus start_date", `{"start_date": "Bogus-date 13:13"}`, 400, "is an invalid date"),
		put("update year 1 start_date", `{"start_date": "0001-01-01 00:00"}`, 400, "0001-01-01 00:00"),
		put("update year 1 before_end_date", `{"before_end_date": "0001-01-01 00:00"}`, 400, "0001-01-01 00:00"),
		put("update start in the past", `{"start_date": "2026-11-20 10:00"}`, 400, "Start date must be later than current date"),
		put("update end before start", `{"end_date": "2026-11-22 09:00"}`, 400, "End date must be later than current and start date"),
		put("update end now", `{"end_date": "now"}`, 400, "End date must be later than current and start date"),
		put("update before_end_date outside", `{"before_end_date": "2026-11-24 10:00"}`, 400, "Datetime is out of lease limits"),
		put("update before_end_date now", `{"before_end_date": "now"}`, 400, `before_end_date must be a date`),
		put("update before_start_date after start", `{"before_start_date": "2026-11-22 12:00"}`, 400, "before_start_date must be between now and the start date"),
		put("update events", `{"events": [{}]}`, 400, "User-defined events"),
		put("update reservations object", `{"reservations": {"id": "{{res}}"}}`, 400, "Malformed parameter reservations"),
		put("update reservation without id", `{"reservations": [{"min": 1}]}`, 400, "Missing parameter reservation ID"),
		put("update reservation id number", `{"reservations": [{"id": 5}]}`, 400, "Malformed parameter id"),
		put("update unknown reservation", `{"reservations": [{"id": "no-such-reservation"}]}`, 400, "Please enter valid reservation IDs", "no-such-reservation"),
		put("update another lease's reservation", `{"reservations": [{"id": "{{ares}}", "max": 2}]}`, 400, "Please enter valid reservation IDs"),
		put("update unknown reservation key", `{"reservations": [{"id": "{{res}}", "amount": 2}]}`, 400, `Unknown parameter "amount"`),
		put("update min 0", `{"reservations": [{"id": "{{res}}", "min": 0}]}`, 400, "must be greater than or equal to 1"),
		put("update min string", `{"reservations": [{"id": "{{res}}", "min": "x"}]}`, 400, "Malformed parameter min"),
		put("update min greater than max", `{"reservations": [{"id": "{{res}}", "min": 2, "max": 1}]}`, 400, "Max must be equal to or larger than min"),
		put("update resource_type", `{"reservations": [{"id": "{{res}}", "resource_type": "virtual:instance"}]}`, 409, "resource_type cannot be updated"),
		put("update before_end", `{"reservations": [{"id": "{{res}}", "before_end": "snapshot"}]}`, 400, "before_end", "cannot be updated"),
		put("update malformed query", `{"reservations": [{"id": "{{res}}", "resource_properties": "not json"}]}`, 400, "Malformed requirements"),
		put("update unknown property", `{"reservations": [{"id": "{{res}}", "hypervisor_properties": "[\"==\", \"$nosuch\", \"1\"]"}]}`, 400, `Unknown property "nosuch"`),
		put("update no capacity", `{"reservations": [{"id": "{{res}}", "min": 3, "max": 3}]}`, 409, "Not enough hosts available"),
		put("update no capacity filter", `{"reservations": [{"id": "{{res}}", "resource_properties": "[\"==\", \"$rack\", \"r9\"]"}]}`, 409, "Not enough hosts available"),

		// Unknown ids.
		req("get unknown lease", "GET", "/v1/leases/no-such-lease", "", nil, 404, "Object with {'lease_id': 'no-such-lease'} not found"),
		req("put unknown lease", "PUT", "/v1/leases/no-such-lease", `{"name": "x"}`, nil, 404, "no-such-lease"),
		req("delete unknown lease", "DELETE", "/v1/leases/no-such-lease", "", nil, 404, "no-such-lease"),
		req("get unknown host", "GET", "/v1/os-hosts/999", "", nil, 404, "Object with {'host_id': '999'} not found"),
		req("put unknown host", "PUT", "/v1/os-hosts/999", `{"rack": "r3"}`, nil, 404, "999"),
		req("delete unknown host", "DELETE", "/v1/os-hosts/999", "", nil, 404, "999"),
		req("allocation of unknown host", "GET", "/v1/os-hosts/999/allocation", "", nil, 404, "999"),

		// Hosts.
		req("host without name", "POST", "/v1/os-hosts", `{"gpu": "true"}`, nil, 400, "Missing parameter name"),
		req("host empty body", "POST", "/v1/os-hosts", ``, nil, 400, "Missing parameter name"),
		req("host array body", "POST", "/v1/os-hosts", `[{"name": "h"}]`, nil, 400, "must be a JSON object"),
		req("host name object", "POST", "/v1/os-hosts", `{"name": {"a": 1}}`, nil, 400, "Malformed parameter name"),
		req("host duplicate name", "POST", "/v1/os-hosts", `{"name": "compute-1"}`, nil, 409, "compute-1 already exists"),
		req("host negative vcpus", "POST", "/v1/os-hosts", `{"name": "h", "vcpus": -1}`, nil, 400, "Malformed parameter vcpus"),
		req("host float vcpus", "POST", "/v1/os-hosts", `{"name": "h", "vcpus": 1.5}`, nil, 400, "Malformed parameter vcpus"),
		req("host bad reservable", "POST", "/v1/os-hosts", `{"name": "h", "reservable": "maybe"}`, nil, 400, "Malformed parameter reservable"),
		req("host trust_id", "POST", "/v1/os-hosts", `{"name": "h", "trust_id": "t"}`, nil, 400, "trust_id", "cannot be set"),
		req("host created_at", "POST", "/v1/os-hosts", `{"name": "h", "created_at": "2020-01-01 00:00"}`, nil, 400, "created_at", "cannot be set"),
		req("host null extra", "POST", "/v1/os-hosts", `{"name": "h", "gpu": null}`, nil, 400, "Malformed parameter gpu"),
		req("host object extra", "POST", "/v1/os-hosts", `{"name": "h", "gpu": {"model": "a100"}}`, nil, 400, "Malformed parameter gpu"),
		req("host list extra", "POST", "/v1/os-hosts", `{"name": "h", "gpu": ["a100"]}`, nil, 400, "Malformed parameter gpu"),
		req("host long extra key", "POST", "/v1/os-hosts", `{"name": "h", "`+strings.Repeat("k", 65)+`": "1"}`, nil, 400, "Extra capability key too long"),
		req("host extra key with space", "POST", "/v1/os-hosts", `{"name": "h", "a b": "1"}`, nil, 400, `"a b"`),
		req("host extra key with dollar", "POST", "/v1/os-hosts", `{"name": "h", "$gpu": "1"}`, nil, 400, `"$gpu"`),
		req("host empty extra key", "POST", "/v1/os-hosts", `{"name": "h", "": "1"}`, nil, 400, "non-empty"),
		req("host extra key with NUL", "POST", "/v1/os-hosts", `{"name": "h", "k\u0000": "1"}`, nil, 400, "printable"),
		req("host explicit id", "POST", "/v1/os-hosts", `{"name": "h", "id": "abc"}`, nil, 400, "Malformed parameter id", "cannot be set"),
		req("double slash path", "GET", "/v1//leases", ``, nil, 404, "could not be found"),
		req("dot-dot path", "POST", "/v1/leases/../os-hosts", `{"name": "h"}`, nil, 404, "could not be found"),
		req("host update no body", "PUT", "/v1/os-hosts/1", ``, nil, 400, "No data to update"),
		req("host update empty object", "PUT", "/v1/os-hosts/1", `{}`, nil, 400, "No data to update"),
		req("host update array", "PUT", "/v1/os-hosts/1", `[]`, nil, 400, "must be a JSON object"),
		req("host update bad memory", "PUT", "/v1/os-hosts/1", `{"memory_mb": "lots"}`, nil, 400, "Malformed parameter memory_mb"),
		req("host update empty hostname", "PUT", "/v1/os-hosts/1", `{"hypervisor_hostname": ""}`, nil, 400, "hypervisor_hostname"),
		req("host update duplicate hostname", "PUT", "/v1/os-hosts/1", `{"hypervisor_hostname": "compute-2"}`, nil, 409, "already exists"),
		req("host update id", "PUT", "/v1/os-hosts/1", `{"id": "7"}`, nil, 400, "cannot be set"),
		req("host update property in use", "PUT", "/v1/os-hosts/1", `{"gpu": "false"}`, nil, 409, "Can't update property gpu"),
		req("host update bad and good", "PUT", "/v1/os-hosts/2", `{"rack": "r2", "vcpus": "x"}`, nil, 400, "Malformed parameter vcpus"),
		req("delete reserved host", "DELETE", "/v1/os-hosts/1", "", nil, 409, "The host is reserved"),

		// Resource properties.
		req("property private string", "PATCH", "/v1/os-hosts/properties/gpu", `{"private": "yes"}`, nil, 400, "Malformed parameter private"),
		req("property private number", "PATCH", "/v1/os-hosts/properties/gpu", `{"private": 1}`, nil, 400, "Malformed parameter private"),
		req("property private null", "PATCH", "/v1/os-hosts/properties/gpu", `{"private": null}`, nil, 400, "Malformed parameter private"),
		req("property missing private", "PATCH", "/v1/os-hosts/properties/gpu", `{}`, nil, 400, "Missing parameter private"),
		req("property unknown key", "PATCH", "/v1/os-hosts/properties/gpu", `{"private": true, "name": "x"}`, nil, 400, `Unknown parameter "name"`),
		req("property array body", "PATCH", "/v1/os-hosts/properties/gpu", `[true]`, nil, 400, "must be a JSON object"),
		req("property unknown name", "PATCH", "/v1/os-hosts/properties/nosuch", `{"private": true}`, nil, 404, "nosuch"),
		req("property built-in column", "PATCH", "/v1/os-hosts/properties/vcpus", `{"private": true}`, nil, 404, "vcpus"),

		// Transport: size, content type, routes, methods, versions.
		req("oversized lease body", "POST", "/v1/leases", huge, nil, 413, "larger than"),
		req("oversized host body", "PUT", "/v1/os-hosts/1", huge, nil, 413, "larger than"),
		req("text/plain", "POST", "/v1/leases", validLease, map[string]string{"Content-Type": "text/plain"}, 400, "Content-Type", "text/plain"),
		req("form content type", "POST", "/v1/os-hosts", `{"name": "h"}`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 400, "Content-Type"),
		req("malformed content type", "PUT", "/v1/leases/{{lease}}", `{"name": "x"}`, map[string]string{"Content-Type": "application/json; ; ;="}, 400, "Content-Type"),
		req("unknown route", "GET", "/v1/nothing", "", nil, 404, "/v1/nothing"),
		req("unknown version route", "GET", "/v2/leases", "", nil, 404, "/v2/leases"),
		req("unknown lease subroute", "GET", "/v1/leases/{{lease}}/hosts", "", nil, 404, "could not be found"),
		req("unknown host subroute", "POST", "/v1/os-hosts/1/allocations", `{}`, nil, 404, "could not be found"),
		req("unknown route with body", "POST", "/v1/devices", `{"name": "x"}`, nil, 404, "/v1/devices"),
		req("wrong method on leases", "PATCH", "/v1/leases", validLease, nil, 405, "PATCH"),
		req("wrong method on lease", "POST", "/v1/leases/{{lease}}", `{"name": "x"}`, nil, 405, "POST"),
		req("wrong method on hosts", "DELETE", "/v1/os-hosts", "", nil, 405, "DELETE"),
		req("wrong method on allocations", "POST", "/v1/os-hosts/allocations", `{}`, nil, 405, "POST"),
		req("wrong method on host allocation", "PUT", "/v1/os-hosts/1/allocation", `{}`, nil, 405, "PUT"),
		req("wrong method on properties", "PUT", "/v1/os-hosts/properties", `{"private": true}`, nil, 405, "PUT"),
		req("wrong method on property", "DELETE", "/v1/os-hosts/properties/gpu", "", nil, 405, "DELETE"),
		req("wrong method on versions", "POST", "/versions", `{}`, nil, 405, "POST"),
		req("version 2.0", "POST", "/v1/leases", validLease, map[string]string{"OpenStack-API-Version": "reservation 2.0"}, 406, "2.0"),
		req("version 1.1", "GET", "/v1/leases", "", map[string]string{"OpenStack-API-Version": "reservation 1.1"}, 406, "1.1"),
		req("version x", "POST", "/v1/leases", validLease, map[string]string{"OpenStack-API-Version": "reservation x"}, 400, `"x"`),
		req("version 0.9", "GET", "/v1/leases", "", map[string]string{"OpenStack-API-Version": "reservation 0.9"}, 400, "0.9"),
		req("version without number", "GET", "/v1/os-hosts", "", map[string]string{"OpenStack-API-Version": "reservation"}, 400, "OpenStack-API-Version"),
		req("version with extra field", "GET", "/v1/os-hosts", "", map[string]string{"OpenStack-API-Version": "reservation 1.0 1.1"}, 400, "OpenStack-API-Version"),

		// Roles: inventory is admin-only; readers read; other roles nothing.
		req("member lists hosts", "GET", "/v1/os-hosts", "", asAlice, 403, "blazar:oshosts:get"),
		req("member gets host", "GET", "/v1/os-hosts/1", "", asAlice, 403, "blazar:oshosts:get"),
		req("member creates host", "POST", "/v1/os-hosts", `{"name": "h"}`, asAlice, 403, "blazar:oshosts:post"),
		req("member updates host", "PUT", "/v1/os-hosts/3", `{"rack": "r3"}`, asAlice, 403, "blazar:oshosts:put"),
		req("member deletes host", "DELETE", "/v1/os-hosts/3", "", asAlice, 403, "blazar:oshosts:delete"),
		req("guest lists allocations", "GET", "/v1/os-hosts/allocations", "", asGuest, 403, "blazar:oshosts:get_allocations"),
		req("guest gets host allocation", "GET", "/v1/os-hosts/1/allocation", "", asGuest, 403, "blazar:oshosts:get_allocations"),
		req("member lists properties", "GET", "/v1/os-hosts/properties", "", asAlice, 403, "blazar:oshosts:get_resource_properties"),
		req("member patches property", "PATCH", "/v1/os-hosts/properties/gpu", `{"private": true}`, asAlice, 403, "blazar:oshosts:update_resource_properties"),
		req("reader creates lease", "POST", "/v1/leases", validLease, asReader, 403, "blazar:leases:post"),
		req("reader updates lease", "PUT", "/v1/leases/{{alease}}", `{"name": "x"}`, asReader, 403, "blazar:leases:put"),
		req("reader deletes lease", "DELETE", "/v1/leases/{{alease}}", "", asReader, 403, "blazar:leases:delete"),
		req("guest lists leases", "GET", "/v1/leases", "", asGuest, 403, "blazar:leases:get"),
		req("guest gets lease", "GET", "/v1/leases/{{alease}}", "", asGuest, 403, "blazar:leases:get"),

		// Counts, lengths and dates a client could use to size memory or overflow.
		post("min and max beyond inventory", resWith(`{"min": 2147483647, "max": 2147483647}`), 409, "Not enough hosts available", "2147483647 requested, only 3 registered"),
		post("dry run beyond inventory", leaseWith(`{"dry_run": true, "reservations": [`+patchJSON(validRes, `{"min": 2147483647, "max": 2147483647}`)+`]}`), 409, "only 3 registered"),
		put("update max beyond inventory", `{"reservations": [{"id": "{{res}}", "min": 2147483647, "max": 2147483647}]}`, 409, "only 3 registered"),
		post("too many reservations", leaseWith(`{"reservations": [`+strings.TrimSuffix(strings.Repeat(validRes+",", 101), ",")+`]}`), 400, "at most 100 reservations"),
		post("query too long", resWith(`{"resource_properties": "`+strings.Repeat(" ", 70000)+`"}`), 400, "too long", "at most 65536"),
		post("name with NUL", leaseWith(`{"name": "a\u0000b"}`), 400, "NUL"),
		post("year 2200", leaseWith(`{"end_date": "2200-01-01 00:00"}`), 400, "out of range"),
		post("year 9999", leaseWith(`{"end_date": "9999-12-31 23:59"}`), 400, "out of range"),
		put("update year 9999", `{"end_date": "9999-12-31 23:59"}`, 400, "out of range"),
		post("earliest duration overflow", leaseWith(`{"start_date": "earliest", "end_date": "<delete>", "duration": "2147483647d"}`), 400, "not a positive duration"),
		post("earliest duration days and hours overflow", leaseWith(`{"start_date": "earliest", "end_date": "<delete>", "duration": "36500d2562047h"}`), 400, "not a positive duration"),
		req("timeline beyond 292 years", "GET", "/v1/availability/timeline?from=0002-01-01%2000:00&to=9999-12-31%2023:59&step=1282h", "", nil, 400, "out of range"),
		req("timeline too many buckets", "GET", "/v1/availability/timeline?from=1970-01-01%2000:00&to=2199-12-31%2023:59&step=1000h", "", nil, 400, "buckets requested; at most 2000"),
		req("timeline step overflow", "GET", "/v1/availability/timeline?from=2026-11-22%2000:00&to=2026-11-23%2000:00&step=106751d", "", nil, 400, "not a positive duration"),
		req("host name too long", "POST", "/v1/os-hosts", `{"name": "`+strings.Repeat("h", 2800)+`"}`, nil, 400, "name is too long", "at most 255"),
		req("host hostname too long", "PUT", "/v1/os-hosts/1", `{"hypervisor_hostname": "`+strings.Repeat("h", 256)+`"}`, nil, 400, "hypervisor_hostname is too long"),
		req("host zone too long", "POST", "/v1/os-hosts", `{"name": "h", "availability_zone": "`+strings.Repeat("z", 256)+`"}`, nil, 400, "availability_zone is too long"),
		req("host extra value too long", "POST", "/v1/os-hosts", `{"name": "h", "rack": "`+strings.Repeat("r", 65537)+`"}`, nil, 400, "rack is too long"),
		req("host vcpus beyond 32 bits", "POST", "/v1/os-hosts", `{"name": "h", "vcpus": 3000000000}`, nil, 400, "Malformed parameter vcpus"),
		req("host name with NUL", "POST", "/v1/os-hosts", `{"name": "h\u0000"}`, nil, 400, "NUL"),
		req("project id too long", "POST", "/v1/leases", validLease, map[string]string{"X-Project-Id": strings.Repeat("p", 256)}, 400, "X-Project-Id is too long"),

		// Cross-site requests and DNS rebinding (noauth makes every caller an admin).
		req("no content type", "POST", "/v1/os-hosts", `{"name": "h"}`, map[string]string{"Content-Type": ""}, 400, "Content-Type: application/json"),
		req("update without content type", "PUT", "/v1/leases/{{lease}}", `{"name": "x"}`, map[string]string{"Content-Type": ""}, 400, "Content-Type"),
		req("cross-site post", "POST", "/v1/os-hosts", `{"name": "h"}`, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 403, "Cross-origin request refused"),
		req("foreign origin delete", "DELETE", "/v1/leases/{{lease}}", "", map[string]string{"Origin": "https://evil.example"}, 403, "Cross-origin"),
		req("foreign host", "POST", "/v1/os-hosts", `{"name": "h"}`, map[string]string{"Host": "rebind.evil.example:1234"}, 403, "not a loopback address"),
		req("foreign host read", "GET", "/v1/leases", "", map[string]string{"Host": "rebind.evil.example"}, 403, "not a loopback address"),

		// Webhooks (Climate's extension).
		hook("webhook missing url", `{}`, 400, "Missing parameter url"),
		hook("webhook empty body", ``, 400, "Missing parameter url"),
		hook("webhook null url", `{"url": null}`, 400, "Missing parameter url"),
		hook("webhook url number", `{"url": 5}`, 400, "Malformed parameter url: expected a string"),
		hook("webhook ftp url", `{"url": "ftp://127.0.0.1/x"}`, 400, "the scheme must be http or https"),
		hook("webhook relative url", `{"url": "/hooks"}`, 400, "the scheme must be http or https"),
		hook("webhook url without host", `{"url": "http:///x"}`, 400, "no host"),
		hook("webhook url with credentials", `{"url": "http://user:hunter2@127.0.0.1:1/"}`, 400, "credentials in the URL are not accepted"),
		hook("webhook url with fragment", `{"url": "{{hook}}/#x"}`, 400, "fragment"),
		hook("webhook url too long", `{"url": "{{hook}}/`+strings.Repeat("x", climate.MaxWebhookURLLength)+`"}`, 400, "url is too long", "at most 2048"),
		hook("webhook url with NUL", `{"url": "{{hook}}/\u0000"}`, 400, "NUL"),
		hook("webhook unknown event type", `{"url": "{{hook}}", "event_types": ["lease.create", "lease.explode"]}`, 400, `Unknown event type "lease.explode"`, "lease.event.start_lease"),
		hook("webhook blazar event name", `{"url": "{{hook}}", "event_types": ["start_lease"]}`, 400, "Unknown event type"),
		hook("webhook 17 event types", `{"url": "{{hook}}", "event_types": [`+strings.TrimSuffix(strings.Repeat(`"lease.create",`, 17), ",")+`]}`, 400, "event_types has 17 entries, at most 16"),
		hook("webhook event_types string", `{"url": "{{hook}}", "event_types": "lease.create"}`, 400, "Malformed parameter event_types: expected a list of strings"),
		hook("webhook event_types numbers", `{"url": "{{hook}}", "event_types": [1]}`, 400, "Malformed parameter event_types"),
		hook("webhook event_types object", `{"url": "{{hook}}", "event_types": {}}`, 400, "Malformed parameter event_types"),
		hook("webhook all_projects string", `{"url": "{{hook}}", "all_projects": "yes"}`, 400, "Malformed parameter all_projects"),
		hook("webhook project_id number", `{"url": "{{hook}}", "project_id": 7}`, 400, "Malformed parameter project_id"),
		hook("webhook secret too short", `{"url": "{{hook}}", "secret": "short"}`, 400, "secret must be 16 to 256 characters long"),
		hook("webhook secret too long", `{"url": "{{hook}}", "secret": "`+strings.Repeat("s", 257)+`"}`, 400, "secret must be 16 to 256"),
		hook("webhook secret with spaces", `{"url": "{{hook}}", "secret": "sixteen characters here"}`, 400, "printable ASCII without spaces"),
		hook("webhook secret number", `{"url": "{{hook}}", "secret": 1234567890123456789}`, 400, "Malformed parameter secret"),
		hook("webhook unknown key", `{"url": "{{hook}}", "name": "mine"}`, 400, `Unknown parameter "name" in a webhook`, "event_types"),
		hook("webhook enabled on create", `{"url": "{{hook}}", "enabled": false}`, 400, `Unknown parameter "enabled"`),
		hook("webhook array body", `[{"url": "{{hook}}"}]`, 400, "must be a JSON object"),
		hook("webhook all_projects by member", `{"url": "{{hook}}", "all_projects": true}`, 403, "all_projects"),
		hook("webhook other project by member", `{"url": "{{hook}}", "project_id": "chemistry"}`, 403, "another project"),
		req("webhook by reader", "POST", "/v1/webhooks", `{"url": "{{hook}}"}`, asReader, 403, "climate:webhooks:post"),
		req("webhook list by guest", "GET", "/v1/webhooks", "", asGuest, 403, "climate:webhooks:get"),
		req("webhook update empty", "PUT", "/v1/webhooks/{{ahook}}", `{}`, asAlice, 400, "Nothing to change", "url, event_types, enabled"),
		req("webhook update no body", "PUT", "/v1/webhooks/{{ahook}}", ``, asAlice, 400, "Nothing to change"),
		req("webhook update unknown key", "PUT", "/v1/webhooks/{{ahook}}", `{"enabled": false, "secret": "0123456789abcdef"}`, asAlice, 400, `Unknown parameter "secret" in a webhook update`),
		req("webhook update enabled string", "PUT", "/v1/webhooks/{{ahook}}", `{"enabled": "no"}`, asAlice, 400, "Malformed parameter enabled"),
		req("webhook update event_types string", "PUT", "/v1/webhooks/{{ahook}}", `{"event_types": "lease.create"}`, asAlice, 400, "Malformed parameter event_types"),
		req("webhook update unknown event", "PUT", "/v1/webhooks/{{ahook}}", `{"enabled": false, "event_types": ["lease.nope"]}`, asAlice, 400, "Unknown event type"),
		req("webhook update bad url", "PUT", "/v1/webhooks/{{ahook}}", `{"enabled": false, "url": "gopher://127.0.0.1/"}`, asAlice, 400, "the scheme must be http or https"),
		req("webhook update closed port", "PUT", "/v1/webhooks/{{ahook}}", `{"enabled": false, "url": "http://127.0.0.1:1/"}`, asAlice, 400, "did not accept a test delivery"),
		req("webhook update by reader", "PUT", "/v1/webhooks/{{ahook}}", `{"enabled": false}`, asReader, 403, "climate:webhooks:put"),
		req("webhook delete by reader", "DELETE", "/v1/webhooks/{{ahook}}", "", asReader, 403, "climate:webhooks:delete"),
		req("webhook of other project", "GET", "/v1/webhooks/{{ahook}}", "", asBob, 404, "Webhook {{ahook}} not found"),
		req("webhook update of other project", "PUT", "/v1/webhooks/{{ahook}}", `{"enabled": false}`, asBob, 404, "not found"),
		req("webhook delete of other project", "DELETE", "/v1/webhooks/{{ahook}}", "", asBob, 404, "not found"),
		req("webhook deliveries of other project", "GET", "/v1/webhooks/{{ahook}}/deliveries", "", asBob, 404, "not found"),
		req("webhook unknown id", "DELETE", "/v1/webhooks/nope", "", nil, 404, "Webhook nope not found"),
		req("webhook id too long", "GET", "/v1/webhooks/"+strings.Repeat("w", 300), "", nil, 400, "too long"),
		req("webhook deliveries limit 0", "GET", "/v1/webhooks/{{ahook}}/deliveries?limit=0", "", asAlice, 400, `limit="0" is not a positive integer`),
		req("webhook deliveries limit negative", "GET", "/v1/webhooks/{{ahook}}/deliveries?limit=-1", "", asAlice, 400, "not a positive integer"),
		req("webhook deliveries limit word", "GET", "/v1/webhooks/{{ahook}}/deliveries?limit=ten", "", asAlice, 400, "not a positive integer"),
		req("webhook deliveries limit huge", "GET", "/v1/webhooks/{{ahook}}/deliveries?limit=99999999999999999999", "", asAlice, 400, "not a positive integer"),
		req("webhook deliveries unknown parameter", "GET", "/v1/webhooks/{{ahook}}/deliveries?status=failed", "", asAlice, 400, `Unknown query parameter "status"`),
		req("webhook deliveries repeated limit", "GET", "/v1/webhooks/{{ahook}}/deliveries?limit=1&limit=2", "", asAlice, 400, "given 2 times"),
		req("wrong method on webhooks", "DELETE", "/v1/webhooks", "", nil, 405, "DELETE"),
		req("wrong method on webhook", "POST", "/v1/webhooks/{{ahook}}", `{"enabled": false}`, nil, 405, "POST"),
		req("wrong method on deliveries", "DELETE", "/v1/webhooks/{{ahook}}/deliveries", "", nil, 405, "DELETE"),
		req("unknown webhook subroute", "GET", "/v1/webhooks/{{ahook}}/secret", "", nil, 404, "could not be found"),
		req("webhook cross-site post", "POST", "/v1/webhooks", `{"url": "{{hook}}"}`, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 403, "Cross-origin"),
		req("webhook text/plain", "POST", "/v1/webhooks", `{"url": "{{hook}}"}`, map[string]string{"Content-Type": "text/plain"}, 400, "Content-Type"),
		req("oversized webhook body", "POST", "/v1/webhooks", huge, nil, 413, "larger than"),

		// Floating IPs. fipWith's bodies differ from the seeded IP (a different address), so
		// each is refused for the one thing it breaks, not as a duplicate.
		fip("floating IP missing network", fipWith(`{"floating_network_id": "<delete>", "floating_ip_address": "172.24.4.1"}`), 400, "Missing parameter floating_network_id"),
		fip("floating IP null network", fipWith(`{"floating_network_id": null, "floating_ip_address": "172.24.4.1"}`), 400, "Missing parameter floating_network_id"),
		fip("floating IP empty network", fipWith(`{"floating_network_id": "", "floating_ip_address": "172.24.4.1"}`), 400, "Missing parameter floating_network_id"),
		fip("floating IP missing address", fipWith(`{"floating_ip_address": "<delete>"}`), 400, "Missing parameter floating_ip_address"),
		fip("floating IP empty body", ``, 400, "Missing parameter floating_network_id"),
		fip("floating IP empty address", fipWith(`{"floating_ip_address": ""}`), 400, "Missing parameter floating_ip_address"),
		fip("floating IP octet 300", fipWith(`{"floating_ip_address": "300.1.1.1"}`), 400, "Malformed parameter floating_ip_address", `"300.1.1.1"`),
		fip("floating IP word", fipWith(`{"floating_ip_address": "abc"}`), 400, "Malformed parameter floating_ip_address", `"abc"`),
		fip("floating IP three octets", fipWith(`{"floating_ip_address": "172.24.4"}`), 400, `"172.24.4"`),
		fip("floating IP leading zero", fipWith(`{"floating_ip_address": "172.024.4.1"}`), 400, `"172.024.4.1"`),
		fip("floating IP CIDR", fipWith(`{"floating_ip_address": "172.24.4.0/24"}`), 400, `"172.24.4.0/24"`),
		fip("floating IP zone", fipWith(`{"floating_ip_address": "fe80::1%eth0"}`), 400, `"fe80::1%eth0"`),
		fip("floating IP space", fipWith(`{"floating_ip_address": " 172.24.4.1"}`), 400, "not an IPv4 or IPv6 address"),
		fip("floating IP address number", fipWith(`{"floating_ip_address": 2887255141}`), 400, "Malformed parameter floating_ip_address: expected a string"),
		fip("floating IP address list", fipWith(`{"floating_ip_address": ["172.24.4.1"]}`), 400, "Malformed parameter floating_ip_address"),
		fip("floating IP network number", fipWith(`{"floating_network_id": 7, "floating_ip_address": "172.24.4.1"}`), 400, "Malformed parameter floating_network_id"),
		fip("floating IP subnet object", fipWith(`{"subnet_id": {}, "floating_ip_address": "172.24.4.1"}`), 400, "Malformed parameter subnet_id"),
		fip("floating IP unknown key", fipWith(`{"floating_ip_address": "172.24.4.1", "network_id": "ext-net"}`), 400, `Unknown parameter "network_id" in a floating IP`),
		fip("floating IP explicit id", fipWith(`{"floating_ip_address": "172.24.4.1", "id": "x"}`), 400, `Unknown parameter "id"`),
		fip("floating IP network too long", fipWith(`{"floating_network_id": "`+strings.Repeat("n", 256)+`", "floating_ip_address": "172.24.4.1"}`), 400, "floating_network_id is too long"),
		fip("floating IP subnet too long", fipWith(`{"subnet_id": "`+strings.Repeat("s", 256)+`", "floating_ip_address": "172.24.4.1"}`), 400, "subnet_id is too long"),
		fip("floating IP network with NUL", fipWith(`{"floating_network_id": "n\u0000", "floating_ip_address": "172.24.4.1"}`), 400, "NUL"),
		fip("floating IP address too long", fipWith(`{"floating_ip_address": "`+strings.Repeat("1", 300)+`"}`), 400, "too long"),
		fip("floating IP duplicate", validFloatingIP, 409, "172.24.4.101 is already registered on network ext-net"),
		fip("floating IP duplicate non-canonical", fipWith(`{"floating_ip_address": "::ffff:172.24.4.101"}`), 409, "172.24.4.101 is already registered"),
		fip("floating IP array body", `[`+validFloatingIP+`]`, 400, "must be a JSON object"),
		req("floating IP by member", "POST", "/v1/floatingips", fipWith(`{"floating_ip_address": "172.24.4.1"}`), asAlice, 403, "blazar:floatingips:post"),
		req("floating IP by reader", "POST", "/v1/floatingips", fipWith(`{"floating_ip_address": "172.24.4.1"}`), asReader, 403, "blazar:floatingips:post"),
		req("floating IP delete by member", "DELETE", "/v1/floatingips/{{fip}}", "", asAlice, 403, "blazar:floatingips:delete"),
		req("floating IP delete by reader", "DELETE", "/v1/floatingips/{{fip}}", "", asReader, 403, "blazar:floatingips:delete"),
		req("floating IP list by guest", "GET", "/v1/floatingips", "", asGuest, 403, "blazar:floatingips:get"),
		req("floating IP show by guest", "GET", "/v1/floatingips/{{fip}}", "", asGuest, 403, "blazar:floatingips:get"),
		req("floating IP unknown id", "GET", "/v1/floatingips/nope", "", nil, 404, "Object with {'floatingip_id': 'nope'} not found"),
		req("floating IP delete unknown id", "DELETE", "/v1/floatingips/nope", "", nil, 404, "Object with {'floatingip_id': 'nope'} not found"),
		req("floating IP id too long", "DELETE", "/v1/floatingips/"+strings.Repeat("f", 300), "", nil, 400, "too long"),
		req("wrong method on floating IPs", "DELETE", "/v1/floatingips", "", nil, 405, "DELETE"),
		req("wrong method on floating IP", "PUT", "/v1/floatingips/{{fip}}", `{"floating_ip_address": "172.24.4.2"}`, nil, 405, "PUT"),
		req("unknown floating IP subroute", "GET", "/v1/floatingips/{{fip}}/allocation", "", nil, 404, "could not be found"),
		req("floating IP text/plain", "POST", "/v1/floatingips", fipWith(`{"floating_ip_address": "172.24.4.1"}`), map[string]string{"Content-Type": "text/plain"}, 400, "Content-Type"),
		req("floating IP cross-site post", "POST", "/v1/floatingips", fipWith(`{"floating_ip_address": "172.24.4.1"}`), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 403, "Cross-origin"),
		req("oversized floating IP body", "POST", "/v1/floatingips", huge, nil, 413, "larger than"),

		// Flavors. flavorWith's bodies differ from the seeded flavor (another name, no id), so
		// each is refused for the one thing it breaks, not as a duplicate.
		flavor("flavor missing name", flavorWith(`{"name": "<delete>"}`), 400, "Missing parameter name"),
		flavor("flavor null name", flavorWith(`{"name": null}`), 400, "Missing parameter name"),
		flavor("flavor empty name", flavorWith(`{"name": ""}`), 400, "Missing parameter name"),
		flavor("flavor empty body", ``, 400, "Missing parameter name"),
		flavor("flavor name number", flavorWith(`{"name": 5}`), 400, "Malformed parameter name: expected a string"),
		flavor("flavor name too long", flavorWith(`{"name": "`+strings.Repeat("n", 256)+`"}`), 400, "name is too long"),
		flavor("flavor name with NUL", flavorWith(`{"name": "n\u0000"}`), 400, "NUL"),
		flavor("flavor name spaced", flavorWith(`{"name": "m1.new "}`), 400, "Malformed parameter name (must not begin or end with whitespace)"),
		flavor("flavor missing vcpus", flavorWith(`{"vcpus": "<delete>"}`), 400, "Missing parameter vcpus"),
		flavor("flavor null vcpus", flavorWith(`{"vcpus": null}`), 400, "Missing parameter vcpus"),
		flavor("flavor missing ram", flavorWith(`{"ram": "<delete>"}`), 400, "Missing parameter ram"),
		flavor("flavor missing disk", flavorWith(`{"disk": "<delete>"}`), 400, "Missing parameter disk"),
		flavor("flavor zero vcpus", flavorWith(`{"vcpus": 0}`), 400, "Malformed parameter vcpus (must be an integer from 1 to 2147483647): 0"),
		flavor("flavor negative vcpus", flavorWith(`{"vcpus": -1}`), 400, "Malformed parameter vcpus (must be"),
		flavor("flavor fractional vcpus", flavorWith(`{"vcpus": 1.5}`), 400, "Malformed parameter vcpus: expected an integer"),
		flavor("flavor boolean vcpus", flavorWith(`{"vcpus": true}`), 400, "Malformed parameter vcpus: expected an integer"),
		flavor("flavor word vcpus", flavorWith(`{"vcpus": "two"}`), 400, "Malformed parameter vcpus: expected an integer"),
		flavor("flavor huge vcpus", flavorWith(`{"vcpus": 2147483648}`), 400, "Malformed parameter vcpus: expected an integer"),
		flavor("flavor vcpus list", flavorWith(`{"vcpus": [1]}`), 400, "Malformed parameter vcpus"),
		flavor("flavor zero ram", flavorWith(`{"ram": 0}`), 400, "Malformed parameter ram (must be an integer from 1"),
		flavor("flavor ram object", flavorWith(`{"ram": {}}`), 400, "Malformed parameter ram: expected an integer"),
		flavor("flavor negative disk", flavorWith(`{"disk": -1}`), 400, "Malformed parameter disk (must be an integer from 0"),
		flavor("flavor negative ephemeral", flavorWith(`{"OS-FLV-EXT-DATA:ephemeral": -1}`), 400, "Malformed parameter ephemeral (must be an integer from 0"),
		flavor("flavor negative plain ephemeral", flavorWith(`{"OS-FLV-EXT-DATA:ephemeral": "<delete>", "ephemeral": -2}`), 400, "Malformed parameter ephemeral (must be"),
		flavor("flavor word ephemeral", flavorWith(`{"OS-FLV-EXT-DATA:ephemeral": "x"}`), 400, "Malformed parameter OS-FLV-EXT-DATA:ephemeral: expected an integer"),
		flavor("flavor both ephemeral keys", flavorWith(`{"ephemeral": 0}`), 400, "not both"),
		flavor("flavor id number", flavorWith(`{"id": 5}`), 400, "Malformed parameter id: expected a string"),
		flavor("flavor id with slash", flavorWith(`{"id": "a/b"}`), 400, "Malformed parameter id (must not contain '/')"),
		flavor("flavor id dot-dot", flavorWith(`{"id": ".."}`), 400, "Malformed parameter id"),
		flavor("flavor id .json", flavorWith(`{"id": "m1.json"}`), 400, `must not end with ".json"`),
		flavor("flavor id too long", flavorWith(`{"id": "`+strings.Repeat("i", 256)+`"}`), 400, "id is too long"),
		flavor("flavor id with NUL", flavorWith(`{"id": "i\u0000"}`), 400, "NUL"),
		flavor("flavor extra specs list", flavorSpecs(`["trait:X"]`), 400, "Malformed parameter extra_specs: expected an object whose values are strings"),
		flavor("flavor extra specs string", flavorSpecs(`"trait:X=required"`), 400, "Malformed parameter extra_specs: expected an object"),
		flavor("flavor extra spec number", flavorSpecs(`{"resources:VGPU": 1}`), 400, `Malformed parameter extra_specs: the value of "resources:VGPU" must be a string`),
		flavor("flavor extra spec null", flavorSpecs(`{"hw:cpu_policy": null}`), 400, `the value of "hw:cpu_policy" must be a string`),
		flavor("flavor extra spec object", flavorSpecs(`{"hw": {"cpu_policy": "dedicated"}}`), 400, `the value of "hw" must be a string`),
		flavor("flavor trait value", flavorSpecs(`{"trait:HW_CPU_X86_AVX2": "preferred"}`), 400, `Invalid trait value "preferred" for trait:HW_CPU_X86_AVX2: expected "required" or "forbidden"`),
		flavor("flavor group trait value", flavorSpecs(`{"trait1:CUSTOM_X": "true"}`), 400, `Invalid trait value "true" for trait1:CUSTOM_X`),
		flavor("flavor trait without name", flavorSpecs(`{"trait:": "required"}`), 400, `"trait:" names no trait`),
		flavor("flavor resources word", flavorSpecs(`{"resources:VGPU": "one"}`), 400, `Invalid resources value "one" for resources:VGPU: expected a non-negative integer`),
		flavor("flavor resources negative", flavorSpecs(`{"resources:VCPU": "-1"}`), 400, `Invalid resources value "-1"`),
		flavor("flavor resources fraction", flavorSpecs(`{"resources_gpu:VGPU": "0.5"}`), 400, `Invalid resources value "0.5" for resources_gpu:VGPU`),
		flavor("flavor resources huge", flavorSpecs(`{"resources:MEMORY_MB": "99999999999"}`), 400, `Invalid resources value "99999999999"`),
		flavor("flavor resources without class", flavorSpecs(`{"resources:": "1"}`), 400, `"resources:" names no resource class`),
		flavor("flavor too many extra specs", flavorSpecs(manySpecs(65)), 400, "Malformed parameter extra_specs (must have at most 64 entries): 65"),
		flavor("flavor empty extra spec key", flavorSpecs(`{"": "x"}`), 400, "keys must not be empty"),
		flavor("flavor extra spec key too long", flavorSpecs(`{"`+strings.Repeat("k", 256)+`": "x"}`), 400, "extra_specs key is too long"),
		flavor("flavor extra spec value too long", flavorSpecs(`{"hw:x": "`+strings.Repeat("v", 256)+`"}`), 400, "extra_specs value of hw:x is too long"),
		flavor("flavor extra spec value with NUL", flavorSpecs(`{"hw:x": "v\u0000"}`), 400, "NUL"),
		flavor("flavor unknown key", flavorWith(`{"swap": 0}`), 400, `Unknown parameter "swap" in a flavor`),
		flavor("flavor Nova's wrapper", `{"flavor": `+newFlavor+`}`, 400, `Unknown parameter "flavor" in a flavor`),
		flavor("flavor duplicate id", flavorWith(`{"id": "m1.small"}`), 409, "Flavor with ID m1.small already exists"),
		flavor("flavor duplicate name", flavorWith(`{"name": "m1.small"}`), 409, "Flavor with name m1.small already exists"),
		flavor("flavor duplicate", validFlavor, 409, "m1.small already exists"),
		flavor("flavor array body", `[`+newFlavor+`]`, 400, "must be a JSON object"),
		req("flavor by member", "POST", "/v1/flavors", newFlavor, asAlice, 403, "blazar:flavors:post"),
		req("flavor by reader", "POST", "/v1/flavors", newFlavor, asReader, 403, "blazar:flavors:post"),
		req("flavor delete by member", "DELETE", "/v1/flavors/{{flavor}}", "", asAlice, 403, "blazar:flavors:delete"),
		req("flavor delete by reader", "DELETE", "/v1/flavors/{{flavor}}", "", asReader, 403, "blazar:flavors:delete"),
		req("flavor list by guest", "GET", "/v1/flavors", "", asGuest, 403, "blazar:flavors:get"),
		req("flavor show by guest", "GET", "/v1/flavors/{{flavor}}", "", asGuest, 403, "blazar:flavors:get"),
		req("flavor unknown id", "GET", "/v1/flavors/nope", "", nil, 404, "Object with {'flavor_id': 'nope'} not found"),
		req("flavor delete unknown id", "DELETE", "/v1/flavors/nope", "", nil, 404, "Object with {'flavor_id': 'nope'} not found"),
		req("flavor id too long in the path", "DELETE", "/v1/flavors/"+strings.Repeat("f", 300), "", nil, 400, "too long"),
		req("wrong method on flavors", "DELETE", "/v1/flavors", "", nil, 405, "DELETE"),
		req("wrong method on flavor", "PUT", "/v1/flavors/{{flavor}}", newFlavor, nil, 405, "PUT"),
		req("unknown flavor subroute", "GET", "/v1/flavors/{{flavor}}/os-extra_specs", "", nil, 404, "could not be found"),
		req("flavor text/plain", "POST", "/v1/flavors", newFlavor, map[string]string{"Content-Type": "text/plain"}, 400, "Content-Type"),
		req("flavor cross-site post", "POST", "/v1/flavors", newFlavor, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 403, "Cross-origin"),
		req("oversized flavor body", "POST", "/v1/flavors", huge, nil, 413, "larger than"),

		// Other projects' leases do not exist for a non-admin.
		req("other project gets lease", "GET", "/v1/leases/{{alease}}", "", asBob, 404, "{{alease}}"),
		req("other project updates lease", "PUT", "/v1/leases/{{alease}}", `{"name": "mine"}`, asBob, 404, "{{alease}}"),
		req("other project deletes lease", "DELETE", "/v1/leases/{{alease}}", "", asBob, 404, "{{alease}}"),
		req("member gets admin lease", "GET", "/v1/leases/{{lease}}", "", asAlice, 404, "{{lease}}"),
		req("member updates admin lease", "PUT", "/v1/leases/{{lease}}", `{"end_date": "2026-11-23 12:00"}`, asAlice, 404, "{{lease}}"),
		req("member deletes admin lease", "DELETE", "/v1/leases/{{lease}}", "", asAlice, 404, "{{lease}}"),
	}
}

// manySpecs is a JSON object of n extra specs.
func manySpecs(n int) string {
	pairs := make([]string, n)
	for i := range pairs {
		pairs[i] = fmt.Sprintf(`"hw:k%d": "v"`, i)
	}
	return "{" + strings.Join(pairs, ", ") + "}"
}

// TestBadInput sends every kind of bad input the API takes and checks that each gets a
// 4xx in Blazar's error shape saying what is wrong, and that none changes anything.
func TestBadInput(t *testing.T) {
	onEachStore(t, testBadInput)
}

func testBadInput(t *testing.T, e *env) {
	vars := seed(e)
	before := e.state(vars)
	seen := map[string]bool{}
	for _, tc := range badCases() {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			c := tc.call
			c.path = expand(t, c.path, vars)
			c.body = expand(t, c.body, vars)
			r := e.do(c)
			if r.status < 400 || r.status >= 500 {
				t.Errorf("%s %s: status %d, want a 4xx", c.method, c.path, r.status)
			}
			checkHeaders(t, r)
			msgs := make([]string, len(tc.msg))
			for i, m := range tc.msg {
				msgs[i] = expand(t, m, vars)
			}
			checkError(t, r, tc.status, msgs...)
			if r.status == http.StatusMethodNotAllowed && r.header.Get("Allow") == "" {
				t.Errorf("405 without an Allow header")
			}
			if r.status == http.StatusUnauthorized && r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without a WWW-Authenticate header")
			}
			if after := e.state(vars); after != before {
				t.Errorf("%s %s changed the state: %s", c.method, c.path, stateDiff(before, after))
				before = after // judge the next cases on their own
			}
		})
	}

	// The cases fail for the reason they name, not because the fixture is unusable: the
	// valid bodies they start from are accepted, and other projects' leases are not listed.
	t.Run("fixture", func(t *testing.T) {
		mine := e.mustDo(call{method: "GET", path: "/v1/leases", header: asBob}, 200)
		if leases := mine["leases"].([]any); len(leases) != 0 {
			t.Errorf("bob (chemistry) lists %d leases of other projects", len(leases))
		}
		alices := e.mustDo(call{method: "GET", path: "/v1/leases", header: asAlice}, 200)
		if leases := alices["leases"].([]any); len(leases) != 1 || lookup(t, alices, "leases.0.id") != vars["alease"] {
			t.Errorf("alice (physics) lists %v, want only her lease %s", alices, vars["alease"])
		}
		readers := e.mustDo(call{method: "GET", path: "/v1/leases", header: asReader}, 200)
		if leases := readers["leases"].([]any); len(leases) != 1 {
			t.Errorf("a physics reader lists %d leases, want alice's", len(leases))
		}
		e.mustDo(call{method: "PUT", path: "/v1/leases/" + vars["lease"], body: `{"reservations": [{"id": "` + vars["res"] + `", "min": 1, "max": 1}]}`}, 200)
		e.mustDo(call{method: "PUT", path: "/v1/os-hosts/2", body: `{"rack": "r2", "vcpus": "8"}`}, 200)
		e.mustDo(call{method: "PATCH", path: "/v1/os-hosts/properties/gpu", body: `{"private": false}`}, 200)
		e.mustDo(call{method: "POST", path: "/v1/leases", body: validLease, header: map[string]string{"Content-Type": "application/json; charset=utf-8"}}, 201)
		if r := e.do(call{method: "POST", path: "/v1/leases", body: validLease}); r.status != http.StatusConflict {
			t.Errorf("a fourth lease on three hosts: %s, want 409", r)
		}
		// Webhooks: 16 event types (each once), a 16-character secret, a limit of 1.
		w := e.mustDo(call{method: "POST", path: "/v1/webhooks", header: asAlice, body: `{"url": "` + vars["hook"] + `", "secret": "0123456789abcdef", "event_types": [` +
			strings.TrimSuffix(strings.Repeat(`"lease.create",`, 16), ",") + `]}`}, http.StatusCreated)
		if types := w["webhook"].(map[string]any)["event_types"].([]any); len(types) != 1 {
			t.Errorf("16 × lease.create: event_types %v", types)
		}
		e.mustDo(call{method: "GET", path: "/v1/webhooks/" + vars["ahook"] + "/deliveries?limit=1", header: asAlice}, http.StatusOK)
		e.mustDo(call{method: "PUT", path: "/v1/webhooks/" + vars["ahook"], body: `{"enabled": false, "url": "` + vars["hook"] + `/other"}`, header: asAlice}, http.StatusOK)
		e.mustDo(call{method: "POST", path: "/v1/webhooks", body: `{"url": "` + vars["hook"] + `", "project_id": "chemistry", "all_projects": false}`}, http.StatusCreated)
		// Floating IPs: the bodies the cases change are accepted with a free address.
		e.mustDo(call{method: "POST", path: "/v1/floatingips", body: fipWith(`{"floating_ip_address": "172.24.4.1", "subnet_id": "sub"}`)}, http.StatusCreated)
		e.mustDo(call{method: "POST", path: "/v1/floatingips", body: fipWith(`{"floating_network_id": "other-net"}`)}, http.StatusCreated)
		e.mustDo(call{method: "GET", path: "/v1/floatingips/" + vars["fip"], header: asReader}, http.StatusOK)
		e.mustDo(call{method: "DELETE", path: "/v1/floatingips/" + vars["fip"]}, http.StatusNoContent)
		// Flavors: the body the cases change is accepted, and so is the plain ephemeral key
		// and 64 extra specs.
		e.mustDo(call{method: "POST", path: "/v1/flavors", body: newFlavor}, http.StatusCreated)
		e.mustDo(call{method: "POST", path: "/v1/flavors", body: flavorWith(`{"name": "m1.plain", "id": "plain", "OS-FLV-EXT-DATA:ephemeral": "<delete>", "ephemeral": 5}`)}, http.StatusCreated)
		e.mustDo(call{method: "POST", path: "/v1/flavors", body: patchJSON(flavorSpecs(manySpecs(64)), `{"name": "m1.specs"}`)}, http.StatusCreated)
		e.mustDo(call{method: "GET", path: "/v1/flavors/" + vars["flavor"], header: asReader}, http.StatusOK)
		e.mustDo(call{method: "DELETE", path: "/v1/flavors/" + vars["flavor"]}, http.StatusNoContent)
	})
}

// TestOversizedChunkedBody checks that the body limit holds when the client sends no
// Content-Length (chunked), too.
func TestOversizedChunkedBody(t *testing.T) {
	e := newEnv(t, nil)
	body := `{"name": "` + strings.Repeat("x", climatehttp.MaxBodyBytes) + `"}`
	req, err := http.NewRequest("POST", e.url+"/v1/os-hosts", struct{ *bytes.Reader }{bytes.NewReader([]byte(body))})
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if req.ContentLength != 0 {
		t.Fatalf("Content-Length %d: the request would not be chunked", req.ContentLength)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, body: buf.Bytes()}
	checkError(t, r, http.StatusRequestEntityTooLarge, "larger than")
	if hosts := e.mustDo(call{method: "GET", path: "/v1/os-hosts"}, 200)["hosts"].([]any); len(hosts) != 0 {
		t.Errorf("%d hosts registered", len(hosts))
	}
}
