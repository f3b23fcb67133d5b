// Package plan decides which resources a reservation gets. It is pure: it works on a
// snapshot it is handed, does no I/O and reads no clock, so the same snapshot and request
// always give the same answer, and the store can re-check the answer inside its commit.
package plan

import (
	"fmt"
	"sort"
	"time"

	"climate"
)

// Window is a half-open time interval [Start, End).
type Window struct{ Start, End time.Time }

// Snapshot is what the planner sees: the inventory and the busy windows that overlap the
// window being planned (other windows cannot matter).
type Snapshot struct {
	Hosts []climate.Host
	// Busy maps a resource id to the windows in which it is already allocated.
	Busy map[string][]Window
}

// NewSnapshot builds a snapshot from hosts and the allocations overlapping a window.
func NewSnapshot(hosts []climate.Host, allocs []climate.Allocation) *Snapshot {
	busy := make(map[string][]Window, len(allocs))
	for _, a := range allocs {
		busy[a.ResourceID] = append(busy[a.ResourceID], Window{a.Start, a.End})
	}
	return &Snapshot{Hosts: hosts, Busy: busy}
}

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
}

func (e Explanation) String() string {
	return fmt.Sprintf("%d requested, %d free in the window; of %d registered hosts %d do not match the properties, %d are not reservable, %d are taken by this lease and %d are booked in the window",
		e.Requested, e.Free, e.Registered, e.FilteredOut, e.Unreservable, e.Excluded, e.Busy)
}

// PlaceHosts chooses hosts for r. It returns up to r.Max hosts (at least r.Min), or an
// error with code conflict whose message keeps Blazar's "Not enough hosts available" text
// and explains the shortage.
//
// Policy: preferred hosts first, then the remaining free hosts in inventory order
// (registration order), so that results are deterministic.
func PlaceHosts(s *Snapshot, r HostRequest) ([]string, Explanation, error) {
	ex := Explanation{Requested: r.Min, Registered: len(s.Hosts)}
	free := make([]string, 0, r.Max)
	preferred := make(map[string]bool, len(r.Prefer))
	for _, id := range r.Prefer {
		preferred[id] = true
	}
	var freePreferred []string
	for i := range s.Hosts {
		h := &s.Hosts[i]
		switch {
		case !h.Reservable:
			ex.Unreservable++
		case r.Exclude[h.ID]:
			ex.Excluded++
		case r.Match != nil && !r.Match(h):
			ex.FilteredOut++
		case isBusy(s.Busy[h.ID], r.Window):
			ex.Busy++
		default:
			ex.Free++
			if preferred[h.ID] {
				freePreferred = append(freePreferred, h.ID)
			} else if len(free) < r.Max {
				free = append(free, h.ID)
			}
		}
	}
	if ex.Free < r.Min {
		return nil, ex, climate.Errorf(climate.CodeConflict, "Not enough hosts available: %s.", ex)
	}
	// Keep preferred hosts in the caller's order.
	order := make(map[string]int, len(r.Prefer))
	for i, id := range r.Prefer {
		order[id] = i
	}
	sort.Slice(freePreferred, func(i, j int) bool { return order[freePreferred[i]] < order[freePreferred[j]] })
	chosen := append(freePreferred, free...)
	if len(chosen) > r.Max {
		chosen = chosen[:r.Max]
	}
	return chosen, ex, nil
}

func isBusy(busy []Window, w Window) bool {
	for _, b := range busy {
		if climate.Overlaps(b.Start, b.End, w.Start, w.End) {
			return true
		}
	}
	return false
}
