package storetest

import (
	"fmt"
	"testing"
	"time"

	"climate"
)

// preemptibleLease returns a preemptible lease (OnPreempt end, 1 of 3 retries spent) over
// [start, end) on h1 and h2 with a preempt_lease event. h1's allocation is preemptible;
// h2's is not, so a store that derives the flag from the lease instead of keeping the
// allocation's own is caught.
func preemptibleLease(start, end time.Time) *climate.Lease {
	l := newLease("pre", "p1", start, end, "h1", "h2")
	l.Preemptible, l.OnPreempt, l.MaxRetries, l.Retries = true, climate.PreemptEnd, 3, 1
	l.Reservations[0].Allocations[0].Preemptible = true
	l.Events = append(l.Events, climate.Event{ID: "pre-e3", LeaseID: "pre", Type: climate.EventPreemptLease,
		Time: start.Add(30 * time.Minute), Status: climate.EventUndone, CreatedAt: t0.Add(time.Second)})
	return l
}

// checkPreemptFields compares a lease's and its allocations' preemption fields with want's,
// for a readable failure before checkLease's whole-lease comparison.
func checkPreemptFields(t *testing.T, what string, got *climate.Lease, want *climate.Lease) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: lease %s: got nil", what, want.ID)
	}
	if got.Preemptible != want.Preemptible || got.OnPreempt != want.OnPreempt || got.MaxRetries != want.MaxRetries || got.Retries != want.Retries {
		t.Errorf("%s: lease %s: preemptible %v on_preempt %q max_retries %d retries %d; want %v %q %d %d", what, got.ID,
			got.Preemptible, got.OnPreempt, got.MaxRetries, got.Retries, want.Preemptible, want.OnPreempt, want.MaxRetries, want.Retries)
	}
	wantFlags, gotFlags := map[string]bool{}, map[string]bool{}
	for _, r := range want.Reservations {
		for _, a := range r.Allocations {
			wantFlags[a.ID] = a.Preemptible
		}
	}
	for _, r := range got.Reservations {
		for _, a := range r.Allocations {
			gotFlags[a.ID] = a.Preemptible
		}
	}
	if fmt.Sprint(gotFlags) != fmt.Sprint(wantFlags) {
		t.Errorf("%s: lease %s: allocations' preemptible flags %v, want %v", what, got.ID, gotFlags, wantFlags)
	}
	checkLease(t, got, *want)
}

// preemptFlags maps the allocations' ids to their preemptible flags.
func preemptFlags(as []climate.Allocation) string {
	m := map[string]bool{}
	for _, a := range as {
		m[a.ID] = a.Preemptible
	}
	return fmt.Sprint(m)
}

// testPreemptible: a preemptible lease's MaxRetries, Retries, Preemptible and OnPreempt
// and its allocations' Preemptible flags round-trip through InsertLease, GetLease,
// ListLeases and ListAllocations, and through UpdateLease; a Blazar lease keeps them
// zero.
func testPreemptible(t *testing.T, s climate.Store) {
	start, end := t0.Add(time.Hour), t0.Add(3*time.Hour)
	pre := preemptibleLease(start, end)
	plain := newLease("b", "p1", start, end, "h3")
	insertLeases(t, s, pre, plain)

	checkPreemptFields(t, "GetLease", getLease(t, s, "pre"), pre)
	checkPreemptFields(t, "GetLease", getLease(t, s, "b"), plain)
	if b := getLease(t, s, "b"); b.Preemptible || b.OnPreempt != "" || b.MaxRetries != 0 || b.Retries != 0 ||
		b.Reservations[0].Allocations[0].Preemptible {
		t.Errorf("a Blazar lease: preemptible %v on_preempt %q max_retries %d retries %d allocation preemptible %v; want zero values",
			b.Preemptible, b.OnPreempt, b.MaxRetries, b.Retries, b.Reservations[0].Allocations[0].Preemptible)
	}
	if e := getLease(t, s, "pre").Event(climate.EventPreemptLease); e == nil || !e.Time.Equal(ts(start.Add(30*time.Minute))) {
		t.Errorf("preempt_lease event: %+v; want it at %v", e, ts(start.Add(30*time.Minute)))
	}
	view(t, s, func(tx climate.Tx) error {
		leases, err := tx.ListLeases(ctx, climate.LeaseFilter{})
		if err != nil {
			return err
		}
		if len(leases) != 2 {
			t.Fatalf("ListLeases: %d leases, want 2", len(leases))
		}
		for i := range leases {
			want := plain
			if leases[i].ID == "pre" {
				want = pre
			}
			checkPreemptFields(t, "ListLeases", &leases[i], want)
		}
		leases, err = tx.ListLeases(ctx, climate.LeaseFilter{ProjectID: "p1", Statuses: []climate.LeaseStatus{climate.LeasePending}})
		if err != nil {
			return err
		}
		if len(leases) != 2 {
			t.Fatalf("ListLeases (filtered): %d leases, want 2", len(leases))
		}
		for i := range leases {
			want := plain
			if leases[i].ID == "pre" {
				want = pre
			}
			checkPreemptFields(t, "ListLeases (filtered)", &leases[i], want)
		}

		all, err := tx.ListAllocations(ctx, climate.AllocationFilter{})
		if err != nil {
			return err
		}
		if got, want := preemptFlags(all), "map[b-a-h3:false pre-a-h1:true pre-a-h2:false]"; got != want {
			t.Errorf("ListAllocations: preemptible flags %s, want %s", got, want)
		}
		h1, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{"h1"}, From: start, To: end})
		if err != nil {
			return err
		}
		want := canonAllocations(pre.Reservations[0].Allocations[:1])
		if len(h1) != 1 || h1[0] != want[0] {
			t.Errorf("ListAllocations on h1: %+v, want %+v", h1, want)
		}
		return nil
	})

	// Shorten h1's preemptible allocation (as a preemption does) and count a retry: only
	// that allocation changes; the lease's fields are written.
	update(t, s, func(tx climate.Tx) error {
		pre.Retries = 2
		pre.Reservations[0].Allocations[0].End = start.Add(30 * time.Minute)
		return tx.UpdateLease(ctx, pre)
	})
	checkPreemptFields(t, "after shortening h1", getLease(t, s, "pre"), pre)
	view(t, s, func(tx climate.Tx) error {
		as, err := tx.ListAllocations(ctx, climate.AllocationFilter{LeaseID: "pre"})
		if err != nil {
			return err
		}
		if len(as) != 2 || as[0].ID != "pre-a-h1" || !as[0].Preemptible || !as[0].End.Equal(ts(start.Add(30*time.Minute))) || as[1].Preemptible {
			t.Errorf("ListAllocations after shortening h1: %+v; want h1 preemptible to %v, h2 not", as, ts(start.Add(30*time.Minute)))
		}
		return nil
	})

	// Every one of the lease's new fields, and an allocation's flag alone, are updated.
	update(t, s, func(tx climate.Tx) error {
		pre.Preemptible, pre.OnPreempt, pre.MaxRetries, pre.Retries = false, "", 0, 0
		pre.Reservations[0].Allocations[1].Preemptible = true
		return tx.UpdateLease(ctx, pre)
	})
	checkPreemptFields(t, "after clearing the lease's fields and flagging h2", getLease(t, s, "pre"), pre)
	update(t, s, func(tx climate.Tx) error {
		pre.Preemptible, pre.OnPreempt, pre.MaxRetries = true, climate.PreemptShrink, 5
		return tx.UpdateLease(ctx, pre)
	})
	checkPreemptFields(t, "after setting shrink", getLease(t, s, "pre"), pre)
	checkPreemptFields(t, "the Blazar lease after the updates", getLease(t, s, "b"), plain)
}

// findChange returns the change of allocation id that is a removal or an addition, failing
// the test unless there is exactly one.
func findChange(t *testing.T, what string, changes []climate.AllocationChange, removed bool, id string) climate.AllocationChange {
	t.Helper()
	var found []climate.AllocationChange
	for _, c := range changes {
		if c.Removed == removed && c.Allocation.ID == id {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d changes of %s with removed %v, want 1: %+v", what, len(found), id, removed, changes)
	}
	return found[0]
}

// testPreemptibleAllocationLog: the allocation log carries the allocations' preemptible
// flags, on additions and on both halves of a change.
func testPreemptibleAllocationLog(t *testing.T, s climate.Store) {
	logged := true
	view(t, s, func(tx climate.Tx) error { _, logged = tx.(climate.AllocationLog); return nil })
	if !logged {
		t.Skip("the store's Tx does not implement climate.AllocationLog")
	}
	start, end := t0.Add(time.Hour), t0.Add(3*time.Hour)
	pre := preemptibleLease(start, end)

	since := readLog(t, s, 0).rev
	insertLeases(t, s, pre)
	got := readLog(t, s, since)
	if !got.ok || len(got.changes) != 2 {
		t.Fatalf("after InsertLease: %d changes, ok %v; want the 2 additions", len(got.changes), got.ok)
	}
	if c := findChange(t, "InsertLease", got.changes, false, "pre-a-h1"); !c.Allocation.Preemptible {
		t.Errorf("InsertLease: addition of pre-a-h1 %+v; want it preemptible", c.Allocation)
	}
	if c := findChange(t, "InsertLease", got.changes, false, "pre-a-h2"); c.Allocation.Preemptible {
		t.Errorf("InsertLease: addition of pre-a-h2 %+v; want it not preemptible", c.Allocation)
	}

	// Shortening h1's preemptible allocation logs its removal and its addition, both
	// preemptible, the removal first; the new Retries changes no
	// allocation.
	since = got.rev
	shortEnd := start.Add(30 * time.Minute)
	update(t, s, func(tx climate.Tx) error {
		pre.Retries = 2
		pre.Reservations[0].Allocations[0].End = shortEnd
		return tx.UpdateLease(ctx, pre)
	})
	got = readLog(t, s, since)
	if !got.ok || len(got.changes) != 2 {
		t.Fatalf("after shortening h1: %d changes, ok %v; want its removal and addition: %+v", len(got.changes), got.ok, got.changes)
	}
	removal := findChange(t, "shortening h1", got.changes, true, "pre-a-h1")
	addition := findChange(t, "shortening h1", got.changes, false, "pre-a-h1")
	if !removal.Allocation.Preemptible || !removal.Allocation.End.Equal(ts(end)) {
		t.Errorf("shortening h1: removal %+v; want preemptible, ending %v", removal.Allocation, ts(end))
	}
	if !addition.Allocation.Preemptible || !addition.Allocation.End.Equal(ts(shortEnd)) {
		t.Errorf("shortening h1: addition %+v; want preemptible, ending %v", addition.Allocation, ts(shortEnd))
	}
	if removal.Revision > addition.Revision || !got.changes[0].Removed {
		t.Errorf("shortening h1: changes %+v; want the removal then the addition", got.changes)
	}
	if want := canonAllocations(pre.Reservations[0].Allocations[:1])[0]; addition.Allocation != want {
		t.Errorf("shortening h1: addition %+v, want the stored allocation %+v", addition.Allocation, want)
	}

	// A change of the flag alone is a change: h2's allocation becomes preemptible.
	since = got.rev
	update(t, s, func(tx climate.Tx) error {
		pre.Reservations[0].Allocations[1].Preemptible = true
		return tx.UpdateLease(ctx, pre)
	})
	got = readLog(t, s, since)
	if !got.ok || len(got.changes) != 2 {
		t.Fatalf("after flagging h2: %d changes, ok %v; want its removal and addition: %+v", len(got.changes), got.ok, got.changes)
	}
	if c := findChange(t, "flagging h2", got.changes, true, "pre-a-h2"); c.Allocation.Preemptible {
		t.Errorf("flagging h2: removal %+v; want it not preemptible", c.Allocation)
	}
	if c := findChange(t, "flagging h2", got.changes, false, "pre-a-h2"); !c.Allocation.Preemptible {
		t.Errorf("flagging h2: addition %+v; want it preemptible", c.Allocation)
	}

	// DeleteLease logs the removals with the flags.
	since = got.rev
	update(t, s, func(tx climate.Tx) error { return tx.DeleteLease(ctx, "pre") })
	got = readLog(t, s, since)
	for _, id := range []string{"pre-a-h1", "pre-a-h2"} {
		if c := findChange(t, "DeleteLease", got.changes, true, id); !c.Allocation.Preemptible {
			t.Errorf("DeleteLease: removal %+v; want it preemptible", c.Allocation)
		}
	}
}
