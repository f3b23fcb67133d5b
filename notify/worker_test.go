package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/engine"
	"climate/manager"
	"climate/notify"
	"climate/sqlite"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// recorder is a destination that records what it receives and fails while failing > 0.
type recorder struct {
	name    string
	accepts func(*climate.Notification) bool
	mu      sync.Mutex
	got     []climate.Notification
	failing int
	tries   int
}

func (r *recorder) Name() string { return r.name }
func (r *recorder) Accepts(n *climate.Notification) bool {
	return r.accepts == nil || r.accepts(n)
}
func (r *recorder) Deliver(_ context.Context, n *climate.Notification) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tries++
	if r.failing > 0 {
		r.failing--
		return errors.New("receiver answered 500")
	}
	r.got = append(r.got, *n)
	return nil
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, n := range r.got {
		out = append(out, n.EventType)
	}
	return out
}

type fixture struct {
	st  climate.Store
	clk *clock.Fake
	mgr *manager.Manager
	eng *engine.Engine
	// handled receives each event the engine handled.
	handled chan engine.Report
}

func newFixture(t *testing.T) *fixture {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, clk: clock.NewFake(t0), handled: make(chan engine.Report, 16)}
	f.mgr = manager.New(st, f.clk, manager.Config{BeforeStart: 10 * time.Minute})
	f.eng = engine.New(st, f.clk, engine.Config{Logger: quiet, Observe: func(r engine.Report) { f.handled <- r }})
	admin := climate.Identity{UserID: "admin", ProjectID: "admin", Roles: []string{"admin"}}
	for i := range 2 {
		if _, err := f.mgr.CreateHost(ctx, admin, map[string]string{"name": fmt.Sprintf("h%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) lease(t *testing.T, project string, start time.Time, hosts int) *climate.Lease {
	t.Helper()
	who := climate.Identity{UserID: "u", ProjectID: project, Roles: []string{"member"}}
	l, err := f.mgr.CreateLease(context.Background(), who, climate.LeaseRequest{
		Name: "l", Start: climate.Date{Time: start}, End: climate.Date{Time: start.Add(time.Hour)},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &hosts, Max: &hosts}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (f *fixture) worker(dests ...notify.Destination) *notify.Worker {
	return notify.NewWorker(f.st, f.clk, notify.Config{Logger: quiet,
		Destinations: func(context.Context) ([]notify.Destination, error) { return dests, nil }})
}

// Lease changes and fired events reach a destination in commit order, with Blazar's
// payload; a refused change writes none; before_start_lease fires at the server's lead.
func TestChangesAndEventsAreDeliveredInOrder(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	l := f.lease(t, "physics", t0.Add(time.Hour), 2)
	who := climate.Identity{UserID: "u", ProjectID: "physics", Roles: []string{"member"}}
	three := 3
	if _, err := f.mgr.CreateLease(ctx, who, climate.LeaseRequest{Name: "too big", Start: climate.Date{Time: t0.Add(time.Hour)},
		End: climate.Date{Time: t0.Add(2 * time.Hour)}, Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &three, Max: &three}},
	}); climate.ErrorCode(err) != climate.CodeConflict {
		t.Fatalf("3 hosts of 2: %v, want a conflict (which must write no notification)", err)
	}
	name := "renamed"
	if _, err := f.mgr.UpdateLease(ctx, who, l.ID, climate.LeaseUpdate{Name: &name}); err != nil {
		t.Fatal(err)
	}
	if ev := l.Event(climate.EventBeforeStartLease); ev == nil || !ev.Time.Equal(t0.Add(50*time.Minute)) {
		t.Fatalf("before_start_lease: %+v, want 10 minutes before the start", ev)
	}
	// Run the events as they come due: heads-up, start, end (no before_end: BeforeEnd 0).
	ectx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.eng.Run(ectx) }()
	runEvents := func(at time.Time) {
		f.clk.Set(at)
		f.eng.Wake()
		if r := <-f.handled; !r.Event.Time.Equal(at) || r.Err != nil {
			t.Fatalf("handled %+v at %s", r, at)
		}
	}
	runEvents(t0.Add(50 * time.Minute))
	runEvents(t0.Add(time.Hour))
	runEvents(t0.Add(2 * time.Hour))
	cancel()
	<-done
	if err := f.mgr.DeleteLease(ctx, who, l.ID); err != nil {
		t.Fatal(err)
	}

	r := &recorder{name: "rec"}
	if _, err := f.worker(r).Round(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"lease.create", "lease.update", "lease.event.before_start_lease", "lease.event.start_lease", "lease.event.end_lease", "lease.delete"}
	if got := r.types(); !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	var p struct {
		LeaseID          string `json:"lease_id"`
		ID, Name, Status string
		Reservations     []any
	}
	start := r.got[3]
	if err := json.Unmarshal(start.Payload, &p); err != nil || p.LeaseID != l.ID || p.ID != l.ID || p.Status != "ACTIVE" || len(p.Reservations) != 1 {
		t.Errorf("start_lease payload %s (%v)", start.Payload, err)
	}
	ids := map[string]bool{}
	for i, n := range r.got {
		if ids[n.ID] || n.ProjectID != "physics" || n.LeaseID != l.ID || (i > 0 && n.Seq <= r.got[i-1].Seq) {
			t.Errorf("notification %d: %+v", i, n)
		}
		ids[n.ID] = true
	}
	// Caught up: another round delivers nothing again.
	if _, err := f.worker(r).Round(ctx); err != nil || len(r.got) != len(want) {
		t.Errorf("second round: %v, %d delivered", err, len(r.got))
	}
}

// A failed delivery is retried with exponential backoff and holds back the destination's
// later notifications (order), not other destinations; after GiveUpAfter it moves on.
func TestFailedDeliveryRetriesInOrderThenGivesUp(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.lease(t, "physics", t0.Add(time.Hour), 1)
	f.lease(t, "physics", t0.Add(time.Hour), 1)
	bad := &recorder{name: "bad", failing: 3}
	good := &recorder{name: "good"}
	w := f.worker(bad, good)
	var waits []time.Duration
	for range 3 {
		wait, err := w.Round(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, wait)
		if len(bad.got) != 0 {
			t.Fatalf("delivered while failing: %v", bad.types())
		}
		f.clk.Advance(wait)
	}
	if !slices.Equal(waits, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}) {
		t.Errorf("retry delays %v, want 1s 2s 4s", waits)
	}
	if len(good.got) != 2 {
		t.Errorf("a failing destination held back another: %v", good.types())
	}
	var cur climate.DeliveryCursor
	_ = f.st.View(ctx, func(tx climate.Tx) error { cur, _, _ = tx.DeliveryCursor(ctx, "bad"); return nil })
	if cur.Attempts != 3 || cur.LastError != "receiver answered 500" {
		t.Errorf("cursor after 3 failures: %+v", cur)
	}
	if _, err := w.Round(ctx); err != nil || len(bad.got) != 2 || bad.got[0].Seq >= bad.got[1].Seq {
		t.Fatalf("after recovery: %v, %+v", err, bad.got)
	}

	// A destination that keeps failing gives a notification up after a day, and goes on.
	f.lease(t, "physics", t0.Add(3*time.Hour), 1)
	dead := &recorder{name: "bad", failing: 1 << 30}
	var gaveUp []notify.Attempt
	w = notify.NewWorker(f.st, f.clk, notify.Config{Logger: quiet, Observe: func(a notify.Attempt) {
		if a.GaveUp {
			gaveUp = append(gaveUp, a)
		}
	}, Destinations: func(context.Context) ([]notify.Destination, error) { return []notify.Destination{dead}, nil }})
	f.clk.Advance(25 * time.Hour)
	if _, err := w.Round(ctx); err != nil || len(gaveUp) != 1 || gaveUp[0].Notification.EventType != climate.NotifyLeaseCreate {
		t.Fatalf("give up: %v, %+v", err, gaveUp)
	}
}

// A destination's filter skips what it does not accept without delivering it.
func TestFilterSkips(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.lease(t, "physics", t0.Add(time.Hour), 1)
	f.lease(t, "chemistry", t0.Add(time.Hour), 1)
	r := &recorder{name: "physics-only", accepts: func(n *climate.Notification) bool { return n.ProjectID == "physics" }}
	if _, err := f.worker(r).Round(ctx); err != nil {
		t.Fatal(err)
	}
	if len(r.got) != 1 || r.got[0].ProjectID != "physics" || r.tries != 1 {
		t.Errorf("got %+v after %d tries", r.got, r.tries)
	}
}

// blocking is a destination whose deliveries wait until released.
type blocking struct {
	recorder
	entered chan string
	release chan struct{}
}

func (b *blocking) Deliver(ctx context.Context, n *climate.Notification) error {
	b.entered <- n.ID
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.recorder.Deliver(ctx, n)
}

// Run serves each destination on its own: one stuck in a delivery (a webhook waiting out
// its timeout) does not hold back another, and a destination that disappears from the list
// (a deleted webhook) stops being served.
func TestRunServesDestinationsIndependently(t *testing.T) {
	f := newFixture(t)
	stuck := &blocking{recorder: recorder{name: "stuck"}, entered: make(chan string, 8), release: make(chan struct{})}
	fast := &recorder{name: "fast"}
	delivered := make(chan notify.Attempt, 8)
	var mu sync.Mutex
	dests := []notify.Destination{stuck, fast}
	w := notify.NewWorker(f.st, f.clk, notify.Config{Logger: quiet,
		Observe: func(a notify.Attempt) { delivered <- a },
		Destinations: func(context.Context) ([]notify.Destination, error) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(dests), nil
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	f.lease(t, "physics", t0.Add(time.Hour), 1)
	w.Wake()
	<-stuck.entered
	if a := <-delivered; a.Destination != "fast" || a.Err != nil {
		t.Fatalf("first attempt: %+v", a)
	}
	f.lease(t, "physics", t0.Add(3*time.Hour), 1)
	w.Wake()
	if a := <-delivered; a.Destination != "fast" || a.Notification.Seq <= 1 {
		t.Fatalf("second attempt: %+v", a)
	}
	if len(stuck.got) != 0 {
		t.Fatal("the stuck destination delivered")
	}
	close(stuck.release)
	for range 2 {
		if a := <-delivered; a.Destination != "stuck" || a.Err != nil {
			t.Fatalf("after release: %+v", a)
		}
	}

	// Removed from the list: no longer served.
	mu.Lock()
	dests = []notify.Destination{fast}
	mu.Unlock()
	w.Wake()
	f.lease(t, "physics", t0.Add(5*time.Hour), 1)
	w.Wake()
	if a := <-delivered; a.Destination != "fast" {
		t.Fatalf("after removal: %+v", a)
	}
	cancel()
	<-done
	done <- nil // for the deferred receive
	if len(stuck.got) != 2 {
		t.Errorf("the removed destination got %d notifications, want 2", len(stuck.got))
	}
}

// countingStore counts the write transactions: a worker's are its cursor saves.
type countingStore struct {
	climate.Store
	mu      sync.Mutex
	updates int
}

func (s *countingStore) Update(ctx context.Context, fn func(climate.Tx) error) error {
	s.mu.Lock()
	s.updates++
	s.mu.Unlock()
	return s.Store.Update(ctx, fn)
}

// replayable is a recorder that a repeated delivery does not harm, like the log.
type replayable struct{ recorder }

func (*replayable) Replayable() {}

// A replayable destination's cursor is saved once a round (the first time: see below),
// after all it delivered; any other destination's after each delivery, so a crash repeats
// at most the one in flight.
func TestReplayableDestinationsSaveTheirCursorOnceARound(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	for i := range 3 {
		f.lease(t, "physics", t0.Add(time.Duration(i+1)*24*time.Hour), 1)
	}
	for _, d := range []interface {
		notify.Destination
		types() []string
	}{&replayable{recorder{name: "log"}}, &recorder{name: "webhook"}} {
		st := &countingStore{Store: f.st}
		w := notify.NewWorker(st, f.clk, notify.Config{Logger: quiet,
			Destinations: func(context.Context) ([]notify.Destination, error) { return []notify.Destination{d}, nil }})
		for range 2 { // the second round finds the cursor past all three
			if _, err := w.Round(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want := 3
		if _, ok := d.(notify.Replayable); ok {
			want = 1
		}
		if got := d.types(); len(got) != 3 || st.updates != want {
			t.Errorf("%s: delivered %v with %d cursor saves; want 3 lease.create, %d saves", d.Name(), got, st.updates, want)
		}
	}
}

// After a save, a replayable destination's cursor is saved again only a second later
// (or once a batch is owed): rounds in between deliver on from where this worker got to,
// and say when the save falls due; the round then saves it without delivering again.
func TestReplayableDestinationsSaveTheirCursorAtMostOnceASecond(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	d := &replayable{recorder{name: "log"}}
	st := &countingStore{Store: f.st}
	w := notify.NewWorker(st, f.clk, notify.Config{Logger: quiet,
		Destinations: func(context.Context) ([]notify.Destination, error) { return []notify.Destination{d}, nil }})
	round := func(what string, delivered, saves int) time.Duration {
		t.Helper()
		wait, err := w.Round(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.types(); len(got) != delivered || st.updates != saves {
			t.Fatalf("%s: delivered %d with %d cursor saves; want %d and %d", what, len(got), st.updates, delivered, saves)
		}
		return wait
	}
	saved := func() int64 {
		t.Helper()
		var cur climate.DeliveryCursor
		err := f.st.View(ctx, func(tx climate.Tx) (err error) { cur, _, err = tx.DeliveryCursor(ctx, "log"); return err })
		if err != nil {
			t.Fatal(err)
		}
		return cur.Position
	}
	f.lease(t, "physics", t0.Add(24*time.Hour), 1)
	if wait := round("the first round", 1, 1); wait >= 0 {
		t.Errorf("the first round saved, yet waits %v for a retry", wait)
	}
	first := saved()
	f.lease(t, "physics", t0.Add(48*time.Hour), 1)
	f.lease(t, "physics", t0.Add(72*time.Hour), 1)
	wait := round("a round at the same instant", 3, 1)
	if wait != time.Second {
		t.Errorf("an unsaved cursor: the round waits %v; want 1s", wait)
	}
	if got := saved(); got != first {
		t.Errorf("saved position %d; want still %d", got, first)
	}
	round("another round at that instant", 3, 1) // nothing delivered twice
	f.clk.Advance(wait)
	if wait := round("a second later", 3, 2); wait >= 0 {
		t.Errorf("after the save, the round waits %v for a retry", wait)
	}
	if got := saved(); got <= first {
		t.Errorf("saved position %d; want past %d", got, first)
	}
}
