// Package storetest is the conformance suite every climate.Store must pass. It tests only
// the climate.Store contract, through the interface, so the SQLite store and any later
// store (PostgreSQL) are held to the same behaviour.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"climate"
)

// Run runs the suite. Each subtest calls open for a fresh, empty store and closes it when
// done. Subtests run in parallel, so open must be safe for concurrent use.
func Run(t *testing.T, open func(t *testing.T) climate.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, climate.Store)
	}{
		{"LeaseRoundTrip", testLeaseRoundTrip},
		{"ListLeases", testListLeases},
		{"ListLeasesPages", testListLeasesPages},
		{"LeaseErrors", testLeaseErrors},
		{"UpdateLeaseSyncsChildren", testUpdateLeaseSyncsChildren},
		{"UpdateLeaseKeepsClaims", testUpdateLeaseKeepsClaims},
		{"DeleteLeaseCascades", testDeleteLeaseCascades},
		{"ListAllocations", testListAllocations},
		{"Hosts", testHosts},
		{"HostIDs", testHostIDs},
		{"HostConflicts", testHostConflicts},
		{"HostPower", testHostPower},
		{"ResourceProperties", testResourceProperties},
		{"InventoryRevision", testInventoryRevision},
		{"AllocationRevision", testAllocationRevision},
		{"AllocationLog", testAllocationLog},
		{"ClaimDueEvents", testClaimDueEvents},
		{"Outbox", testOutbox},
		{"DeleteDeliveryCursor", testDeleteDeliveryCursor},
		{"Webhooks", testWebhooks},
		{"WebhookDeliveries", testWebhookDeliveries},
		{"FloatingIPs", testFloatingIPs},
		{"FloatingIPInventoryRevision", testFloatingIPInventoryRevision},
		{"Flavors", testFlavors},
		{"LeaseTypes", testLeaseTypes},
		{"Preemptible", testPreemptible},
		{"PreemptibleAllocationLog", testPreemptibleAllocationLog},
		{"FlavorsNotInventory", testFlavorsNotInventory},
		{"Maintenances", testMaintenances},
		{"DegradedLeases", testDegradedLeases},
		{"Audit", testAudit},
		{"Usage", testUsage},
		{"Rollback", testRollback},
		{"CancelledContext", testCancelledContext},
		{"ViewRejectsWrites", testViewRejectsWrites},
		{"UpdateSerializesCheckThenInsert", testUpdateSerializes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// t0 carries nanoseconds and a non-UTC zone so round trips check that stores return UTC
// truncated to microseconds.
var t0 = time.Date(2031, 3, 4, 5, 6, 7, 891234567, time.FixedZone("UTC+1", 3600))

// now is a microsecond-exact instant for event tests, where claims are compared exactly.
var now = time.Date(2031, 6, 1, 12, 0, 0, 0, time.UTC)

var ctx = context.Background()

// update runs fn in a write transaction and fails the test on error.
func update(t *testing.T, s climate.Store, fn func(climate.Tx) error) {
	t.Helper()
	if err := s.Update(ctx, fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// view runs fn in a read transaction and fails the test on error.
func view(t *testing.T, s climate.Store, fn func(climate.Tx) error) {
	t.Helper()
	if err := s.View(ctx, fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

func insertLeases(t *testing.T, s climate.Store, ls ...*climate.Lease) {
	t.Helper()
	update(t, s, func(tx climate.Tx) error {
		for _, l := range ls {
			if err := tx.InsertLease(ctx, l); err != nil {
				return fmt.Errorf("InsertLease %s: %w", l.ID, err)
			}
		}
		return nil
	})
}

func getLease(t *testing.T, s climate.Store, id string) *climate.Lease {
	t.Helper()
	var l *climate.Lease
	view(t, s, func(tx climate.Tx) (err error) {
		l, err = tx.GetLease(ctx, id)
		return err
	})
	return l
}

func wantCode(t *testing.T, what string, err error, code climate.Code) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got no error, want %s", what, code)
	} else if got := climate.ErrorCode(err); got != code {
		t.Errorf("%s: got %v (code %s), want code %s", what, err, got, code)
	}
}

// newLease returns a PENDING lease over [start, end) with one physical:host reservation
// allocating hosts, and UNDONE start and end events.
func newLease(id, project string, start, end time.Time, hosts ...string) *climate.Lease {
	r := climate.Reservation{
		ID: id + "-r1", LeaseID: id, ResourceType: climate.ResourceTypeHost, Status: climate.ReservationPending,
		Min: 1, Max: len(hosts), HypervisorProperties: `[">=", "$vcpus", "2"]`, BeforeEnd: "default", CreatedAt: t0,
	}
	for _, h := range hosts {
		r.Allocations = append(r.Allocations, climate.Allocation{
			ID: id + "-a-" + h, ReservationID: r.ID, LeaseID: id, ResourceID: h, Start: start, End: end,
		})
	}
	return &climate.Lease{
		ID: id, Name: "name-" + id, UserID: "user-1", ProjectID: project, TrustID: "trust-" + id,
		Start: start, End: end, Status: climate.LeasePending, CreatedAt: t0,
		Reservations: []climate.Reservation{r},
		Events: []climate.Event{
			{ID: id + "-e1", LeaseID: id, Type: climate.EventStartLease, Time: start, Status: climate.EventUndone, CreatedAt: t0},
			{ID: id + "-e2", LeaseID: id, Type: climate.EventEndLease, Time: end, Status: climate.EventUndone, CreatedAt: t0},
		},
	}
}

// ts is how a store returns a time: UTC, truncated to microseconds.
func ts(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// canon returns what a store must return for l: times as ts gives them, children in the
// contract's order (reservations and events by creation then id, allocations by resource
// then start), and empty slices as nil so that they compare equal to unloaded ones.
func canon(l climate.Lease) climate.Lease {
	l.Start, l.End, l.CreatedAt, l.UpdatedAt = ts(l.Start), ts(l.End), ts(l.CreatedAt), ts(l.UpdatedAt)
	var rs []climate.Reservation
	for _, r := range l.Reservations {
		r.CreatedAt, r.UpdatedAt = ts(r.CreatedAt), ts(r.UpdatedAt)
		r.Allocations = canonAllocations(r.Allocations)
		if len(r.RequiredFloatingIPs) == 0 { // nil and empty both come back nil
			r.RequiredFloatingIPs = nil
		}
		rs = append(rs, r)
	}
	sort.SliceStable(rs, func(i, j int) bool { return before(rs[i].CreatedAt, rs[i].ID, rs[j].CreatedAt, rs[j].ID) })
	l.Reservations = rs
	var es []climate.Event
	for _, e := range l.Events {
		e.Time, e.CreatedAt, e.UpdatedAt = ts(e.Time), ts(e.CreatedAt), ts(e.UpdatedAt)
		es = append(es, e)
	}
	sort.SliceStable(es, func(i, j int) bool { return before(es[i].CreatedAt, es[i].ID, es[j].CreatedAt, es[j].ID) })
	l.Events = es
	return l
}

func canonAllocations(in []climate.Allocation) []climate.Allocation {
	var as []climate.Allocation
	for _, a := range in {
		a.Start, a.End = ts(a.Start), ts(a.End)
		as = append(as, a)
	}
	sort.SliceStable(as, func(i, j int) bool {
		if as[i].ResourceID != as[j].ResourceID {
			return as[i].ResourceID < as[j].ResourceID
		}
		return as[i].Start.Before(as[j].Start)
	})
	return as
}

func before(t1 time.Time, id1 string, t2 time.Time, id2 string) bool {
	if !t1.Equal(t2) {
		return t1.Before(t2)
	}
	return id1 < id2
}

// nilEmpty turns a store's empty child slices into nil, the only difference canon allows.
func nilEmpty(l climate.Lease) climate.Lease {
	if len(l.Reservations) == 0 {
		l.Reservations = nil
	} else {
		l.Reservations = append([]climate.Reservation(nil), l.Reservations...)
		for i := range l.Reservations {
			if len(l.Reservations[i].Allocations) == 0 {
				l.Reservations[i].Allocations = nil
			}
		}
	}
	if len(l.Events) == 0 {
		l.Events = nil
	}
	return l
}

// checkLease compares a lease the store returned with what was written.
func checkLease(t *testing.T, got *climate.Lease, written climate.Lease) {
	t.Helper()
	if got == nil {
		t.Fatalf("lease %s: got nil", written.ID)
	}
	want := canon(written)
	if g := nilEmpty(*got); !reflect.DeepEqual(g, want) {
		t.Errorf("lease %s:\n got %+v\nwant %+v", written.ID, g, want)
	}
}

// allocationIDs returns the ids of allocations, in order.
func allocationIDs(as []climate.Allocation) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

func eventIDs(es []climate.Event) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

func testRollback(t *testing.T, s climate.Store) {
	var rev int64
	view(t, s, func(tx climate.Tx) (err error) { rev, err = tx.InventoryRevision(ctx); return err })
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx climate.Tx) error {
		if err := tx.InsertLease(ctx, newLease("l1", "p1", t0, t0.Add(time.Hour), "h1")); err != nil {
			return err
		}
		if err := tx.InsertHost(ctx, &climate.Host{ID: "h1", HypervisorHostname: "h1", Extra: map[string]string{"gpu": "yes"}, CreatedAt: t0}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update: got %v, want the callback's error", err)
	}
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetLease(ctx, "l1")
		wantCode(t, "GetLease after rollback", err, climate.CodeNotFound)
		if hosts, err := tx.ListHosts(ctx); err != nil || len(hosts) != 0 {
			t.Errorf("ListHosts after rollback: %v, %v; want none", hosts, err)
		}
		if props, err := tx.ListResourceProperties(ctx, climate.ResourceTypeHost); err != nil || len(props) != 0 {
			t.Errorf("ListResourceProperties after rollback: %v, %v; want none", props, err)
		}
		if allocs, err := tx.ListAllocations(ctx, climate.AllocationFilter{}); err != nil || len(allocs) != 0 {
			t.Errorf("ListAllocations after rollback: %v, %v; want none", allocs, err)
		}
		if _, ok, err := tx.NextEventTime(ctx); err != nil || ok {
			t.Errorf("NextEventTime after rollback: ok %v, err %v; want no event", ok, err)
		}
		if got, err := tx.InventoryRevision(ctx); err != nil || got != rev {
			t.Errorf("InventoryRevision after rollback: %d, %v; want %d", got, err, rev)
		}
		return nil
	})
}

func testCancelledContext(t *testing.T, s climate.Store) {
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err := s.Update(cctx, func(tx climate.Tx) error {
		return tx.InsertLease(cctx, newLease("l1", "p1", t0, t0.Add(time.Hour), "h1"))
	})
	if err == nil {
		t.Fatal("Update with a cancelled context: got no error")
	}
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetLease(ctx, "l1")
		wantCode(t, "GetLease after cancelled Update", err, climate.CodeNotFound)
		return nil
	})
}

func testViewRejectsWrites(t *testing.T, s climate.Store) {
	insertLeases(t, s, newLease("l1", "p1", now.Add(-time.Hour), now.Add(time.Hour), "h1"))
	update(t, s, func(tx climate.Tx) error {
		return tx.InsertHost(ctx, &climate.Host{ID: "h1", HypervisorHostname: "h1", Extra: map[string]string{"gpu": "yes"}, CreatedAt: t0})
	})
	writes := map[string]func(climate.Tx) error{
		"InsertLease": func(tx climate.Tx) error { return tx.InsertLease(ctx, newLease("l2", "p1", t0, t0.Add(time.Hour))) },
		"UpdateLease": func(tx climate.Tx) error {
			l := newLease("l1", "p1", now.Add(-time.Hour), now.Add(time.Hour), "h1")
			l.Name = "changed"
			return tx.UpdateLease(ctx, l)
		},
		"DeleteLease": func(tx climate.Tx) error { return tx.DeleteLease(ctx, "l1") },
		"InsertHost": func(tx climate.Tx) error {
			return tx.InsertHost(ctx, &climate.Host{HypervisorHostname: "h2", CreatedAt: t0})
		},
		"UpdateHost": func(tx climate.Tx) error {
			return tx.UpdateHost(ctx, &climate.Host{ID: "h1", HypervisorHostname: "renamed", CreatedAt: t0})
		},
		"DeleteHost": func(tx climate.Tx) error { return tx.DeleteHost(ctx, "h1") },
		"UpdateResourceProperty": func(tx climate.Tx) error {
			return tx.UpdateResourceProperty(ctx, &climate.ResourceProperty{ResourceType: climate.ResourceTypeHost, Name: "gpu", Private: true})
		},
		"ClaimDueEvents": func(tx climate.Tx) error {
			_, err := tx.ClaimDueEvents(ctx, "run-1", now, now.Add(time.Minute), 10)
			return err
		},
		"RenewClaims": func(tx climate.Tx) error {
			_, err := tx.RenewClaims(ctx, "run-1", now.Add(time.Minute))
			return err
		},
		"ReleaseClaims": func(tx climate.Tx) error {
			_, err := tx.ReleaseClaims(ctx)
			return err
		},
	}
	for name, write := range writes {
		err := s.View(ctx, write)
		wantCode(t, name+" in View", err, climate.CodeInternal)
	}
	view(t, s, func(tx climate.Tx) error {
		l, err := tx.GetLease(ctx, "l1")
		if err != nil || l.Name != "name-l1" {
			t.Errorf("lease after View writes: %+v, %v; want it unchanged", l, err)
		}
		if _, err := tx.GetLease(ctx, "l2"); climate.ErrorCode(err) != climate.CodeNotFound {
			t.Errorf("GetLease l2 after View insert: %v; want not found", err)
		}
		hosts, err := tx.ListHosts(ctx)
		if err != nil || len(hosts) != 1 || hosts[0].HypervisorHostname != "h1" {
			t.Errorf("hosts after View writes: %+v, %v; want h1 unchanged", hosts, err)
		}
		props, err := tx.ListResourceProperties(ctx, climate.ResourceTypeHost)
		if err != nil || len(props) != 1 || props[0].Private {
			t.Errorf("properties after View writes: %+v, %v; want gpu, public", props, err)
		}
		return nil
	})
	// The start event is due and still claimable: the View claim wrote nothing.
	update(t, s, func(tx climate.Tx) error {
		evs, err := tx.ClaimDueEvents(ctx, "run-1", now, now.Add(time.Minute), 10)
		if got := eventIDs(evs); err != nil || !reflect.DeepEqual(got, []string{"l1-e1"}) {
			t.Errorf("ClaimDueEvents after View claim: %v, %v; want [l1-e1]", got, err)
		}
		return nil
	})
}

// testUpdateSerializes races writers that each check a host is free over a window and
// then book it; exactly one per host may succeed. Without sleeps a broken store cannot be
// forced to interleave, so several rounds raise the odds that it does.
func testUpdateSerializes(t *testing.T, s climate.Store) {
	const writers, rounds = 16, 8
	start, end := now, now.Add(24*time.Hour)
	for round := range rounds {
		host := fmt.Sprintf("X%d", round)
		var wg sync.WaitGroup
		ready := make(chan struct{})
		errs := make([]error, writers)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ready
				errs[i] = s.Update(ctx, func(tx climate.Tx) error {
					clash, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{host}, From: start, To: end})
					if err != nil {
						return err
					}
					if len(clash) > 0 {
						return climate.ErrConflictRetry
					}
					runtime.Gosched() // widen the window between check and insert
					return tx.InsertLease(ctx, newLease(fmt.Sprintf("l%d-%02d", round, i), "p1", start, end, host))
				})
			}()
		}
		close(ready)
		wg.Wait()
		ok := 0
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, climate.ErrConflictRetry):
				t.Errorf("round %d, writer %d: %v; want success or ErrConflictRetry", round, i, err)
			}
		}
		if ok != 1 {
			t.Errorf("round %d: %d writers booked %s; want exactly 1", round, ok, host)
		}
		view(t, s, func(tx climate.Tx) error {
			allocs, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{host}})
			if err != nil || len(allocs) != 1 {
				t.Errorf("allocations of %s: %v, %v; want exactly one", host, allocationIDs(allocs), err)
			}
			return nil
		})
	}
}
