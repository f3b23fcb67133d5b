package main

import (
	"testing"
	"time"

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
