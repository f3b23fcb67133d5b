package storetest

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"climate"
)

func maintenanceIDs(ms []climate.Maintenance) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func listMaintenances(t *testing.T, s climate.Store, f climate.MaintenanceFilter) []string {
	t.Helper()
	var ms []climate.Maintenance
	view(t, s, func(tx climate.Tx) (err error) {
		ms, err = tx.ListMaintenances(ctx, f)
		return err
	})
	return maintenanceIDs(ms)
}

func inventoryRevision(t *testing.T, s climate.Store) int64 {
	t.Helper()
	var rev int64
	view(t, s, func(tx climate.Tx) (err error) { rev, err = tx.InventoryRevision(ctx); return err })
	return rev
}

// testMaintenances: maintenance windows round-trip every field (an open end comes back
// zero, times UTC to the microsecond), list by start then id, filtered by host and by
// "not over by" (open windows always match); a window of an unknown host is not found
// (and the transaction stays usable), a taken id is a conflict, unknown ids are not
// found; adding and deleting a window move the inventory revision, a refused one does
// not; a host's deletion takes its windows; a rolled-back insert leaves nothing; a read
// transaction refuses writes.
func testMaintenances(t *testing.T, s climate.Store) {
	h1, h2 := computeHost("m1", t0, nil), computeHost("m2", t0, nil)
	insertHost(t, s, h1)
	insertHost(t, s, h2)
	day := 24 * time.Hour
	open := climate.Maintenance{ID: "mt-open", HostID: h1.ID, Start: t0.Add(2 * day), Reason: "disk replaced, back «soon»", CreatedAt: t0}
	closed := climate.Maintenance{ID: "mt-closed", HostID: h1.ID, Start: t0, End: t0.Add(day), CreatedAt: t0.Add(time.Second)}
	other := climate.Maintenance{ID: "mt-other", HostID: h2.ID, Start: t0.Add(day), End: t0.Add(3 * day), Reason: "firmware", CreatedAt: t0}
	tie := climate.Maintenance{ID: "mt-a-tie", HostID: h2.ID, Start: t0.Add(day), End: t0.Add(2 * day), CreatedAt: t0}

	rev := inventoryRevision(t, s)
	for _, m := range []climate.Maintenance{open, closed, other, tie} {
		update(t, s, func(tx climate.Tx) error { w := m; return tx.InsertMaintenance(ctx, &w) })
		if r := inventoryRevision(t, s); r <= rev {
			t.Errorf("InsertMaintenance %s: inventory revision %d, want above %d", m.ID, r, rev)
		} else {
			rev = r
		}
	}
	for _, m := range []climate.Maintenance{open, closed, other} {
		var got *climate.Maintenance
		view(t, s, func(tx climate.Tx) (err error) { got, err = tx.GetMaintenance(ctx, m.ID); return err })
		want := m
		want.Start, want.End, want.CreatedAt = ts(m.Start), ts(m.End), ts(m.CreatedAt)
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("GetMaintenance %s:\n got %+v\nwant %+v", m.ID, *got, want)
		}
		for _, tm := range []time.Time{got.Start, got.End, got.CreatedAt} {
			if !tm.IsZero() && tm.Location() != time.UTC {
				t.Errorf("maintenance %s: time %v is not UTC", m.ID, tm)
			}
		}
	}
	if got := listMaintenances(t, s, climate.MaintenanceFilter{}); !slices.Equal(got, []string{"mt-closed", "mt-a-tie", "mt-other", "mt-open"}) {
		t.Errorf("ListMaintenances: %v, want by start then id", got)
	}
	if got := listMaintenances(t, s, climate.MaintenanceFilter{HostID: h1.ID}); !slices.Equal(got, []string{"mt-closed", "mt-open"}) {
		t.Errorf("ListMaintenances of %s: %v", h1.ID, got)
	}
	// Not over by t0+1d: mt-closed ends exactly then (half-open), the open one never does.
	if got := listMaintenances(t, s, climate.MaintenanceFilter{From: t0.Add(day)}); !slices.Equal(got, []string{"mt-a-tie", "mt-other", "mt-open"}) {
		t.Errorf("ListMaintenances from t0+1d: %v", got)
	}
	if got := listMaintenances(t, s, climate.MaintenanceFilter{HostID: h2.ID, From: t0.Add(100 * day)}); len(got) != 0 {
		t.Errorf("ListMaintenances of %s from t0+100d: %v, want none", h2.ID, got)
	}

	// Refusals leave the transaction usable and the revision where it was.
	rev = inventoryRevision(t, s)
	update(t, s, func(tx climate.Tx) error {
		wantCode(t, "InsertMaintenance of an unknown host", tx.InsertMaintenance(ctx, &climate.Maintenance{ID: "mt-x", HostID: "nope", Start: t0, CreatedAt: t0}), climate.CodeNotFound)
		dup := other
		wantCode(t, "InsertMaintenance with a taken id", tx.InsertMaintenance(ctx, &dup), climate.CodeConflict)
		wantCode(t, "DeleteMaintenance of an unknown id", tx.DeleteMaintenance(ctx, "nope"), climate.CodeNotFound)
		_, err := tx.GetMaintenance(ctx, "nope")
		wantCode(t, "GetMaintenance of an unknown id", err, climate.CodeNotFound)
		_, err = tx.ListMaintenances(ctx, climate.MaintenanceFilter{})
		return err
	})
	if r := inventoryRevision(t, s); r != rev {
		t.Errorf("refused writes moved the inventory revision from %d to %d", rev, r)
	}
	if got := listMaintenances(t, s, climate.MaintenanceFilter{HostID: "nope"}); len(got) != 0 {
		t.Errorf("a refused insert left %v", got)
	}

	update(t, s, func(tx climate.Tx) error { return tx.DeleteMaintenance(ctx, closed.ID) })
	if r := inventoryRevision(t, s); r <= rev {
		t.Errorf("DeleteMaintenance: inventory revision %d, want above %d", r, rev)
	}
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetMaintenance(ctx, closed.ID)
		wantCode(t, "GetMaintenance after delete", err, climate.CodeNotFound)
		return nil
	})

	// A rolled-back insert leaves nothing.
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx climate.Tx) error {
		if err := tx.InsertMaintenance(ctx, &climate.Maintenance{ID: "mt-rolled-back", HostID: h2.ID, Start: t0, CreatedAt: t0}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update: %v, want boom", err)
	}
	if got := listMaintenances(t, s, climate.MaintenanceFilter{HostID: h2.ID}); !slices.Equal(got, []string{"mt-a-tie", "mt-other"}) {
		t.Errorf("after a rollback: %v", got)
	}

	// A host's windows go with it.
	update(t, s, func(tx climate.Tx) error { return tx.DeleteHost(ctx, h2.ID) })
	if got := listMaintenances(t, s, climate.MaintenanceFilter{}); !slices.Equal(got, []string{"mt-open"}) {
		t.Errorf("after deleting host %s: %v, want its windows gone", h2.ID, got)
	}

	// Writes in a read transaction are refused.
	err = s.View(ctx, func(tx climate.Tx) error {
		return tx.InsertMaintenance(ctx, &climate.Maintenance{ID: "mt-ro", HostID: h1.ID, Start: t0, CreatedAt: t0})
	})
	if err == nil {
		t.Error("InsertMaintenance in a read transaction succeeded")
	}
	if err := s.View(ctx, func(tx climate.Tx) error { return tx.DeleteMaintenance(ctx, open.ID) }); err == nil {
		t.Error("DeleteMaintenance in a read transaction succeeded")
	}
}

// testDegradedLeases: DegradedLeases lists the degraded leases ending after the given
// time, and follows the flag as leases are updated.
func testDegradedLeases(t *testing.T, s climate.Store) {
	a := newLease("deg-a", "p", t0, t0.Add(time.Hour))
	b := newLease("deg-b", "p", t0, t0.Add(3*time.Hour))
	c := newLease("deg-c", "p", t0, t0.Add(3*time.Hour))
	a.Degraded, b.Degraded = true, true
	insertLeases(t, s, a, b, c)
	degraded := func(after time.Time) []string {
		var ids []string
		view(t, s, func(tx climate.Tx) (err error) { ids, err = tx.DegradedLeases(ctx, after); return err })
		return ids
	}
	if got := degraded(t0); !slices.Equal(got, []string{"deg-a", "deg-b"}) {
		t.Errorf("DegradedLeases(t0): %v", got)
	}
	if got := degraded(t0.Add(time.Hour)); !slices.Equal(got, []string{"deg-b"}) {
		t.Errorf("DegradedLeases(t0+1h): %v, want the lease ending then left out", got)
	}
	b.Degraded, c.Degraded = false, true
	update(t, s, func(tx climate.Tx) error {
		if err := tx.UpdateLease(ctx, b); err != nil {
			return err
		}
		return tx.UpdateLease(ctx, c)
	})
	if got := degraded(t0); !slices.Equal(got, []string{"deg-a", "deg-c"}) {
		t.Errorf("DegradedLeases after updates: %v", got)
	}
}
