package http_test

import (
	"net/http"
	"reflect"
	"testing"
	"time"
)

// TestFloatingIPs walks the floating IP inventory through the API on each store: the admin
// registers addresses (canonicalized), readers and members list and show them, only admins
// delete, and a deleted IP is gone (404) and its address free again.
func TestFloatingIPs(t *testing.T) {
	onEachStore(t, testFloatingIPs)
}

func testFloatingIPs(t *testing.T, e *env) {
	if r := e.do(call{method: "GET", path: "/v1/floatingips"}); r.status != http.StatusOK || string(r.body) != `{"floatingips":[]}` {
		t.Fatalf("empty inventory: %s", r)
	}
	a := e.mustDo(call{method: "POST", path: "/v1/floatingips",
		body: `{"floating_network_id": "ext-net", "floating_ip_address": "172.24.4.101"}`}, http.StatusCreated)
	e.clk.Advance(time.Second) // list order is creation order, so each is created later
	b := e.mustDo(call{method: "POST", path: "/v1/floatingips",
		body: `{"floating_network_id": "ext-net", "floating_ip_address": "2001:DB8:0::5", "subnet_id": "v6"}`}, http.StatusCreated)
	// The same address on another network is another floating IP.
	e.clk.Advance(time.Second)
	c := e.mustDo(call{method: "POST", path: "/v1/floatingips",
		body: `{"floating_network_id": "other-net", "floating_ip_address": "172.24.4.101"}`}, http.StatusCreated)
	fa, fb, fc := a["floatingip"].(map[string]any), b["floatingip"].(map[string]any), c["floatingip"].(map[string]any)
	want := map[string]any{"id": fa["id"], "floating_network_id": "ext-net", "subnet_id": nil,
		"floating_ip_address": "172.24.4.101", "reservable": true, "created_at": "2026-11-21 10:00:00", "updated_at": nil}
	if !reflect.DeepEqual(fa, want) {
		t.Errorf("create answered\n%v\nwant\n%v", fa, want)
	}
	if fb["floating_ip_address"] != "2001:db8::5" || fb["subnet_id"] != "v6" {
		t.Errorf("IPv6 with a subnet: %v, want 2001:db8::5 in subnet v6", fb)
	}

	// Readers (and members) of any project read the inventory, in registration order.
	for _, who := range []map[string]string{nil, asReader, asAlice, asBob} {
		list := e.mustDo(call{method: "GET", path: "/v1/floatingips", header: who}, http.StatusOK)
		var ids []any
		for _, f := range list["floatingips"].([]any) {
			ids = append(ids, f.(map[string]any)["id"])
		}
		if wantIDs := []any{fa["id"], fb["id"], fc["id"]}; !reflect.DeepEqual(ids, wantIDs) {
			t.Errorf("list as %v: %v, want %v", who, ids, wantIDs)
		}
		show := e.mustDo(call{method: "GET", path: "/v1/floatingips/" + fa["id"].(string), header: who}, http.StatusOK)
		if !reflect.DeepEqual(show["floatingip"], fa) {
			t.Errorf("show as %v: %v, want %v", who, show["floatingip"], fa)
		}
		if r := e.do(call{method: "GET", path: "/v1/floatingips/" + fa["id"].(string) + ".json", header: who}); r.status != http.StatusOK {
			t.Errorf("show with .json as %v: %s", who, r)
		}
	}
	// Members and readers cannot change it.
	for _, who := range []map[string]string{asReader, asAlice} {
		if r := e.do(call{method: "DELETE", path: "/v1/floatingips/" + fa["id"].(string), header: who}); r.status != http.StatusForbidden {
			t.Errorf("delete as %v: %s, want 403", who, r)
		}
		if r := e.do(call{method: "POST", path: "/v1/floatingips", header: who,
			body: `{"floating_network_id": "ext-net", "floating_ip_address": "172.24.4.9"}`}); r.status != http.StatusForbidden {
			t.Errorf("create as %v: %s, want 403", who, r)
		}
	}

	// The admin deletes; the IP is gone and its address can be registered again.
	e.mustDo(call{method: "DELETE", path: "/v1/floatingips/" + fa["id"].(string)}, http.StatusNoContent)
	if r := e.do(call{method: "GET", path: "/v1/floatingips/" + fa["id"].(string)}); r.status != http.StatusNotFound {
		t.Errorf("show after delete: %s, want 404", r)
	}
	if r := e.do(call{method: "DELETE", path: "/v1/floatingips/" + fa["id"].(string)}); r.status != http.StatusNotFound {
		t.Errorf("delete twice: %s, want 404", r)
	}
	list := e.mustDo(call{method: "GET", path: "/v1/floatingips"}, http.StatusOK)
	if n := len(list["floatingips"].([]any)); n != 2 {
		t.Errorf("%d floating IPs after a delete, want 2", n)
	}
	e.mustDo(call{method: "POST", path: "/v1/floatingips",
		body: `{"floating_network_id": "ext-net", "floating_ip_address": "172.24.4.101"}`}, http.StatusCreated)
}
