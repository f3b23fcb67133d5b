package power

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
	"climate/sqlite"
)

var (
	t0    = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	admin = climate.Identity{UserID: "u", ProjectID: "p", Roles: []string{"admin"}}
	quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// switches records the Switch calls as "on NAME" / "off NAME"; fail makes hosts' calls fail.
type switches struct {
	mu    sync.Mutex
	calls []string
	fail  map[string]bool
	// gate, when set, is waited on by each call (tests hold a switch under way).
	gate chan struct{}
	// began receives each call's name as it starts, when set.
	began chan string
}

func (s *switches) Switch(ctx context.Context, h *climate.Host, on bool) error {
	call := "off " + h.HypervisorHostname
	if on {
		call = "on " + h.HypervisorHostname
	}
	if s.began != nil {
		s.began <- call
	}
	if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
	if s.fail[h.HypervisorHostname] {
		return errors.New("BMC unreachable")
	}
	return nil
}

func (s *switches) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.calls
	s.calls = nil
	slices.Sort(out)
	return out
}

type world struct {
	t     *testing.T
	store *sqlite.Store
	clock *clock.Fake
	mgr   *manager.Manager
	pm    *Manager
	sw    *switches
	ids   map[string]string // host name → id
	names map[string]string // host id → name
}

func newWorld(t *testing.T, hosts ...string) *world {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w := &world{t: t, store: st, clock: clock.NewFake(t0), sw: &switches{fail: map[string]bool{}}, ids: map[string]string{}, names: map[string]string{}}
	w.mgr = manager.New(st, w.clock, manager.Config{EventsChanged: func(time.Time) {
		if w.pm != nil {
			w.pm.Wake()
		}
	}})
	for _, name := range hosts {
		h, err := w.mgr.CreateHost(context.Background(), admin, map[string]string{"name": name})
		if err != nil {
			t.Fatal(err)
		}
		w.ids[name], w.names[h.ID] = h.ID, name
	}
	w.pm = New(st, w.clock, Config{Lead: 10 * time.Minute, Idle: 30 * time.Minute, Switch: w.sw.Switch, Logger: quiet, RetryAfter: 5 * time.Minute})
	return w
}

// lease books hosts (by name) over [start, end) and returns its id.
func (w *world) lease(start, end time.Time, hosts ...string) string {
	w.t.Helper()
	n := len(hosts)
	q := fmt.Sprintf(`["in", "$hypervisor_hostname", [%s]]`, quoteList(hosts))
	l, err := w.mgr.CreateLease(context.Background(), admin, climate.LeaseRequest{
		Name: "l", Start: climate.Date{Time: start}, End: climate.Date{Time: end},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &n, Max: &n, HypervisorProperties: &q}},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return l.ID
}

func quoteList(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%q", n)
	}
	return out
}

// round plans at the clock's time, waits for its switches, and returns the switch calls
// made and when the next round is due.
func (w *world) round() ([]string, time.Time) {
	w.t.Helper()
	next, err := w.pm.round(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	w.pm.wg.Wait()
	return w.sw.take(), next
}

func (w *world) power(name string) climate.HostPower {
	w.t.Helper()
	h, err := w.mgr.GetHost(context.Background(), admin, w.ids[name])
	if err != nil {
		w.t.Fatal(err)
	}
	if h.Power == nil {
		return climate.HostPower{State: climate.PowerUnknown}
	}
	return *h.Power
}

func (w *world) setStatus(leaseID string, s climate.LeaseStatus) {
	w.t.Helper()
	err := w.store.Update(context.Background(), func(tx climate.Tx) error {
		l, err := tx.GetLease(context.Background(), leaseID)
		if err != nil {
			return err
		}
		l.Status = s
		return tx.UpdateLease(context.Background(), l)
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

func check(t *testing.T, what string, got []string, gotNext time.Time, want []string, wantNext time.Time) {
	t.Helper()
	if len(got) == 0 {
		got = nil
	}
	if !reflect.DeepEqual(got, want) || !gotNext.Equal(wantNext) {
		t.Fatalf("%s: switches %v, next %s; want %v, next %s", what, got, gotNext.Format("15:04"), want, wantNext.Format("15:04"))
	}
}

// Idle hosts go off, a lease's host comes on its lead before the lease starts, stays on
// while in use (also past its window until the lease has ended), and goes off after; the
// time each host spent off is counted.
func TestHostsOffWhenIdleOnBeforeLeases(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	l := w.lease(t0.Add(time.Hour), t0.Add(2*time.Hour), "n1")

	calls, next := w.round()
	check(t, "10:00", calls, next, []string{"off n1", "off n2"}, t0.Add(30*time.Minute)) // the horizon: idle
	if p := w.power("n2"); p.State != climate.PowerOff || !p.ChangedAt.Equal(t0) {
		t.Fatalf("n2: %+v, want off since 10:00", p)
	}
	w.clock.Set(t0.Add(30 * time.Minute))
	calls, next = w.round()
	check(t, "10:30", calls, next, nil, t0.Add(50*time.Minute)) // n1's lead
	w.clock.Set(t0.Add(50 * time.Minute))
	calls, next = w.round()
	check(t, "10:50", calls, next, []string{"on n1"}, t0.Add(80*time.Minute))
	if p := w.power("n1"); p.State != climate.PowerOn || p.OffFor(w.clock.Now()) != 50*time.Minute {
		t.Fatalf("n1: %+v, off for %s; want on, off 50m in all", p, p.OffFor(w.clock.Now()))
	}
	w.clock.Set(t0.Add(80 * time.Minute))
	calls, next = w.round()
	check(t, "11:20", calls, next, nil, t0.Add(110*time.Minute)) // in use; the horizon comes first
	w.clock.Set(t0.Add(110 * time.Minute))
	calls, next = w.round()
	check(t, "11:50", calls, next, nil, t0.Add(2*time.Hour)) // in use until the lease's end

	// Past its end, a lease the engine has not ended yet still holds the host.
	w.setStatus(l, climate.LeaseActive)
	w.clock.Set(t0.Add(2 * time.Hour))
	calls, next = w.round()
	check(t, "12:00, lease ACTIVE", calls, next, nil, t0.Add(150*time.Minute))
	w.setStatus(l, climate.LeaseTerminating)
	calls, _ = w.round()
	check(t, "12:00, lease TERMINATING", calls, time.Time{}, nil, time.Time{})
	w.setStatus(l, climate.LeaseTerminated)
	calls, _ = w.round()
	check(t, "12:00, lease ended", calls, time.Time{}, []string{"off n1"}, time.Time{})

	w.clock.Set(t0.Add(3 * time.Hour))
	now := w.clock.Now()
	if got := w.power("n2").OffFor(now); got != 3*time.Hour {
		t.Errorf("n2 off for %s, want 3h", got)
	}
	if got := w.power("n1").OffFor(now); got != 50*time.Minute+time.Hour {
		t.Errorf("n1 off for %s, want 1h50m (10:00-10:50, 12:00-13:00)", got)
	}
}

// A host whose switch failed is recorded unknown and left alone for RetryAfter.
func TestFailedSwitchIsRetriedLater(t *testing.T) {
	w := newWorld(t, "n1")
	w.sw.fail["n1"] = true
	calls, next := w.round()
	check(t, "first", calls, next, []string{"off n1"}, t0.Add(30*time.Minute))
	if p := w.power("n1"); p.State != climate.PowerUnknown {
		t.Fatalf("after a failed power off: %+v, want unknown", p)
	}
	calls, next = w.round() // the failed switch woke the manager
	check(t, "after the failure", calls, next, nil, t0.Add(5*time.Minute))
	w.clock.Set(t0.Add(time.Minute))
	calls, next = w.round()
	check(t, "within RetryAfter", calls, next, nil, t0.Add(5*time.Minute))
	w.sw.fail["n1"] = false
	w.clock.Set(t0.Add(5 * time.Minute))
	calls, _ = w.round()
	check(t, "retry", calls, time.Time{}, []string{"off n1"}, time.Time{})
	if p := w.power("n1"); p.State != climate.PowerOff {
		t.Fatalf("after the retry: %+v, want off", p)
	}
}

// EnsureOn powers on a host that is off before a lease starts on it, and does nothing to
// one that is on; when a power-off is under way it waits for it, then powers on.
func TestEnsureOn(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	ctx := context.Background()
	if _, next := w.round(); !next.Equal(t0.Add(30 * time.Minute)) {
		t.Fatalf("next %v", next)
	}
	lease := &climate.Lease{ID: "l"}
	host := func(name string) *climate.Host {
		h, err := w.mgr.GetHost(ctx, admin, w.ids[name])
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	w.clock.Set(t0.Add(time.Hour))
	if err := w.pm.EnsureOn(ctx, lease, host("n1")); err != nil {
		t.Fatal(err)
	}
	if calls := w.sw.take(); !reflect.DeepEqual(calls, []string{"on n1"}) {
		t.Fatalf("calls %v, want on n1", calls)
	}
	if p := w.power("n1"); p.State != climate.PowerOn || p.OffFor(t0.Add(2*time.Hour)) != time.Hour {
		t.Fatalf("n1: %+v; want on, off 1h", p)
	}
	if err := w.pm.EnsureOn(ctx, lease, host("n1")); err != nil || len(w.sw.take()) != 0 {
		t.Fatalf("EnsureOn of a host that is on: %v, or it switched", err)
	}

	// n1 is on and idle: a round powers it off, held under way; a lease start meanwhile
	// waits for the power-off, then powers the host on.
	w.sw.gate, w.sw.began = make(chan struct{}), make(chan string, 4)
	if _, err := w.pm.round(ctx); err != nil {
		t.Fatal(err)
	}
	if call := <-w.sw.began; call != "off n1" {
		t.Fatalf("switch %q, want off n1", call)
	}
	done := make(chan error, 1)
	go func() { done <- w.pm.EnsureOn(ctx, lease, host("n1")) }()
	select {
	case err := <-done:
		t.Fatalf("EnsureOn returned during a power-off: %v", err)
	case call := <-w.sw.began:
		t.Fatalf("switch %q during a power-off", call)
	default:
	}
	close(w.sw.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w.pm.wg.Wait()
	if calls := w.sw.calls; !reflect.DeepEqual(calls, []string{"off n1", "on n1"}) {
		t.Fatalf("calls %v, want off then on", calls)
	}
	if p := w.power("n1"); p.State != climate.PowerOn {
		t.Fatalf("n1: %+v, want on", p)
	}

	// A failed power-on fails the start, and the host's state is unknown.
	w.sw.gate, w.sw.began, w.sw.calls = nil, nil, nil
	w.sw.fail["n2"] = true
	err := w.pm.EnsureOn(ctx, lease, host("n2"))
	if err == nil || err.Error() != "power on: BMC unreachable" {
		t.Fatalf("EnsureOn failing: %v", err)
	}
	if p := w.power("n2"); p.State != climate.PowerUnknown {
		t.Fatalf("n2: %+v, want unknown", p)
	}
}

// Run sleeps until the next instant a host needs switching, not polling, and plans again
// at once when a lease is committed.
func TestRunSleepsUntilTheNextSwitch(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	rounds := make(chan Round, 16)
	w.pm.cfg.Observe = func(r Round) { rounds <- r }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.pm.Run(ctx) }()
	defer func() { cancel(); <-done }()
	nextRound := func() Round {
		t.Helper()
		select {
		case r := <-rounds:
			return r
		case <-time.After(10 * time.Second): // a safety net, not a wait
			t.Fatal("no planning round")
			return Round{}
		}
	}
	if r := nextRound(); len(r.Switches) != 2 {
		t.Fatalf("first round: %+v, want both hosts off", r)
	}
	// Each finished switch wakes a round; then the manager sleeps until the horizon.
	for !w.power("n1").ChangedAt.Equal(t0) || w.power("n1").State != climate.PowerOff || w.power("n2").State != climate.PowerOff {
		nextRound()
	}
	<-w.clock.TimerAt(t0.Add(30 * time.Minute))
	w.sw.take()

	// A lease starting in 5 minutes wakes it: its host is powered on now, within the lead.
	w.lease(t0.Add(5*time.Minute), t0.Add(time.Hour), "n2")
	for {
		r := nextRound()
		if len(r.Switches) > 0 {
			if !reflect.DeepEqual(r.Switches, []Decision{{w.ids["n2"], true}}) || !r.At.Equal(t0) {
				t.Fatalf("round %+v, want n2 on at 10:00", r)
			}
			break
		}
	}
	// The switch runs after the round that decided it; its end wakes another round.
	for w.power("n2").State != climate.PowerOn {
		nextRound()
	}
	// Then it sleeps until the lease's end, when the host may be free.
	<-w.clock.TimerAt(t0.Add(30 * time.Minute))
	w.clock.Set(t0.Add(30 * time.Minute))
	for {
		r := nextRound()
		if r.At.Equal(t0.Add(30*time.Minute)) && r.Next.Equal(t0.Add(time.Hour)) {
			break
		}
	}
	if calls := w.sw.take(); !reflect.DeepEqual(calls, []string{"on n2"}) {
		t.Fatalf("calls %v, want only n2 on", calls)
	}
}

// A switch recorded but never finished (its process died) leaves the host's state
// unknown: at once for a sole manager (a dead run's), after Stale otherwise.
func TestUnfinishedSwitchIsUnknown(t *testing.T) {
	st := &Manager{cfg: Config{Stale: 10 * time.Minute}, started: t0}
	sole := &Manager{cfg: Config{Stale: 10 * time.Minute, Sole: true}, started: t0}
	before := &climate.HostPower{State: climate.PowerSwitchingOff, ChangedAt: t0.Add(-time.Minute)}
	after := &climate.HostPower{State: climate.PowerSwitchingOn, ChangedAt: t0.Add(time.Minute)}
	for _, tc := range []struct {
		m    *Manager
		p    *climate.HostPower
		now  time.Time
		want climate.PowerState
	}{
		{st, before, t0, climate.PowerSwitchingOff},
		{st, before, t0.Add(10 * time.Minute), climate.PowerUnknown},
		{sole, before, t0, climate.PowerUnknown},
		{sole, after, t0.Add(2 * time.Minute), climate.PowerSwitchingOn},
		{sole, nil, t0, climate.PowerUnknown},
		{sole, &climate.HostPower{State: climate.PowerOff, ChangedAt: t0.Add(-time.Hour)}, t0, climate.PowerOff},
	} {
		if got := tc.m.state(tc.p, tc.now); got != tc.want {
			t.Errorf("sole %v, %+v at %s: %s, want %s", tc.m.cfg.Sole, tc.p, tc.now, got, tc.want)
		}
	}
}

// With MinInterval, wake-ups in a stream start a round at most that often.
func TestRunSpacesRoundsByMinInterval(t *testing.T) {
	w := newWorld(t, "n1")
	w.pm.cfg.MinInterval = 5 * time.Second
	rounds := make(chan Round, 16)
	w.pm.cfg.Observe = func(r Round) { rounds <- r }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.pm.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if r := <-rounds; !r.At.Equal(t0) {
		t.Fatalf("first round at %s", r.At)
	}
	w.pm.Wake() // and the finished switch woke it too
	<-w.clock.TimerAt(t0.Add(5 * time.Second))
	select {
	case r := <-rounds:
		t.Fatalf("a round at %s, within MinInterval", r.At)
	default:
	}
	w.clock.Set(t0.Add(5 * time.Second))
	select {
	case r := <-rounds:
		if !r.At.Equal(t0.Add(5 * time.Second)) {
			t.Fatalf("second round at %s, want 10:00:05", r.At)
		}
	case <-time.After(10 * time.Second): // a safety net, not a wait
		t.Fatal("no round after MinInterval")
	}
}

// TestHorizonReadBeforeTheWrite checks that the switches' write transaction sees a lease
// booked on the switched host after the horizon was read before it (SQLite reads it in a
// read transaction, then checks the log).
func TestHorizonReadBeforeTheWrite(t *testing.T) {
	w := newWorld(t, "a", "b")
	ctx := context.Background()
	only := map[string]bool{w.ids["a"]: true}
	read, err := w.pm.readHorizon(ctx, t0, only)
	if err != nil {
		t.Fatal(err)
	}
	w.lease(t0.Add(5*time.Minute), t0.Add(time.Hour), "b") // elsewhere: what was read holds
	count := func() int {
		var n int
		err := w.store.Update(ctx, func(tx climate.Tx) error {
			allocs, err := read(tx)
			n = len(allocs)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("%d allocations on a before its lease, want 0", n)
	}
	w.lease(t0.Add(5*time.Minute), t0.Add(time.Hour), "a")
	if n := count(); n != 1 {
		t.Fatalf("%d allocations on a after a lease booked it since the read, want 1", n)
	}
}
