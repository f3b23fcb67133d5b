package http_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"climate/clock"
	climatehttp "climate/http"
	"climate/manager"
	"climate/policy"
	"climate/sqlite"
)

// newPolicyEnv is newEnv with the rules of a policy file (its content).
func newPolicyEnv(t *testing.T, file string) *env {
	t.Helper()
	pol, _, err := policy.Read([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := clock.NewFake(t0)
	mgr := manager.New(store, clk, manager.Config{BeforeEnd: manager.DefaultBeforeEnd, Policy: pol})
	hooks := webhookService(store, clk, true)
	hooks.Policy = pol
	api := &climatehttp.Server{Leases: mgr, Hosts: mgr, Availability: mgr, Auth: climatehttp.NoAuth{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clk,
		Webhooks: hooks, FloatingIPs: mgr, Flavors: mgr}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, clk: clk, store: store}
}

// An operator's policy file changes who may do what, with Blazar's refusal.
func TestPolicyFile(t *testing.T) {
	e := newPolicyEnv(t, `
"blazar:leases:post": "rule:admin"
"blazar:oshosts:get": "rule:project_reader_or_admin"
# Members delete only the leases they created.
"blazar:leases:delete": "rule:admin or (rule:project_member_api and user_id:%(user_id)s)"
"climate:webhooks:get": "rule:admin"
`)
	host := e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-1"}`}, http.StatusCreated)["host"].(map[string]any)

	// Leases: only admins create them now.
	r := e.do(call{method: "POST", path: "/v1/leases", body: validLease, header: asAlice})
	checkError(t, r, http.StatusForbidden, "Policy doesn't allow blazar:leases:post to be performed.")
	carol := map[string]string{"X-User-Id": "carol", "X-Project-Id": "physics", "X-Roles": "admin"}
	l := e.mustDo(call{method: "POST", path: "/v1/leases", body: validLease, header: carol}, http.StatusCreated)["lease"].(map[string]any)
	path := "/v1/leases/" + l["id"].(string)

	// Alice, a member of physics, reads carol's lease but may not delete it: the rule is
	// checked on the lease's user.
	e.mustDo(call{method: "GET", path: path, header: asAlice}, http.StatusOK)
	r = e.do(call{method: "DELETE", path: path, header: asAlice})
	checkError(t, r, http.StatusForbidden, "Policy doesn't allow blazar:leases:delete to be performed.")
	// Bob, of chemistry, still does not see it at all.
	checkError(t, e.do(call{method: "DELETE", path: path, header: asBob}), http.StatusNotFound)

	// Hosts: readers and members list and show them; guests and inventory changes still not.
	for _, who := range []map[string]string{asReader, asAlice} {
		hosts := e.mustDo(call{method: "GET", path: "/v1/os-hosts", header: who}, http.StatusOK)["hosts"].([]any)
		if len(hosts) != 1 || hosts[0].(map[string]any)["id"] != host["id"] {
			t.Errorf("%s lists %v", who["X-User-Id"], hosts)
		}
		e.mustDo(call{method: "GET", path: "/v1/os-hosts/" + host["id"].(string), header: who}, http.StatusOK)
	}
	checkError(t, e.do(call{method: "GET", path: "/v1/os-hosts", header: asGuest}), http.StatusForbidden, "Policy doesn't allow blazar:oshosts:get to be performed.")
	checkError(t, e.do(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-2"}`, header: asReader}), http.StatusForbidden,
		"Policy doesn't allow blazar:oshosts:post to be performed.")

	// Webhooks, a Climate rule, are admin-only to read.
	checkError(t, e.do(call{method: "GET", path: "/v1/webhooks", header: asAlice}), http.StatusForbidden, "Policy doesn't allow climate:webhooks:get to be performed.")
	e.mustDo(call{method: "GET", path: "/v1/webhooks", header: carol}, http.StatusOK)

	// The admin deletes the lease.
	e.mustDo(call{method: "DELETE", path: path, header: carol}, http.StatusNoContent)
}

// Without a policy file (or with an empty one) the defaults hold.
func TestPolicyDefaults(t *testing.T) {
	e := newPolicyEnv(t, "")
	e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-1"}`}, http.StatusCreated)
	e.mustDo(call{method: "POST", path: "/v1/leases", body: validLease, header: asAlice}, http.StatusCreated)
	checkError(t, e.do(call{method: "GET", path: "/v1/os-hosts", header: asReader}), http.StatusForbidden, "Policy doesn't allow blazar:oshosts:get to be performed.")
	checkError(t, e.do(call{method: "POST", path: "/v1/leases", body: validLease, header: asReader}), http.StatusForbidden, "Policy doesn't allow blazar:leases:post to be performed.")
	e.mustDo(call{method: "GET", path: "/v1/leases", header: asReader}, http.StatusOK)
}
