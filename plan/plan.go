// Package plan decides which resources a reservation gets. It is pure: it works on a
// snapshot it is handed, does no I/O and reads no clock, so the same snapshot and request
// always give the same answer, and the store can re-check the answer inside its commit.
package plan

import (
	"fmt"
	"time"

	"climate"
)

// Window is a half-open time interval [Start, End).
type Window struct{ Start, End time.Time }

// HostRequest asks for between Min and Max whole hosts over Window.
type HostRequest struct {
	Window   Window
	Min, Max int
	// Match is the property filter; nil matches every host.
	Match func(*climate.Host) bool
	// Prefer lists hosts to take first when they are feasible (a reservation's current
	// hosts on update, so a lease keeps its hosts where it can).
	Prefer []string
	// Exclude lists hosts that may not be chosen (taken by another reservation of the
	// same lease).
	Exclude map[string]bool
	// FilterKey identifies Match (the query's canonical form) so its result can be cached
	// per inventory; empty disables caching.
	FilterKey string
	// Lease, on update, is the lease being re-planned: its own allocations do not count.
	Lease string
	// ReclaimFrom, when set, lets a request that starts at or after it take hosts back
	// from preemptible leases, hosts that need no taking back first: the manager sets it
	// to now plus the preemption notice and the cleaning time.
	ReclaimFrom time.Time
	// Rotate starts the scan of candidates at this offset instead of the first registered
	// host. A retry after losing a race uses a random offset so that concurrent requests
	// (on other replicas) stop converging on the same hosts.
	Rotate int
}

// Explanation says why hosts were or were not found, with counts a user can act on.
type Explanation struct {
	Requested    int // the minimum asked for
	Registered   int // hosts in the inventory
	Unreservable int // hosts marked not reservable
	FilteredOut  int // hosts that do not match the properties
	Excluded     int // hosts already taken by the same lease
	Busy         int // matching hosts booked in the window
	Free         int // matching hosts free in the window
	// Cleaning is the index's cleaning time: a host booked within it of the window counts
	// as booked.
	Cleaning time.Duration
}

func (e Explanation) String() string {
	s := fmt.Sprintf("%d requested, %d free in the window; of %d registered hosts %d do not match the properties, %d are not reservable, %d are taken by this lease and %d are booked in the window",
		e.Requested, e.Free, e.Registered, e.FilteredOut, e.Unreservable, e.Excluded, e.Busy)
	if e.Cleaning > 0 {
		s += fmt.Sprintf(" or within the %s cleaning time kept free before and after each booking", e.Cleaning)
	}
	return s
}
