package manager_test

import (
	"context"
	"testing"
	"time"

	"climate"
)

func typed(name string, typ climate.LeaseType, start, end time.Duration, priority int) climate.LeaseRequest {
	return climate.LeaseRequest{Name: name, Type: typ, Start: at(start), End: at(end), Priority: priority,
		Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}}
}

// Retry and best-effort leases that do not fit wait, holding nothing, until capacity
// frees; then the highest priority, then the first come, starts, keeping its length.
func TestWaitingLeases(t *testing.T) {
	ctx := context.Background()
	m, _, clk := setup(t)
	addHosts(t, m, 1, nil)

	fits, err := m.CreateLease(ctx, alice, typed("fits", climate.LeaseRetry, time.Hour, 3*time.Hour, 0))
	if err != nil || fits.Status != climate.LeasePending || fits.Type != climate.LeaseRetry || len(hostsOf(fits)) != 1 {
		t.Fatalf("a retry lease that fits: %v %+v", err, fits)
	}
	var waiting []*climate.Lease
	for _, w := range []struct {
		name     string
		typ      climate.LeaseType
		priority int
	}{{"first", climate.LeaseRetry, 0}, {"urgent", climate.LeaseBestEffort, 5}, {"second", climate.LeaseRetry, 0}} {
		clk.Advance(time.Millisecond) // first come, first served: by creation time
		l, err := m.CreateLease(ctx, bob, typed(w.name, w.typ, 2*time.Hour, 4*time.Hour, w.priority))
		if err != nil {
			t.Fatal(err)
		}
		if l.Status != w.typ.WaitingStatus() || len(hostsOf(l)) != 0 || len(l.Events) != 1 || l.Events[0].Type != climate.EventRetryDeadline ||
			!l.Events[0].Time.Equal(t0.Add(26*time.Hour)) {
			t.Fatalf("%s: status %s, hosts %v, events %+v", w.name, l.Status, hostsOf(l), l.Events)
		}
		waiting = append(waiting, l)
	}
	if n, err := m.RetryWaiting(ctx); err != nil || n != 0 {
		t.Fatalf("nothing freed: %d booked, %v", n, err)
	}
	// Deleting the lease holding the host lets the highest priority in, at its asked start.
	if err := m.DeleteLease(ctx, alice, fits.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := m.RetryWaiting(ctx); err != nil || n != 1 {
		t.Fatalf("after a delete: %d booked, %v", n, err)
	}
	urgent, _ := m.GetLease(ctx, bob, waiting[1].ID)
	if urgent.Status != climate.LeasePending || !urgent.Start.Equal(t0.Add(2*time.Hour)) || !urgent.End.Equal(t0.Add(4*time.Hour)) ||
		len(hostsOf(urgent)) != 1 || urgent.Event(climate.EventStartLease) == nil || urgent.Event(climate.EventRetryDeadline) != nil {
		t.Fatalf("the priority lease: %+v", urgent)
	}
	// Later, that lease is deleted: the first come of the others starts now, as long as asked.
	clk.Advance(5 * time.Hour)
	if err := m.DeleteLease(ctx, bob, urgent.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := m.RetryWaiting(ctx); err != nil || n != 1 {
		t.Fatalf("second round: %d booked, %v", n, err)
	}
	first, _ := m.GetLease(ctx, bob, waiting[0].ID)
	second, _ := m.GetLease(ctx, bob, waiting[2].ID)
	now := clk.Now().UTC().Truncate(time.Microsecond)
	if first.Status != climate.LeasePending || !first.Start.Equal(now) || first.End.Sub(first.Start) != 2*time.Hour || second.Status != climate.LeaseWaiting {
		t.Fatalf("first come: %s %v–%v; second %s", first.Status, first.Start, first.End, second.Status)
	}
}

// Bad lease types and their fields are 400s that write nothing.
func TestLeaseTypeBadInput(t *testing.T) {
	ctx := context.Background()
	m, _, _ := setup(t)
	addHosts(t, m, 1, nil)
	for _, c := range []struct {
		req  climate.LeaseRequest
		want string
	}{
		{typed("x", "sometimes", time.Hour, 2*time.Hour, 0), `Unknown lease_type "sometimes"`},
		{typed("x", climate.LeaseImmediate, time.Hour, 2*time.Hour, 0), "An immediate lease starts now"},
		{typed("x", climate.LeaseScheduled, time.Hour, 2*time.Hour, 3), "retry_until, max_retries and priority go with"},
		{typed("x", climate.LeaseRetry, time.Hour, 2*time.Hour, 5000), "priority 5000"},
		{func() climate.LeaseRequest {
			r := typed("x", climate.LeaseRetry, time.Hour, 2*time.Hour, 0)
			r.RetryUntil = t0
			return r
		}(), "retry_until must be later than the start date"},
		{func() climate.LeaseRequest {
			r := typed("x", climate.LeaseRetry, 0, 0, 0)
			r.Start, r.End, r.Duration = climate.Date{Earliest: true}, climate.Date{}, time.Hour
			return r
		}(), "not \"earliest\""},
	} {
		_, err := m.CreateLease(ctx, alice, c.req)
		wantCode(t, err, climate.CodeInvalid, c.want)
	}
	n := 0
	if _, err := m.ListLeases(ctx, admin, climate.LeaseQuery{}, func(page []climate.Lease) error { n += len(page); return nil }); err != nil || n != 0 {
		t.Fatalf("bad requests wrote %d leases (%v)", n, err)
	}
	// An immediate lease that does not fit is refused, as today's.
	if _, err := m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "now", Type: climate.LeaseImmediate, Start: climate.Date{Now: true}, End: at(time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(2, 2, "")}}); climate.ErrorCode(err) != climate.CodeConflict {
		t.Fatalf("an immediate lease beyond the inventory: %v", err)
	}
}
