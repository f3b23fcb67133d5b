package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"climate/enforce"
	"climate/manager"
)

// climate serve --max-lease-duration: a lease one hour too long is refused through the API
// and the CLI with the rule's message; one within it is created.
func TestServeEnforcesMaxLeaseDuration(t *testing.T) {
	c := newCLI(t, serveOptions{enforcement: manager.Enforcement{MaxLeaseDuration: 2 * time.Hour}})
	c.ok("host", "create", "n1")
	c.fails("must be less than or equal to the maximum lease duration of 7200 seconds (2h0m0s)",
		"lease", "create", "long", "--start-date", "2030-01-07 09:00", "--end-date", "+3h", "--reservation", "resource_type=physical:host,min=1,max=1")
	c.ok("lease", "create", "ok", "--start-date", "2030-01-07 09:00", "--end-date", "+2h", "--reservation", "resource_type=physical:host,min=1,max=1")
}

// climate serve --external-filter-url: the operator's service refuses a lease, and the
// CLI shows its message; the token is sent.
func TestServeAsksTheExternalFilter(t *testing.T) {
	tokens := make(chan string, 4)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokens <- r.Header.Get("X-Auth-Token")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"message": "no allocation left for this project"}`))
	}))
	defer svc.Close()
	c := newCLI(t, serveOptions{external: enforce.External{Base: svc.URL, Token: "s3cret", Timeout: 5 * time.Second}})
	c.ok("host", "create", "n1")
	c.fails("no allocation left for this project", "lease", "create", "x", "--end-date", "+1h", "--reservation", "resource_type=physical:host,min=1,max=1")
	if got := <-tokens; got != "s3cret" {
		t.Errorf("the filter got token %q", got)
	}
}

// With the external filter, climate serve tells it of each lease end (on-end), through
// the notification worker.
func TestServeTellsTheExternalFilterOfLeaseEnds(t *testing.T) {
	ends := make(chan string, 4)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/on-end" {
			var body struct {
				Lease struct {
					Name string `json:"name"`
				} `json:"lease"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			ends <- body.Lease.Name
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer svc.Close()
	c := newCLI(t, serveOptions{external: enforce.External{Base: svc.URL, Timeout: 5 * time.Second}})
	c.ok("host", "create", "n1")
	c.ok("lease", "create", "short", "--end-date", "+2s", "--reservation", "resource_type=physical:host,min=1,max=1")
	select {
	case name := <-ends:
		if name != "short" {
			t.Errorf("on-end for %q", name)
		}
	case <-time.After(30 * time.Second): // a safety net, not a wait: the end is signalled
		t.Fatal("the external filter never heard of the lease's end")
	}
}
