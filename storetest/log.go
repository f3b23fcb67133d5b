package storetest

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"climate"
)

// allocKey identifies an allocation by every field, as a replica's index does: slots, slot
// size and the preemptible flag included, so a log that drops them does not replay to the
// stored allocations.
func allocKey(a climate.Allocation) string {
	return fmt.Sprintf("%s|%s|%s|%s|%d|%d|%d|%d/%d/%d|%v", a.ID, a.ReservationID, a.LeaseID, a.ResourceID, a.Start.UnixMicro(), a.End.UnixMicro(),
		a.Slots, a.Size.VCPUs, a.Size.MemoryMB, a.Size.DiskGB, a.Preemptible)
}

// allocSet is a multiset of allocations by allocKey.
type allocSet map[string]int

func newAllocSet(as []climate.Allocation) allocSet {
	s := allocSet{}
	for _, a := range as {
		s[allocKey(a)]++
	}
	return s
}

func (s allocSet) String() string {
	var keys []string
	for k, n := range s {
		for range n {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return fmt.Sprint(keys)
}

// logSnapshot is what a replica reads in one transaction: the revision, every allocation,
// and the changes after since.
type logSnapshot struct {
	rev     int64
	allocs  []climate.Allocation
	changes []climate.AllocationChange
	ok      bool
}

func readLog(t *testing.T, s climate.Store, since int64) logSnapshot {
	t.Helper()
	var snap logSnapshot
	view(t, s, func(tx climate.Tx) (err error) {
		if snap.rev, err = tx.AllocationRevision(ctx); err != nil {
			return err
		}
		if snap.allocs, err = tx.ListAllocations(ctx, climate.AllocationFilter{}); err != nil {
			return err
		}
		snap.changes, snap.ok, err = tx.(climate.AllocationLog).AllocationChanges(ctx, since)
		return err
	})
	return snap
}

// replay applies changes to from as a replica would, failing the test when the changes
// are out of order, outside (since, rev], or remove an allocation that is not there.
func replay(t *testing.T, from allocSet, since, rev int64, changes []climate.AllocationChange) allocSet {
	t.Helper()
	got := allocSet{}
	for k, n := range from {
		got[k] = n
	}
	last, lastAdded := since, false
	for i, c := range changes {
		switch {
		case c.Revision <= since || c.Revision > rev:
			t.Errorf("change %d: revision %d outside (%d, %d]", i, c.Revision, since, rev)
		case c.Revision < last:
			t.Errorf("change %d: revision %d after revision %d; want ascending", i, c.Revision, last)
		case c.Revision == last && lastAdded && c.Removed:
			t.Errorf("change %d: a removal after an addition at revision %d; want removals first", i, c.Revision)
		}
		last, lastAdded = c.Revision, !c.Removed
		k := allocKey(c.Allocation)
		if !c.Removed {
			got[k]++
			continue
		}
		if got[k] == 0 {
			t.Errorf("change %d (revision %d) removes %s, which is not there", i, c.Revision, k)
			continue
		}
		if got[k]--; got[k] == 0 {
			delete(got, k)
		}
	}
	return got
}

var errRolledBack = errors.New("rolled back")

// countChanges counts the changes (removals or additions) of allocation id with that
// many slots of size.
func countChanges(changes []climate.AllocationChange, removed bool, id string, slots int, size climate.Size) int {
	n := 0
	for _, c := range changes {
		if c.Removed == removed && c.Allocation.ID == id && c.Allocation.Slots == slots && c.Allocation.Size == size {
			n++
		}
	}
	return n
}

// testAllocationLog checks the climate.AllocationLog contract, for stores whose Tx
// implements it: from any earlier revision, replaying the changes onto the allocations as
// they were gives the allocations as they are. The log must reach back over the few
// changes made here (ok true from the empty store's revision).
func testAllocationLog(t *testing.T, s climate.Store) {
	logged := true
	view(t, s, func(tx climate.Tx) error { _, logged = tx.(climate.AllocationLog); return nil })
	if !logged {
		t.Skip("the store's Tx does not implement climate.AllocationLog")
	}
	start, end := now, now.Add(2*time.Hour)
	var history []logSnapshot // what a replica could have read after each step
	step := func(what string, changed bool, write func(climate.Tx) error) logSnapshot {
		t.Helper()
		prev := readLog(t, s, 0)
		if write != nil {
			if err := s.Update(ctx, write); err != nil && !errors.Is(err, errRolledBack) {
				t.Fatalf("%s: %v", what, err)
			}
		}
		cur := readLog(t, s, prev.rev)
		if !cur.ok {
			t.Fatalf("after %s: AllocationChanges(%d) not ok; the log must reach back over one write", what, prev.rev)
		}
		if changed != (len(cur.changes) > 0) {
			t.Errorf("after %s: %d changes since %d, want changes: %v", what, len(cur.changes), prev.rev, changed)
		}
		if changed && cur.rev <= prev.rev {
			t.Errorf("after %s: revision %d, want above %d", what, cur.rev, prev.rev)
		}
		if got, want := replay(t, newAllocSet(prev.allocs), prev.rev, cur.rev, cur.changes), newAllocSet(cur.allocs); got.String() != want.String() {
			t.Errorf("after %s: replaying the changes gives\n %v\nwant the stored allocations\n %v", what, got, want)
		}
		if now := readLog(t, s, cur.rev); !now.ok || len(now.changes) != 0 {
			t.Errorf("after %s: AllocationChanges(current revision %d) = %d changes, ok %v; want none, ok", what, cur.rev, len(now.changes), now.ok)
		}
		history = append(history, cur)
		return cur
	}

	step("nothing", false, nil)
	l1 := newLease("l1", "p1", start, end, "h1", "h2")
	l1.Reservations = append(l1.Reservations, climate.Reservation{
		ID: "l1-r2", LeaseID: "l1", ResourceType: climate.ResourceTypeHost, Status: climate.ReservationPending,
		Min: 1, Max: 1, BeforeEnd: "default", CreatedAt: t0,
		Allocations: []climate.Allocation{{ID: "l1-b", ReservationID: "l1-r2", LeaseID: "l1", ResourceID: "h5", Start: start, End: end}},
	})
	// An instance reservation with two slot allocations sharing h6.
	slot := climate.Size{VCPUs: 2, MemoryMB: 2048, DiskGB: 20}
	l1.Reservations = append(l1.Reservations, climate.Reservation{
		ID: "l1-r3", LeaseID: "l1", ResourceType: "virtual:instance", Status: climate.ReservationPending,
		Amount: 3, Size: slot, Affinity: boolPtr(false), ServerGroupID: "sg-1", CreatedAt: t0,
		Allocations: []climate.Allocation{
			{ID: "l1-s1", ReservationID: "l1-r3", LeaseID: "l1", ResourceID: "h6", Start: start, End: end, Slots: 2, Size: slot},
			{ID: "l1-s2", ReservationID: "l1-r3", LeaseID: "l1", ResourceID: "h6", Start: start, End: end, Slots: 1, Size: slot},
		},
	})
	got := step("InsertLease", true, func(tx climate.Tx) error {
		return tx.InsertLease(ctx, l1)
	})
	for _, c := range got.changes {
		if c.Removed {
			t.Errorf("InsertLease logged a removal: %+v", c)
		}
	}
	if n := countChanges(got.changes, false, "l1-s1", 2, slot); n != 1 {
		t.Errorf("InsertLease logged the addition of l1-s1 (2 slots of %+v) %d times, want once: %+v", slot, n, got.changes)
	}
	step("InsertLease of a second lease", true, func(tx climate.Tx) error {
		return tx.InsertLease(ctx, newLease("l2", "p1", end, end.Add(time.Hour), "h1", "h3"))
	})
	step("UpdateLease without allocation change", false, func(tx climate.Tx) error {
		l1.Name = "renamed"
		return tx.UpdateLease(ctx, l1)
	})

	// Move the window of h1's allocation, drop h2's, add h4's: h1's row changes, so its old
	// and new versions are both logged, the removal first.
	old := l1.Reservations[0].Allocations[0]
	got = step("UpdateLease moving, dropping and adding allocations", true, func(tx climate.Tx) error {
		l1.End = end.Add(-time.Hour)
		r := &l1.Reservations[0]
		r.Allocations = []climate.Allocation{r.Allocations[0],
			{ID: "l1-a-h4", ReservationID: r.ID, LeaseID: "l1", ResourceID: "h4", Start: start, End: l1.End}}
		r.Allocations[0].End = l1.End
		return tx.UpdateLease(ctx, l1)
	})
	moved := l1.Reservations[0].Allocations[0]
	removedAt, addedAt := -1, -1
	for i, c := range got.changes {
		if c.Removed && allocKey(c.Allocation) == allocKey(canonAllocations([]climate.Allocation{old})[0]) {
			removedAt = i
		}
		if !c.Removed && allocKey(c.Allocation) == allocKey(canonAllocations([]climate.Allocation{moved})[0]) {
			addedAt = i
		}
	}
	if removedAt < 0 || addedAt < 0 || removedAt > addedAt {
		t.Errorf("changed allocation %s: removal at %d, addition at %d of %+v; want both, the removal first", old.ID, removedAt, addedAt, got.changes)
	}

	// Change only a slot allocation's slots and size: the old and new versions are logged
	// with theirs.
	bigger := climate.Size{VCPUs: 4, MemoryMB: 4096, DiskGB: 40}
	got = step("UpdateLease changing an allocation's slots and size", true, func(tx climate.Tx) error {
		a := &l1.Reservations[2].Allocations[1]
		a.Slots, a.Size = 3, bigger
		return tx.UpdateLease(ctx, l1)
	})
	if countChanges(got.changes, true, "l1-s2", 1, slot) != 1 || countChanges(got.changes, false, "l1-s2", 3, bigger) != 1 || len(got.changes) != 2 {
		t.Errorf("l1-s2 from 1 slot of %+v to 3 of %+v: changes %+v; want exactly its removal and addition", slot, bigger, got.changes)
	}

	got = step("UpdateLease dropping a reservation (its allocations cascade)", true, func(tx climate.Tx) error {
		l1.Reservations = l1.Reservations[:1]
		return tx.UpdateLease(ctx, l1)
	})
	if countChanges(got.changes, true, "l1-s1", 2, slot) != 1 || countChanges(got.changes, true, "l1-s2", 3, bigger) != 1 {
		t.Errorf("cascaded removals of the slot allocations: changes %+v; want l1-s1 and l1-s2 with their slots", got.changes)
	}
	step("DeleteLease", true, func(tx climate.Tx) error { return tx.DeleteLease(ctx, "l2") })
	step("a rolled-back DeleteLease", false, func(tx climate.Tx) error {
		if err := tx.DeleteLease(ctx, "l1"); err != nil {
			return err
		}
		return errRolledBack
	})

	// A replica that slept through several writes catches up from any of them.
	last := history[len(history)-1]
	for _, h := range history {
		cur := readLog(t, s, h.rev)
		if !cur.ok {
			t.Errorf("AllocationChanges(%d): not ok", h.rev)
			continue
		}
		if got, want := replay(t, newAllocSet(h.allocs), h.rev, cur.rev, cur.changes), newAllocSet(last.allocs); got.String() != want.String() {
			t.Errorf("from revision %d: replaying the changes gives\n %v\nwant\n %v", h.rev, got, want)
		}
	}
}
