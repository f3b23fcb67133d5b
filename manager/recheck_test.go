package manager

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/sqlite"
)

// TestAllocationsOnFollowsTheLog checks that a host's allocations read through the leases
// the index held (SQLite has no index by resource) are what the table holds when another
// process booked and freed the host after the holds were taken: the log since the
// index's revision brings them in.
func TestAllocationsOnFollowsTheLog(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/climate.db"
	open := func() *Manager {
		st, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return New(st, clock.NewFake(time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)), Config{})
	}
	admin := climate.Identity{UserID: "root", ProjectID: "ops", Roles: []string{"admin"}}
	lease := func(m *Manager, start, end time.Duration) *climate.Lease {
		t.Helper()
		hosts := 2
		now := m.now()
		l, err := m.CreateLease(ctx, admin, climate.LeaseRequest{Name: "l", Start: climate.Date{Time: now.Add(start)}, End: climate.Date{Time: now.Add(end)},
			Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &hosts, Max: &hosts}}})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	m, other := open(), open() // two processes on one database
	var host string
	for i := range 2 {
		h, err := m.CreateHost(ctx, admin, map[string]string{"name": fmt.Sprint("host-", i)})
		if err != nil {
			t.Fatal(err)
		}
		host = h.ID
	}
	gone := lease(m, time.Hour, 2*time.Hour)
	kept := lease(m, 3*time.Hour, 4*time.Hour)
	f := climate.AllocationFilter{ResourceIDs: []string{host}, From: m.now()}
	held, err := m.holdsOn(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if held == nil || len(held.holds) != 2 {
		t.Fatalf("holds taken: %+v, want the two leases'", held)
	}
	if err := other.DeleteLease(ctx, admin, gone.ID); err != nil {
		t.Fatal(err)
	}
	added := lease(other, 5*time.Hour, 6*time.Hour)
	leases := func(allocs []climate.Allocation) []string {
		var out []string
		for _, a := range allocs {
			out = append(out, a.LeaseID+"/"+a.ID)
		}
		slices.Sort(out)
		return out
	}
	err = m.store.Update(ctx, func(tx climate.Tx) error {
		got, err := allocationsOn(ctx, tx, held, f)
		if err != nil {
			return err
		}
		want, err := tx.ListAllocations(ctx, f)
		if err != nil {
			return err
		}
		if g, w := leases(got), leases(want); !slices.Equal(g, w) || len(w) != 2 {
			t.Errorf("allocations on the host %v, want %v (of %s and %s)", g, w, kept.ID, added.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
