package http_test

import (
	"net/http"
	"testing"
)

// Issue 18 (18): a path that exists under /v1 hints at /v1 (a client given the server's
// root as its endpoint); Blazar's routes Climate does not serve say so; others are a
// plain 404.
func TestUnknownRoutesSayWhatIsMeant(t *testing.T) {
	e := newEnv(t, nil)
	checkError(t, e.do(call{method: "GET", path: "/leases"}), http.StatusNotFound,
		"The resource /leases could not be found. The API is under /v1: did you mean /v1/leases? (Give the endpoint as …/v1.)")
	checkError(t, e.do(call{method: "GET", path: "/os-hosts/3"}), http.StatusNotFound, "did you mean /v1/os-hosts/3?")
	checkError(t, e.do(call{method: "GET", path: "/v1/networks"}), http.StatusNotFound,
		"Network reservations (Blazar's network plugin) are not supported by this server: /v1/networks is one of Blazar's routes that Climate does not serve yet.")
	checkError(t, e.do(call{method: "GET", path: "/v1/devices/d1"}), http.StatusNotFound, "Device reservations (Blazar's device plugin) are not supported")
	r := e.do(call{method: "GET", path: "/v1/nothing"})
	checkError(t, r, http.StatusNotFound, "The resource /v1/nothing could not be found.")
	if body := string(r.body); len(body) > 120 {
		t.Errorf("a plain 404 says more than it knows: %s", body)
	}
}
