package workload

import (
	"cmp"
	"testing"
	"time"
)

// The sizes and first windows are the ones WORKLOAD.md states; matching them shows the
// streams and the greedy placement are bit-identical to the definition.
func TestBookSizesMatchDefinition(t *testing.T) {
	for _, tc := range []struct{ h, r, allocs int }{{100, 1000, 2500}, {1000, 10000, 25066}} {
		if got := Generate(tc.h, tc.r).Allocations(); got != tc.allocs {
			t.Errorf("H=%d R=%d: %d allocations, want %d", tc.h, tc.r, got, tc.allocs)
		}
	}
}

func TestFirstWindowsMatchDefinition(t *testing.T) {
	want := []string{
		"2030-01-09 09:00 → 2030-01-11 07:00",
		"2030-03-16 02:00 → 2030-03-18 12:00",
		"2030-01-31 07:00 → 2030-02-02 14:00",
	}
	for i, w := range Windows(3) {
		got := w.Start.Format("2006-01-02 15:04") + " → " + w.End.Format("2006-01-02 15:04")
		if got != want[i] {
			t.Errorf("window %d = %s, want %s", i, got, want[i])
		}
	}
}

func TestBookHasNoOverlapsAndValidHosts(t *testing.T) {
	b := Generate(100, 1000)
	type iv struct{ s, e time.Time }
	byHost := map[string][]iv{}
	for _, l := range b.Leases {
		for _, r := range l.Reservations {
			if len(r.Allocations) != r.Min {
				// Greedy placement may find fewer hosts than wanted only when the pool is full.
				if len(r.Allocations) > r.Min {
					t.Fatalf("lease %s: %d allocations for min=max=%d", l.ID, len(r.Allocations), r.Min)
				}
			}
			for _, a := range r.Allocations {
				for _, o := range byHost[a.ResourceID] {
					if o.s.Before(a.End) && a.Start.Before(o.e) {
						t.Fatalf("host %s double-booked", a.ResourceID)
					}
				}
				byHost[a.ResourceID] = append(byHost[a.ResourceID], iv{a.Start, a.End})
			}
		}
	}
	if len(b.Hosts) != 100 || b.Hosts[5].ID != "00000000-0000-0000-0000-000000000005" || b.Hosts[5].HypervisorHostname != "compute-00005" {
		t.Fatalf("unexpected hosts: %d, %+v", len(b.Hosts), b.Hosts[5])
	}
}

// AllocationsByHost lists every allocation of the book once, in a store's order: by host
// id, then start, then id.
func TestAllocationsByHostInStoreOrder(t *testing.T) {
	b := Generate(50, 500)
	got := b.AllocationsByHost()
	seen := map[string]bool{}
	for i, a := range got {
		if seen[a.ID] {
			t.Fatalf("allocation %s listed twice", a.ID)
		}
		seen[a.ID] = true
		if i == 0 {
			continue
		}
		p := got[i-1]
		if c := cmp.Or(cmp.Compare(p.ResourceID, a.ResourceID), p.Start.Compare(a.Start), cmp.Compare(p.ID, a.ID)); c >= 0 {
			t.Fatalf("allocation %d (%s on %s at %s) is listed after %s on %s at %s", i, a.ID, a.ResourceID, a.Start, p.ID, p.ResourceID, p.Start)
		}
	}
	if len(got) != b.Allocations() {
		t.Errorf("%d allocations listed; the book holds %d", len(got), b.Allocations())
	}
}
