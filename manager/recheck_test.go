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

// TestAllocationsOnFollowsTheLog checks, when another process freed, booked and moved
// leases on a host after the index's holds were taken, that the holds brought up to a
// transaction by the log since the index's revision are the table's allocations (the
// commit's re-check on SQLite, which has no index by resource), and that the host's
// allocations read through the leases so found are the table's.
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
	checkHoldsAsOf := func(t *testing.T, held *heldAt, f climate.AllocationFilter) {
		t.Helper()
		// What the re-check reads: the holds brought up to the transaction by the log,
		// equal, as holds, to the table's rows.
		hold := func(a climate.Allocation) string {
			return fmt.Sprintf("%s %s %s-%s %d %v %v", a.LeaseID, a.ResourceID, a.Start.Format(time.RFC3339Nano), a.End.Format(time.RFC3339Nano), a.Slots, a.Size, a.Preemptible)
		}
		err := m.store.Update(ctx, func(tx climate.Tx) error {
			got, ok, err := held.asOf(ctx, tx)
			if err != nil || !ok {
				t.Fatalf("asOf: ok %v, %v", ok, err)
			}
			want, err := tx.ListAllocations(ctx, f)
			if err != nil {
				return err
			}
			var g, w []string
			for _, a := range got {
				g = append(g, hold(a))
			}
			for _, a := range want {
				w = append(w, hold(a))
			}
			slices.Sort(g)
			slices.Sort(w)
			if !slices.Equal(g, w) {
				t.Errorf("held as of the transaction:\n%v\nthe table's:\n%v", g, w)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
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
	checkHoldsAsOf(t, held, f)
	// A lease moved by another process: its allocations' rows change (a removal and an
	// addition in the log).
	shifted := climate.LeaseUpdate{Start: climate.Date{Time: m.now().Add(7 * time.Hour)}, End: climate.Date{Time: m.now().Add(8 * time.Hour)}}
	if _, err := other.UpdateLease(ctx, admin, added.ID, shifted); err != nil {
		t.Fatal(err)
	}
	checkHoldsAsOf(t, held, f)
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
