package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
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
	sole    bool
	cfg     manager.Config
	// claimed and takenOver add up what the engine's Claimed hook was told.
	claimed, takenOver atomic.Int64
}

func newHarness(t *testing.T, actions engine.Actions, opts ...func(*manager.Config)) *harness {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/climate.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := &harness{t: t, store: st, clock: clock.NewFake(t0), reports: make(chan engine.Report, 100),
		admin: climate.Identity{UserID: "u", ProjectID: "p", Roles: []string{"admin"}}, actions: actions}
	h.cfg = manager.Config{BeforeEnd: 30 * time.Minute, EventsChanged: func(due time.Time) {
		if h.eng != nil {
			h.eng.WakeFor(due)
		}
	}}
	for _, o := range opts {
		o(&h.cfg)
	}
	h.mgr = manager.New(st, h.clock, h.cfg)
	return h
}

// start runs the engine until the test ends.
func (h *harness) start() {
	h.eng = engine.New(h.store, h.clock, engine.Config{Actions: h.actions, Sole: h.sole, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		PreemptionNotice: h.cfg.PreemptionNotice,
		Claimed:          func(n, taken int) { h.claimed.Add(int64(n)); h.takenOver.Add(int64(taken)) },
		Observe:          func(r engine.Report) { h.reports <- r }})
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

// advanceTo moves the fake clock to t once the engine has armed its timer for armed (it
// sleeps until its next event).
func (h *harness) advanceTo(armed, t time.Time) {
	h.t.Helper()
	select {
	case <-h.clock.TimerAt(armed):
	case <-time.After(10 * time.Second):
		h.t.Fatalf("engine never armed a timer for %s", armed)
	}
	h.clock.Set(t)
}

func TestLeaseLifecycleFiresEachEventAtItsTime(t *testing.T) {
	h := newHarness(t, nil)
	h.host("n1")
	h.start()
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
		h.advanceTo(s.at, s.at.Add(-time.Minute))
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

// Events that fell due while no engine ran fire as soon as one starts, in time order; a
// lease whose whole window passed meanwhile goes straight to TERMINATED and its driver
// is not called, as there is nothing to start or end.
func TestMissedEventsAfterRestart(t *testing.T) {
	acts := &recorder{}
	h := newHarness(t, acts)
	h.host("n1")
	a := h.lease("a", t0.Add(time.Hour), t0.Add(2*time.Hour))
	b := h.lease("b", t0.Add(2*time.Hour), t0.Add(4*time.Hour)) // same host, back to back
	name := map[string]string{a.ID: "a", b.ID: "b"}
	h.clock.Set(t0.Add(3 * time.Hour)) // a's window is over, b's half way
	h.start()
	var order []string
	record := func(r engine.Report, want climate.LeaseStatus) {
		t.Helper()
		if r.Err != nil || r.Status != want {
			t.Fatalf("%s of %s: status %s, err %v; want %s", r.Event.Type, name[r.Event.LeaseID], r.Status, r.Err, want)
		}
		order = append(order, name[r.Event.LeaseID]+":"+string(r.Event.Type))
	}
	record(h.next(), climate.LeaseTerminated)
	record(h.next(), climate.LeaseActive)
	// b's before_end is next: a's other events were finished with its start, unreported.
	h.advanceTo(t0.Add(210*time.Minute), t0.Add(5*time.Hour))
	record(h.next(), climate.LeaseActive)
	record(h.next(), climate.LeaseTerminated)
	want := []string{"a:start_lease", "b:start_lease", "b:before_end_lease", "b:end_lease"}
	if !reflect.DeepEqual(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	got := h.get(a.ID)
	for _, e := range got.Events {
		if e.Status != climate.EventDone || !e.UpdatedAt.Equal(t0.Add(3*time.Hour)) {
			t.Errorf("a's %s: %s at %s; want DONE at the restart", e.Type, e.Status, e.UpdatedAt)
		}
	}
	if got.Status != climate.LeaseTerminated || got.Reservations[0].Status != climate.ReservationDeleted {
		t.Errorf("a: lease %s, reservation %s; want TERMINATED, deleted", got.Status, got.Reservations[0].Status)
	}
	if calls := acts.list(); !reflect.DeepEqual(calls, []string{"start b", "warn b", "end b"}) {
		t.Errorf("driver calls %v; want only b's", calls)
	}
}

// recorder records driver calls as "start|warn|end <lease name>" (warn: BeforeEnd).
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (a *recorder) add(what string, l *climate.Lease) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, what+" "+l.Name)
	return nil
}

func (a *recorder) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

func (a *recorder) OnStart(_ context.Context, l *climate.Lease) error   { return a.add("start", l) }
func (a *recorder) OnEnd(_ context.Context, l *climate.Lease) error     { return a.add("end", l) }
func (a *recorder) BeforeEnd(_ context.Context, l *climate.Lease) error { return a.add("warn", l) }

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
	// The outcome's notification, written with it, carries the action's message.
	var ns []climate.Notification
	if err := h.store.View(context.Background(), func(tx climate.Tx) (err error) {
		ns, err = tx.Notifications(context.Background(), 0, 10)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	last := ns[len(ns)-1]
	if last.EventType != "lease.event.start_lease" || last.LeaseID != l.ID || last.Error != r.Err.Error() || last.Error == "" {
		t.Errorf("last notification %+v, want lease.event.start_lease with the error %q", last, r.Err)
	}
}

// A claim left by a process that died is taken over once it expires, and the event runs
// exactly once.
func TestExpiredClaimIsTakenOver(t *testing.T) {
	h := newHarness(t, nil)
	h.host("n1")
	l := h.lease("orphan", t0.Add(time.Minute), t0.Add(time.Hour))
	h.clock.Set(t0.Add(time.Minute))
	expiry := h.clock.Now().Add(engine.DefaultClaimTTL)
	h.claim("dead run", expiry, 1)
	h.start()
	h.advanceTo(expiry, expiry)
	r := h.next()
	if r.Event.Type != climate.EventStartLease || r.Err != nil || !r.Handled.Equal(expiry) {
		t.Fatalf("report %+v; want the start handled at the claim's expiry", r)
	}
	if c, o := h.claimed.Load(), h.takenOver.Load(); c != 1 || o != 1 {
		t.Errorf("Claimed told of %d claims, %d taken over; want 1 and 1", c, o)
	}
	if s := h.get(l.ID).Status; s != climate.LeaseActive {
		t.Fatalf("lease is %s", s)
	}
}

// claim claims the due events for owner until until, as another engine run would, and
// checks that there are n.
func (h *harness) claim(owner string, until time.Time, n int) {
	h.t.Helper()
	err := h.store.Update(context.Background(), func(tx climate.Tx) error {
		evs, err := tx.ClaimDueEvents(context.Background(), owner, h.clock.Now(), until, 64)
		if err == nil && len(evs) != n {
			h.t.Errorf("claimed %d events, want %d", len(evs), n)
		}
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// A sole engine (the only one on its database) that starts knows the claims it finds are
// a dead run's: it takes them back at once instead of waiting for them to expire.
func TestSoleEngineTakesBackClaimsAtStart(t *testing.T) {
	h := newHarness(t, nil)
	h.host("n1")
	l := h.lease("orphan", t0.Add(time.Minute), t0.Add(time.Hour))
	h.clock.Set(t0.Add(time.Minute))
	h.claim("previous run", h.clock.Now().Add(time.Hour), 1)
	h.sole = true
	h.start()
	r := h.next()
	if r.Event.Type != climate.EventStartLease || r.Err != nil || !r.Handled.Equal(t0.Add(time.Minute)) {
		t.Fatalf("report %+v; want the start handled at once", r)
	}
	// Taken back at start, then claimed afresh: one takeover, not two.
	if c, o := h.claimed.Load(), h.takenOver.Load(); c != 1 || o != 1 {
		t.Errorf("Claimed told of %d claims, %d taken over; want 1 and 1", c, o)
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

// A preemptible lease gets its lease.preempted notice the preemption notice before a
// host is taken back, naming the host and the time left; the lease that takes it starts
// exactly on time, and the preemptible lease keeps running on its other host.
func TestPreemptedLeaseGetsNoticeAndTheReservingLeaseStartsOnTime(t *testing.T) {
	const notice = 10 * time.Minute
	h := newHarness(t, nil, func(c *manager.Config) { c.PreemptionNotice = notice })
	h.host("n1")
	h.host("n2")
	h.start()
	two := 2
	p, err := h.mgr.CreateLease(context.Background(), h.admin, climate.LeaseRequest{Name: "sweep", Preemptible: true,
		Start: climate.Date{Time: t0}, End: climate.Date{Time: t0.Add(10 * time.Hour)},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &two, Max: &two}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := h.next(); r.Event.Type != climate.EventStartLease || r.Event.LeaseID != p.ID {
		t.Fatalf("report %+v, want the preemptible lease's start", r)
	}
	takeBack := t0.Add(3 * time.Hour)
	r := h.lease("train", takeBack, t0.Add(5*time.Hour))
	host := r.Reservations[0].Allocations[0].ResourceID

	h.advanceTo(takeBack.Add(-notice), takeBack.Add(-notice))
	if rep := h.next(); rep.Event.Type != climate.EventPreemptLease || rep.Event.LeaseID != p.ID || rep.Err != nil || !rep.Handled.Equal(takeBack.Add(-notice)) {
		t.Fatalf("report %+v, want the preemptible lease's notice at %s", rep, takeBack.Add(-notice))
	}
	var preempted climate.Notification
	err = h.store.View(context.Background(), func(tx climate.Tx) error {
		ns, err := tx.Notifications(context.Background(), 0, 100)
		for _, n := range ns {
			if n.EventType == climate.NotifyLeasePreempted {
				preempted = n
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var payload struct {
		LeaseID    string `json:"lease_id"`
		Preemption struct {
			OnPreempt     string  `json:"on_preempt"`
			NoticeSeconds float64 `json:"notice_seconds"`
			Hosts         []struct {
				HostID          string  `json:"host_id"`
				TakenBackAt     string  `json:"taken_back_at"`
				TimeLeftSeconds float64 `json:"time_left_seconds"`
			} `json:"hosts"`
		} `json:"preemption"`
	}
	if err := json.Unmarshal(preempted.Payload, &payload); err != nil {
		t.Fatalf("lease.preempted payload %s: %v", preempted.Payload, err)
	}
	pr := payload.Preemption
	if payload.LeaseID != p.ID || pr.OnPreempt != "shrink" || pr.NoticeSeconds != 600 || len(pr.Hosts) != 1 ||
		pr.Hosts[0].HostID != host || pr.Hosts[0].TimeLeftSeconds != 600 || pr.Hosts[0].TakenBackAt != "2030-01-01T13:00:00.000000" {
		t.Errorf("lease.preempted payload %s; want host %s taken back at 13:00 with 600 s left", preempted.Payload, host)
	}

	h.advanceTo(takeBack, takeBack)
	if rep := h.next(); rep.Event.Type != climate.EventStartLease || rep.Event.LeaseID != r.ID || !rep.Handled.Equal(takeBack) || rep.Status != climate.LeaseActive {
		t.Fatalf("report %+v, want the reserving lease started at %s", rep, takeBack)
	}
	if got := h.get(p.ID); got.Status != climate.LeaseActive || !got.End.Equal(t0.Add(10*time.Hour)) {
		t.Errorf("preemptible lease %s until %s; want still ACTIVE on its other host until 10h", got.Status, got.End)
	}
}
