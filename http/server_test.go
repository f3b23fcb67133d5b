package http_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"climate"
	climatehttp "climate/http"
)

// TestAccepted covers request variants the API must accept: Blazar's ".json" suffix,
// the version header forms, content types and a client's request id.
func TestAccepted(t *testing.T) {
	e := newEnv(t, nil)
	vars := seed(e)
	for _, tc := range []struct {
		name string
		call
		status int
	}{
		{"leases .json", call{method: "GET", path: "/v1/leases.json"}, 200},
		{"lease .json", call{method: "GET", path: "/v1/leases/{{lease}}.json"}, 200},
		{"hosts .json", call{method: "GET", path: "/v1/os-hosts.json"}, 200},
		{"host .json", call{method: "GET", path: "/v1/os-hosts/1.json"}, 200},
		{"allocations .json", call{method: "GET", path: "/v1/os-hosts/allocations.json?lease_id={{lease}}"}, 200},
		{"host allocation .json", call{method: "GET", path: "/v1/os-hosts/1/allocation.json"}, 200},
		{"properties .json", call{method: "GET", path: "/v1/os-hosts/properties.json?detail=True"}, 200},
		{"versions .json", call{method: "GET", path: "/versions.json"}, 300},
		{"v1 versions", call{method: "GET", path: "/v1"}, 300},
		{"version 1.0", call{method: "GET", path: "/v1/leases", header: map[string]string{"OpenStack-API-Version": "reservation 1.0"}}, 200},
		{"version latest", call{method: "GET", path: "/v1/leases", header: map[string]string{"OpenStack-API-Version": "reservation latest"}}, 200},
		{"version of another service", call{method: "GET", path: "/v1/leases", header: map[string]string{"OpenStack-API-Version": "compute 2.90"}}, 200},
		{"version among others", call{method: "GET", path: "/v1/leases", header: map[string]string{"OpenStack-API-Version": "compute 2.90, reservation 1.0"}}, 200},
		{"client request id", call{method: "GET", path: "/v1/leases", header: map[string]string{"X-OpenStack-Request-ID": "req-6ee55c78-0000-4000-8000-000000000000"}}, 200},
		{"bad client request id", call{method: "GET", path: "/v1/leases", header: map[string]string{"X-OpenStack-Request-ID": "not-a-request-id"}}, 200},
		{"json with charset", call{method: "PUT", path: "/v1/leases/{{lease}}", body: `{"name": "a"}`, header: map[string]string{"Content-Type": "application/json; charset=utf-8"}}, 200},
		{"empty lease update", call{method: "PUT", path: "/v1/leases/{{lease}}", body: `{}`}, 200},
		{"int-like strings", call{method: "PUT", path: "/v1/leases/{{lease}}", body: `{"reservations": [{"id": "{{res}}", "min": "1", "max": " 1 "}]}`}, 200},
		{"detail false", call{method: "GET", path: "/v1/os-hosts/properties?detail=False&all=0"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.call
			c.path = expand(t, c.path, vars)
			c.body = expand(t, c.body, vars)
			r := e.do(c)
			if r.status != tc.status {
				t.Fatalf("%s %s: %s, want %d", c.method, c.path, r, tc.status)
			}
			checkHeaders(t, r)
			if in := c.header["X-OpenStack-Request-ID"]; in != "" && r.header.Get("X-OpenStack-Request-ID") == in {
				t.Errorf("the response reuses the client's request id as its own")
			}
		})
	}
}

// TestMethodNotAllowed checks that a 405 names the allowed methods (RFC 9110 requires it),
// HEAD being allowed wherever GET is.
func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/leases", "GET, HEAD, POST"},
		{"POST", "/v1/leases/x", "DELETE, GET, HEAD, PUT"},
		{"PATCH", "/v1/os-hosts", "GET, HEAD, POST"},
		{"GET", "/v1/os-hosts/properties/gpu", "PATCH"},
		{"DELETE", "/v1/os-hosts/1/allocation", "GET, HEAD"},
		{"POST", "/", "GET, HEAD"},
		{"PUT", "/v1", "GET, HEAD"},
	} {
		r := e.do(call{method: tc.method, path: tc.path})
		checkHeaders(t, r)
		checkError(t, r, http.StatusMethodNotAllowed, tc.method, tc.path)
		if got := r.header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow = %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
}

// TestHead checks that HEAD answers as GET would, without a body.
func TestHead(t *testing.T) {
	e := newEnv(t, nil)
	vars := seed(e)
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/", 300},
		{"/v1/leases", 200},
		{"/v1/leases/{{lease}}", 200},
		{"/v1/leases/nope", 404},
		{"/v1/os-hosts", 200},
		{"/v1/os-hosts/allocations", 200},
		{"/v1/os-hosts/1/allocation", 200},
		{"/v1/os-hosts/properties", 200},
	} {
		path := expand(t, tc.path, vars)
		r := e.do(call{method: "HEAD", path: path})
		checkHeaders(t, r)
		if r.status != tc.status || len(r.body) != 0 {
			t.Errorf("HEAD %s: %s, want %d without a body", path, r, tc.status)
		}
		if get := e.do(call{method: "GET", path: path}); get.status != r.status {
			t.Errorf("HEAD %s: %d, but GET gives %d", path, r.status, get.status)
		}
	}
}

// failing implements the services by failing: with an internal error, or by panicking
// (the nil embedded interfaces) for every method it does not define.
type failing struct {
	climate.LeaseService
	climate.HostService
}

func (failing) ListLeases(context.Context, climate.Identity, climate.LeaseQuery, func([]climate.Lease) error) (bool, error) {
	return false, errors.New("database is locked: /var/lib/secret.db")
}

// TestInternalErrors checks that internal errors and panics become a 500 in Blazar's
// error shape that reveals nothing of the cause.
func TestInternalErrors(t *testing.T) {
	api := &climatehttp.Server{Leases: failing{}, Hosts: failing{}, Auth: climatehttp.NoAuth{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	e := &env{t: t, url: srv.URL}
	for _, c := range []call{
		{method: "GET", path: "/v1/leases"},
		{method: "GET", path: "/v1/os-hosts"},
		{method: "POST", path: "/v1/leases", body: validLease},
	} {
		r := e.do(c)
		checkHeaders(t, r)
		checkErrorBody(t, r)
		if r.status != http.StatusInternalServerError || !strings.Contains(string(r.body), `"Internal Server Error"`) || strings.Contains(string(r.body), "secret") {
			t.Errorf("%s %s: %s, want a 500 saying only Internal Server Error", c.method, c.path, r)
		}
	}
}
