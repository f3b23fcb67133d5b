package manager_test

import (
	"context"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
)

// before_start_lease: at the server's lead unless the lease names its own time, not
// created when the start is nearer than the lead, and moved with the start on update.
func TestBeforeStartLease(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	m := manager.New(st, clock.NewFake(t0), manager.Config{BeforeStart: 10 * time.Minute})
	addHosts(t, m, 3, nil)
	headsUp := func(l *climate.Lease) *climate.Event { return l.Event(climate.EventBeforeStartLease) }

	far := create(t, m, alice, time.Hour, 2*time.Hour, hostReq(1, 1, ""))
	if e := headsUp(far); e == nil || !e.Time.Equal(t0.Add(50*time.Minute)) || e.Status != climate.EventUndone {
		t.Fatalf("lease starting in an hour: heads-up %+v, want at +50m", e)
	}
	near := create(t, m, alice, 5*time.Minute, 10*time.Minute, hostReq(1, 1, ""))
	if e := headsUp(near); e != nil {
		t.Errorf("lease starting in 5 minutes with a 10-minute lead: heads-up %+v, want none", e)
	}
	own, err := m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "own", Start: at(3 * time.Hour), End: at(4 * time.Hour),
		BeforeStart: ptr(t0.Add(2 * time.Hour)), Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	if err != nil {
		t.Fatal(err)
	}
	if e := headsUp(own); e == nil || !e.Time.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("given before_start_date: %+v, want at +2h", e)
	}

	// Deferring the lease by a day moves its heads-up with it, keeping the lead.
	moved, err := m.UpdateLease(ctx, alice, far.ID, climate.LeaseUpdate{Start: at(25 * time.Hour), End: at(26 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if e := headsUp(moved); e == nil || e.ID != headsUp(far).ID || !e.Time.Equal(t0.Add(24*time.Hour+50*time.Minute)) {
		t.Errorf("after deferring: heads-up %+v, want the same event at +24h50m", e)
	}
	// Bringing the start nearer than the heads-up's distance drops it.
	moved, err = m.UpdateLease(ctx, alice, far.ID, climate.LeaseUpdate{Start: at(5 * time.Minute), End: at(26 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if e := headsUp(moved); e != nil {
		t.Errorf("start moved to +5m: heads-up %+v, want none (it would be in the past)", e)
	}
	// A lease created without one gets one when given.
	moved, err = m.UpdateLease(ctx, alice, near.ID, climate.LeaseUpdate{BeforeStart: ptr(t0.Add(time.Minute))})
	if err != nil {
		t.Fatal(err)
	}
	if e := headsUp(moved); e == nil || !e.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("before_start_date set on update: %+v", e)
	}
}
