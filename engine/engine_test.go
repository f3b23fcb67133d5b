package engine_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/engine"
	"climate/manager"
	"climate/sqlite"
)

var t0 = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

type harness struct {
	t       *testing.T
	store   *sqlite.Store
	clock   *clock.Fake
	mgr     *manager.Manager
	eng     *engine.Engine
	reports chan engine.Report
	admin   climate.Identity
	cancel  context.CancelFunc
	done    chan struct{}
	actions engine.Actions
}

func newHarness(t *testing.T, actions engine.Actions) *harness {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/climate.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := &harness{t: t, store: st, clock: clock.NewFake(t0), reports: make(chan engine.Report, 100),
		admin: climate.Identity{UserID: "u", ProjectID: "p", Roles: []string{"admin"}}, actions: actions}
	h.mgr = manager.New(st, h.clock, manager.Config{BeforeEnd: 30 * time.Minute, EventsChanged: func() {
		if h.eng != nil {
			h.eng.Wake()
		}
	}})
	return h
}

// start runs the engine until the test ends.
func (h *harness) start() {
	h.eng = engine.New(h.store, h.clock, engine.Config{Actions: h.actions, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observe: func(r engine.Report) { h.reports <- r }})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	go func() { defer close(h.done); _ = h.eng.Run(ctx) }()
	h.t.Cleanup(func() { cancel(); <-h.done })
}

func (h *harness) host(name string) string {
	host, err := h.mgr.CreateHost(context.Background(), h.admin, map[string]string{"name": name})
	if err != nil {
		h.t.Fatal(err)
	}
	return host.ID
}

func (h *harness) lease(name string, start, end time.Time) *climate.Lease {
	h.t.Helper()
	one := 1
	l, err := h.mgr.CreateLease(context.Background(), h.admin, climate.LeaseRequest{
		Name: name, Start: climate.Date{Time: start}, End: climate.Date{Time: end},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one}},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

func (h *harness) get(id string) *climate.Lease {
	l, err := h.mgr.GetLease(context.Background(), h.admin, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

// next waits for the engine's next report.
func (h *harness) next() engine.Report {
	h.t.Helper()
	select {
	case r := <-h.reports:
		return r
	case <-time.After(10 * time.Second): // a safety net against a hung engine, not a wait
		h.t.Fatal("no event was handled")
		return engine.Report{}
	}
}

// advanceTo moves the fake clock once the engine has armed its timer for the next event.
func (h *harness) advanceTo(armed <-chan struct{}, t time.Time) {
	select {
	case <-armed:
	case <-time.After(10 * time.Second):
		h.t.Fatal("engine never armed a timer")
	}
	h.clock.Set(t)
}

func TestLeaseLifecycleFiresEachEventAtItsTime(t *testing.T) {
	h := newHarness(t, nil)
	h.host("n1")
	h.start()
	armed := h.clock.TimerCreated()
	l := h.lease("life", t0.Add(time.Hour), t0.Add(3*time.Hour))
	if l.Status != climate.LeasePending {
		t.Fatalf("new lease is %s", l.Status)
	}
	steps := []struct {
		at     time.Time
		event  climate.EventType
		status climate.LeaseStatus
		res    climate.ReservationStatus
	}{
		{t0.Add(time.Hour), climate.EventStartLease, climate.LeaseActive, climate.ReservationActive},
		{t0.Add(150 * time.Minute), climate.EventBeforeEndLease, climate.LeaseActive, climate.ReservationActive},
		{t0.Add(3 * time.Hour), climate.EventEndLease, climate.LeaseTerminated, climate.ReservationDeleted},
	}
	for _, s := range steps {
		// One minute early nothing fires: the engine's timer is for the event's own time.
		h.advanceTo(armed, s.at.Add(-time.Minute))
		armed = h.clock.TimerCreated()
		select {
		case r := <-h.reports:
			t.Fatalf("%s fired early at %s", r.Event.Type, h.clock.Now())
		default:
		}
		h.clock.Set(s.at)
		r := h.next()
		if r.Event.Type != s.event || r.Err != nil || r.Handled.Sub(s.at) != 0 {
			t.Fatalf("report %+v, want %s at %s", r, s.event, s.at)
		}
		got := h.get(l.ID)
		if got.Status != s.status || got.Reservations[0].Status != s.res || got.Event(s.event).Status != climate.EventDone {
			t.Fatalf("after %s: lease %s, reservation %s, event %s", s.event, got.Status, got.Reservations[0].Status, got.Event(s.event).Status)
		}
	}
}

// Events that fell due while no engine ran fire as soon as one starts, in time order.
func TestMissedEventsFireInOrderAfterRestart(t *testing.T) {
	h := newHarness(t, nil)
	h.host("n1")
	a := h.lease("a", t0.Add(time.Hour), t0.Add(2*time.Hour))
	b := h.lease("b", t0.Add(2*time.Hour), t0.Add(4*time.Hour)) // same host, back to back
	h.clock.Set(t0.Add(5 * time.Hour))
	h.start()
	var order []string
	for i := 0; i < 6; i++ { // a: start, before_end, end; b: start, before_end, end
		r := h.next()
		if r.Err != nil || r.Status == climate.LeaseError {
			t.Fatalf("%s of %s: status %s, err %v", r.Event.Type, r.Event.LeaseID, r.Status, r.Err)
		}
		name := map[string]string{a.ID: "a", b.ID: "b"}[r.Event.LeaseID]
		order = append(order, name+":"+string(r.Event.Type))
	}
	want := []string{"a:start_lease", "a:before_end_lease", "a:end_lease", "b:start_lease", "b:before_end_lease", "b:end_lease"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
	for _, id := range []string{a.ID, b.ID} {
		if s := h.get(id).Status; s != climate.LeaseTerminated {
			t.Fatalf("lease %s is %s", id, s)
		}
	}
}

type failingStart struct{}

func (failingStart) OnStart(context.Context, *climate.Lease) error   { return errors.New("boom") }
func (failingStart) OnEnd(context.Context, *climate.Lease) error     { return nil }
func (failingStart) BeforeEnd(context.Context, *climate.Lease) error { return nil }

func TestFailedStartPutsLeaseInError(t *testing.T) {
	h := newHarness(t, failingStart{})
	h.host("n1")
	l := h.lease("doomed", t0.Add(time.Minute), t0.Add(time.Hour))
	h.clock.Set(t0.Add(time.Minute))
	h.start()
	r := h.next()
	if r.Err == nil || r.Status != climate.LeaseError {
		t.Fatalf("report %+v, want an error and ERROR status", r)
	}
	got := h.get(l.ID)
	if got.Status != climate.LeaseError || got.Reservations[0].Status != climate.ReservationError || got.Event(climate.EventStartLease).Status != climate.EventError {
		t.Fatalf("lease %s, reservation %s, start event %s", got.Status, got.Reservations[0].Status, got.Event(climate.EventStartLease).Status)
	}
}

// A claim left by a process that died is taken over once it expires, and the event runs
// exactly once.
func TestExpiredClaimIsTakenOver(t *testing.T) {
	h := newHarness(t, nil)
	h.host("n1")
	l := h.lease("orphan", t0.Add(time.Minute), t0.Add(time.Hour))
	h.clock.Set(t0.Add(time.Minute))
	err := h.store.Update(context.Background(), func(tx climate.Tx) error {
		evs, err := tx.ClaimDueEvents(context.Background(), h.clock.Now(), h.clock.Now().Add(time.Minute), 10)
		if len(evs) != 1 {
			t.Fatalf("claimed %d events", len(evs))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	armed := h.clock.TimerCreated()
	h.start()
	h.advanceTo(armed, t0.Add(2*time.Minute))
	r := h.next()
	if r.Event.Type != climate.EventStartLease || r.Err != nil {
		t.Fatalf("report %+v", r)
	}
	if s := h.get(l.ID).Status; s != climate.LeaseActive {
		t.Fatalf("lease is %s", s)
	}
}

// Deleting a lease before its start removes its events: nothing fires.
func TestDeletedLeaseFiresNothing(t *testing.T) {
	h := newHarness(t, nil)
	h.host("n1")
	l := h.lease("gone", t0.Add(time.Hour), t0.Add(2*time.Hour))
	keep := h.lease("kept", t0.Add(3*time.Hour), t0.Add(4*time.Hour))
	if err := h.mgr.DeleteLease(context.Background(), h.admin, l.ID); err != nil {
		t.Fatal(err)
	}
	h.clock.Set(t0.Add(3 * time.Hour))
	h.start()
	r := h.next()
	if r.Event.LeaseID != keep.ID {
		t.Fatalf("event of %s fired, want only %s's", r.Event.LeaseID, keep.ID)
	}
}
