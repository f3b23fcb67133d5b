package http_test

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestFlavors walks the flavors through the API on each store: the admin registers them
// (with an id of its own or a generated one, the ephemeral disk under Nova's key or the
// plain one), readers and members list and show them, only admins delete, and a deleted
// flavor is gone (404) and its id and name free again.
func TestFlavors(t *testing.T) {
	onEachStore(t, testFlavors)
}

func testFlavors(t *testing.T, e *env) {
	if r := e.do(call{method: "GET", path: "/v1/flavors"}); r.status != http.StatusOK || string(r.body) != `{"flavors":[]}` {
		t.Fatalf("no flavors: %s", r)
	}
	a := e.mustDo(call{method: "POST", path: "/v1/flavors",
		body: `{"id": "m1.gpu", "name": "gpu", "vcpus": 8, "ram": 32768, "disk": 80, "OS-FLV-EXT-DATA:ephemeral": 20,
			"extra_specs": {"trait:HW_GPU_API_VULKAN": "required", "resources:VGPU": "1"}}`}, http.StatusCreated)
	e.clk.Advance(time.Second) // list order is creation order, so each is created later
	b := e.mustDo(call{method: "POST", path: "/v1/flavors",
		body: `{"name": "small", "vcpus": "1", "ram": 2048, "disk": 0, "ephemeral": 5}`}, http.StatusCreated)
	fa, fb := a["flavor"].(map[string]any), b["flavor"].(map[string]any)
	specs := map[string]any{"trait:HW_GPU_API_VULKAN": "required", "resources:VGPU": "1"}
	want := map[string]any{"id": "m1.gpu", "name": "gpu", "vcpus": 8.0, "ram": 32768.0, "disk": 80.0, "OS-FLV-EXT-DATA:ephemeral": 20.0,
		"extra_specs": specs, "created_at": "2026-11-21 10:00:00", "updated_at": nil}
	if !reflect.DeepEqual(fa, want) {
		t.Errorf("create answered\n%v\nwant\n%v", fa, want)
	}
	if id, _ := fb["id"].(string); len(id) != 36 || fb["OS-FLV-EXT-DATA:ephemeral"] != 5.0 || fb["vcpus"] != 1.0 ||
		!reflect.DeepEqual(fb["extra_specs"], map[string]any{}) {
		t.Errorf("generated id, plain ephemeral key, no extra specs: %v", fb)
	}

	// Readers (and members) of any project read them, in registration order.
	for _, who := range []map[string]string{nil, asReader, asAlice, asBob} {
		list := e.mustDo(call{method: "GET", path: "/v1/flavors", header: who}, http.StatusOK)
		if got := list["flavors"].([]any); len(got) != 2 || !reflect.DeepEqual(got[0], fa) || !reflect.DeepEqual(got[1], fb) {
			t.Errorf("list as %v: %v, want [%v %v]", who, got, fa, fb)
		}
		show := e.mustDo(call{method: "GET", path: "/v1/flavors/m1.gpu", header: who}, http.StatusOK)
		if !reflect.DeepEqual(show["flavor"], fa) {
			t.Errorf("show as %v: %v, want %v", who, show["flavor"], fa)
		}
		if r := e.do(call{method: "GET", path: "/v1/flavors/m1.gpu.json", header: who}); r.status != http.StatusOK {
			t.Errorf("show with .json as %v: %s", who, r)
		}
	}
	// Members and readers cannot change them; guests cannot read them.
	for _, who := range []map[string]string{asReader, asAlice} {
		if r := e.do(call{method: "DELETE", path: "/v1/flavors/m1.gpu", header: who}); r.status != http.StatusForbidden {
			t.Errorf("delete as %v: %s, want 403", who, r)
		}
		if r := e.do(call{method: "POST", path: "/v1/flavors", header: who,
			body: `{"name": "mine", "vcpus": 1, "ram": 1, "disk": 1}`}); r.status != http.StatusForbidden {
			t.Errorf("create as %v: %s, want 403", who, r)
		}
	}
	if r := e.do(call{method: "GET", path: "/v1/flavors", header: asGuest}); r.status != http.StatusForbidden {
		t.Errorf("list as a guest: %s, want 403", r)
	}

	// The admin deletes; the flavor is gone and its id and name can be registered again.
	e.mustDo(call{method: "DELETE", path: "/v1/flavors/m1.gpu"}, http.StatusNoContent)
	if r := e.do(call{method: "GET", path: "/v1/flavors/m1.gpu"}); r.status != http.StatusNotFound {
		t.Errorf("show after delete: %s, want 404", r)
	}
	if r := e.do(call{method: "DELETE", path: "/v1/flavors/m1.gpu"}); r.status != http.StatusNotFound {
		t.Errorf("delete twice: %s, want 404", r)
	}
	list := e.mustDo(call{method: "GET", path: "/v1/flavors"}, http.StatusOK)
	if got := list["flavors"].([]any); len(got) != 1 || !reflect.DeepEqual(got[0], fb) {
		t.Errorf("after a delete: %v, want [%v]", got, fb)
	}
	e.mustDo(call{method: "POST", path: "/v1/flavors", body: `{"id": "m1.gpu", "name": "gpu", "vcpus": 1, "ram": 1, "disk": 1}`}, http.StatusCreated)
	// Ids with characters a path escapes are reachable.
	e.mustDo(call{method: "POST", path: "/v1/flavors", body: `{"id": "a b?c%d", "name": "odd", "vcpus": 1, "ram": 1, "disk": 1}`}, http.StatusCreated)
	if show := e.mustDo(call{method: "GET", path: "/v1/flavors/a%20b%3Fc%25d"}, http.StatusOK); show["flavor"].(map[string]any)["name"] != "odd" {
		t.Errorf("show of an escaped id: %v", show)
	}
	e.mustDo(call{method: "DELETE", path: "/v1/flavors/a%20b%3Fc%25d"}, http.StatusNoContent)
}

// TestFlavorHostileValues puts each hostile JSON value in each field of a flavor (and of
// its extra specs) on each store: every answer is 201 or a 4xx, never a 500.
func TestFlavorHostileValues(t *testing.T) {
	onEachStore(t, func(t *testing.T, e *env) {
		n := 0
		for _, key := range []string{"id", "name", "vcpus", "ram", "disk", "OS-FLV-EXT-DATA:ephemeral", "ephemeral", "extra_specs",
			"extra_specs.trait:X", "extra_specs.resources:VCPU", "extra_specs.hw:x"} {
			for _, v := range hostile {
				n++
				body := fmt.Sprintf(`{"name": "f%d", "vcpus": 1, "ram": 1, "disk": 1, %q: %s}`, n, key, v)
				if spec, ok := strings.CutPrefix(key, "extra_specs."); ok {
					body = fmt.Sprintf(`{"name": "f%d", "vcpus": 1, "ram": 1, "disk": 1, "extra_specs": {%q: %s}}`, n, spec, v)
				}
				if key == "name" {
					body = fmt.Sprintf(`{"vcpus": 1, "ram": 1, "disk": 1, "name": %s}`, v)
				}
				r := e.do(call{method: "POST", path: "/v1/flavors", body: body})
				if r.status != http.StatusCreated && (r.status < 400 || r.status >= 500) {
					t.Errorf("%s = %.80s: %.300s", key, v, r)
				}
				if r.status == http.StatusCreated {
					id := e.mustDo(call{method: "GET", path: "/v1/flavors"}, http.StatusOK)["flavors"].([]any)
					last := id[len(id)-1].(map[string]any)["id"].(string)
					e.mustDo(call{method: "GET", path: "/v1/flavors/" + url.PathEscape(last)}, http.StatusOK)
					e.mustDo(call{method: "DELETE", path: "/v1/flavors/" + url.PathEscape(last)}, http.StatusNoContent)
				}
			}
		}
	})
}
