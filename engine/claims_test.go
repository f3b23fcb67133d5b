package engine

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
	"climate/sqlite"
)

// claimsFixture is one lease due at t0+1m on an SQLite store and a fake clock.
type claimsFixture struct {
	store *sqlite.Store
	clock *clock.Fake
	lease *climate.Lease
}

func newClaimsFixture(t *testing.T) *claimsFixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/climate.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	t0 := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	admin := climate.Identity{UserID: "u", ProjectID: "p", Roles: []string{"admin"}}
	mgr := manager.New(st, clk, manager.Config{BeforeEnd: 30 * time.Minute})
	if _, err := mgr.CreateHost(ctx, admin, map[string]string{"name": "h1"}); err != nil {
		t.Fatal(err)
	}
	one := 1
	l, err := mgr.CreateLease(ctx, admin, climate.LeaseRequest{
		Name: "l", Start: climate.Date{Time: t0.Add(time.Minute)}, End: climate.Date{Time: t0.Add(2 * time.Hour)},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one}},
	})
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(l.Start)
	return &claimsFixture{store: st, clock: clk, lease: l}
}

// claim claims what is due for owner for ttl, as an engine run does.
func (f *claimsFixture) claim(t *testing.T, owner string, ttl time.Duration) []climate.Event {
	t.Helper()
	var evs []climate.Event
	err := f.store.Update(context.Background(), func(tx climate.Tx) (err error) {
		evs, err = tx.ClaimDueEvents(context.Background(), owner, f.clock.Now(), f.clock.Now().Add(ttl), 64)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A run whose claim lapsed (it stalled) and was taken over by another run must leave the
// event to its new holder even though the event is still IN_PROGRESS: if both handled it,
// the driver would start the lease twice and two outcomes would be written.
func TestTakenOverEventIsLeftToItsNewHolder(t *testing.T) {
	f := newClaimsFixture(t)
	ctx := context.Background()
	var staleActs, liveActs countingActions
	var staleReports, liveReports []Report
	stale := New(f.store, f.clock, Config{Actions: &staleActs, Logger: quiet(), Observe: func(r Report) { staleReports = append(staleReports, r) }})
	live := New(f.store, f.clock, Config{Actions: &liveActs, Logger: quiet(), Observe: func(r Report) { liveReports = append(liveReports, r) }})

	evs := f.claim(t, stale.instance, DefaultClaimTTL)
	if len(evs) != 1 || evs[0].ClaimedBy != stale.instance {
		t.Fatalf("stale run claimed %+v; want the start, in its name", evs)
	}
	f.clock.Advance(DefaultClaimTTL) // the stale run stalls past its claim
	if taken := f.claim(t, live.instance, DefaultClaimTTL); len(taken) != 1 || taken[0].ID != evs[0].ID {
		t.Fatalf("live run took over %+v; want %s", taken, evs[0].ID)
	}
	before, err := getLease(ctx, f.store, f.lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	stale.handle(ctx, evs[0]) // resumes while the live run holds the event
	after, err := getLease(ctx, f.store, f.lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) || staleActs != (countingActions{}) || len(staleReports) != 0 {
		t.Fatalf("the stale run acted on an event taken over: actions %+v, reports %v, lease before %+v after %+v",
			staleActs, staleReports, before, after)
	}
	live.handle(ctx, evs[0])
	if len(liveReports) != 1 || liveReports[0].Err != nil || liveReports[0].Status != climate.LeaseActive || liveActs.start != 1 {
		t.Fatalf("live run: reports %+v, actions %+v; want the lease started once", liveReports, liveActs)
	}
}

// blockingStart is a driver whose OnStart waits until released.
type blockingStart struct {
	entered, release chan struct{}
}

func (b blockingStart) OnStart(ctx context.Context, _ *climate.Lease) error {
	close(b.entered)
	<-b.release
	return nil
}
func (blockingStart) OnEnd(context.Context, *climate.Lease) error     { return nil }
func (blockingStart) BeforeEnd(context.Context, *climate.Lease) error { return nil }

// While an action outlasts the claim's TTL, the engine's heartbeat keeps renewing the
// claim, so no other run takes the event over from a live engine.
func TestClaimsAreRenewedWhileAnActionRuns(t *testing.T) {
	f := newClaimsFixture(t)
	acts := blockingStart{entered: make(chan struct{}), release: make(chan struct{})}
	reports := make(chan Report, 10)
	eng := New(f.store, f.clock, Config{Actions: acts, Logger: quiet(), Observe: func(r Report) { reports <- r }})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = eng.Run(ctx) }()
	var release sync.Once
	defer func() { release.Do(func() { close(acts.release) }); cancel(); wg.Wait() }()

	waitTimer := func(at time.Time) {
		t.Helper()
		select {
		case <-f.clock.TimerAt(at):
		case <-time.After(10 * time.Second): // a safety net against a hung engine, not a wait
			t.Fatalf("no timer was armed for %s", at)
		}
	}
	select {
	case <-acts.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the start action never ran")
	}
	// Twice the TTL passes in heartbeat periods; each renewal arms the next heartbeat.
	every := DefaultClaimTTL / 3
	for range 6 {
		next := f.clock.Now().Add(every)
		waitTimer(next)
		f.clock.Set(next)
	}
	waitTimer(f.clock.Now().Add(every)) // the last renewal is committed
	if taken := f.claim(t, "another run", DefaultClaimTTL); len(taken) != 0 {
		t.Fatalf("another run took over %+v from a live engine", taken)
	}
	l, err := getLease(context.Background(), f.store, f.lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e := l.Event(climate.EventStartLease); e.Status != climate.EventInProgress || e.ClaimedBy != eng.instance {
		t.Fatalf("start event %s claimed by %q; want IN_PROGRESS by the engine", e.Status, e.ClaimedBy)
	}
	release.Do(func() { close(acts.release) })
	select {
	case r := <-reports:
		if r.Event.Type != climate.EventStartLease || r.Err != nil || r.Status != climate.LeaseActive {
			t.Fatalf("report %+v; want the lease started", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the start was never reported")
	}
}

// A lease left STARTING by a run that died during its start action may have been partly
// started by the driver, so when it is taken over after its end has passed it is started
// and then ended through the driver rather than ended as never started.
func TestLeaseLeftStartingIsEndedThroughTheDriver(t *testing.T) {
	f := newClaimsFixture(t)
	ctx := context.Background()
	stuck := blockingStart{entered: make(chan struct{}), release: make(chan struct{})}
	dead := New(f.store, f.clock, Config{Actions: stuck, Logger: quiet()})
	evs := f.claim(t, dead.instance, DefaultClaimTTL)
	deadDone := make(chan struct{})
	go func() { defer close(deadDone); dead.handle(ctx, evs[0]) }() // writes STARTING, then hangs in OnStart
	<-stuck.entered
	defer func() { close(stuck.release); <-deadDone }()

	f.clock.Set(f.lease.End.Add(time.Minute))
	var acts countingActions
	var reports []Report
	live := New(f.store, f.clock, Config{Actions: &acts, Logger: quiet(), Observe: func(r Report) { reports = append(reports, r) }})
	if _, err := live.runDue(ctx); err != nil {
		t.Fatal(err)
	}
	var got []climate.LeaseStatus
	for _, r := range reports {
		if r.Err != nil {
			t.Errorf("%s: %v", r.Event.Type, r.Err)
		}
		got = append(got, r.Status)
	}
	if !reflect.DeepEqual(got, []climate.LeaseStatus{climate.LeaseActive, climate.LeaseActive, climate.LeaseTerminated}) || acts != (countingActions{1, 1, 1}) {
		t.Fatalf("statuses %v, actions %+v; want started, warned and ended through the driver", got, acts)
	}
}

// cancelledStart is a driver whose OnStart runs until the engine stops.
type cancelledStart struct{ entered chan struct{} }

func (c cancelledStart) OnStart(ctx context.Context, _ *climate.Lease) error {
	close(c.entered)
	<-ctx.Done()
	return ctx.Err()
}
func (cancelledStart) OnEnd(context.Context, *climate.Lease) error     { return nil }
func (cancelledStart) BeforeEnd(context.Context, *climate.Lease) error { return nil }

// An engine stopped while an action runs does not call the event failed: its outcome is
// not written, the event stays claimed (the claim lapses, and another run handles it)
// and nothing is reported or logged as a failure.
func TestStoppingEngineInterruptsAnEvent(t *testing.T) {
	f := newClaimsFixture(t)
	acts := cancelledStart{entered: make(chan struct{})}
	var logs bytes.Buffer
	var reports []Report
	eng := New(f.store, f.clock, Config{Actions: acts, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Observe: func(r Report) { reports = append(reports, r) }})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = eng.Run(ctx) }()
	select {
	case <-acts.entered:
	case <-time.After(10 * time.Second): // a safety net against a hung engine, not a wait
		cancel()
		t.Fatal("the start action never ran")
	}
	cancel()
	<-stopped
	if len(reports) != 0 || strings.Contains(logs.String(), "event failed") || !strings.Contains(logs.String(), "event interrupted") {
		t.Errorf("reports %+v, logs:\n%s\nwant no report, no failure and the interruption logged", reports, logs.String())
	}
	l, err := getLease(context.Background(), f.store, f.lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e := l.Event(climate.EventStartLease); e.Status != climate.EventInProgress || e.ClaimedBy != eng.instance {
		t.Fatalf("start event %s claimed by %q; want IN_PROGRESS by the stopped engine, for its claim to lapse", e.Status, e.ClaimedBy)
	}
}
