package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/engine"
	"climate/manager"
	"climate/sqlite"
)

var t0 = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

var admin = climate.Identity{UserID: "u", ProjectID: "p", Roles: []string{"admin"}}

// world is a store with hosts and a manager on a fake clock.
type world struct {
	t     *testing.T
	store *sqlite.Store
	clock *clock.Fake
	mgr   *manager.Manager
	eng   *engine.Engine
}

func newWorld(t *testing.T, hosts ...string) *world {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w := &world{t: t, store: st, clock: clock.NewFake(t0)}
	w.mgr = manager.New(st, w.clock, manager.Config{EventsChanged: func(due time.Time) {
		if w.eng != nil {
			w.eng.WakeFor(due)
		}
	}})
	for _, name := range hosts {
		if _, err := w.mgr.CreateHost(context.Background(), admin, map[string]string{"name": name}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *world) lease(name string, hosts int, start, end time.Time) *climate.Lease {
	w.t.Helper()
	l, err := w.mgr.CreateLease(context.Background(), admin, climate.LeaseRequest{
		Name: name, Start: climate.Date{Time: start}, End: climate.Date{Time: end},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &hosts, Max: &hosts}},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return l
}

func (w *world) get(id string) *climate.Lease {
	w.t.Helper()
	l, err := w.mgr.GetLease(context.Background(), admin, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return l
}

// runEngine runs an engine with these actions until the test ends; its reports arrive on
// the returned channel.
func (w *world) runEngine(a engine.Actions) <-chan engine.Report {
	reports := make(chan engine.Report, 16)
	w.eng = engine.New(w.store, w.clock, engine.Config{Actions: a, Logger: quiet, Observe: func(r engine.Report) { reports <- r }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.eng.Run(ctx) }()
	w.t.Cleanup(func() { cancel(); <-done })
	return reports
}

func next(t *testing.T, reports <-chan engine.Report) engine.Report {
	t.Helper()
	select {
	case r := <-reports:
		return r
	case <-time.After(20 * time.Second): // a safety net against a hung engine, not a wait
		t.Fatal("no event was handled")
		return engine.Report{}
	}
}

// A start hook that fails on one host, after its bounded retries, puts the lease into
// ERROR with the hook's message; the other host's hook ran once. The end hook still runs
// on every host at the end, as Blazar ends leases in error.
func TestEngineStartHookFailurePutsLeaseInError(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	log := filepath.Join(t.TempDir(), "log")
	script := `echo "$CLIMATE_EVENT $CLIMATE_HOST_NAME $CLIMATE_LEASE_NAME" >> "$1"
		if [ "$CLIMATE_EVENT" = start_lease ] && [ "$CLIMATE_HOST_NAME" = n2 ]; then echo "BMC of $CLIMATE_HOST_NAME unreachable" >&2; exit 1; fi`
	acts := &Actions{Store: w.store, Runner: noWait(3), Hooks: map[climate.EventType]Hook{
		climate.EventStartLease: sh(script, log), climate.EventEndLease: sh(script, log)}}
	l := w.lease("train", 2, t0.Add(time.Hour), t0.Add(2*time.Hour))
	w.clock.Set(t0.Add(time.Hour))
	reports := w.runEngine(acts)

	r := next(t, reports)
	want := "start_lease failed on 1 of 2 hosts: host n2: command sh: exit status 1: BMC of n2 unreachable (3 attempts)"
	if r.Event.Type != climate.EventStartLease || r.Err == nil || r.Err.Error() != want {
		t.Fatalf("report %s: err %v; want %q", r.Event.Type, r.Err, want)
	}
	got := w.get(l.ID)
	if got.Status != climate.LeaseError || got.Reservations[0].Status != climate.ReservationError ||
		got.Event(climate.EventStartLease).Status != climate.EventError {
		t.Fatalf("lease %s, reservation %s, start %s; want ERROR, error, ERROR", got.Status, got.Reservations[0].Status, got.Event(climate.EventStartLease).Status)
	}
	lines := strings.Split(strings.TrimSpace(readFile(t, log)), "\n")
	count := map[string]int{}
	for _, line := range lines {
		count[line]++
	}
	if count["start_lease n1 train"] != 1 || count["start_lease n2 train"] != 3 || len(lines) != 4 {
		t.Errorf("hook runs %q: want n1 once, n2 three times (bounded retries)", lines)
	}

	<-w.clock.TimerAt(t0.Add(2 * time.Hour))
	w.clock.Set(t0.Add(2 * time.Hour))
	if r := next(t, reports); r.Event.Type != climate.EventEndLease || r.Err != nil || r.Status != climate.LeaseError {
		t.Fatalf("end: %+v; want end_lease done, lease still ERROR (its start failed)", r)
	}
	tail := strings.Split(strings.TrimSpace(readFile(t, log)), "\n")[4:]
	slices.Sort(tail)
	if strings.Join(tail, ",") != "end_lease n1 train,end_lease n2 train" {
		t.Errorf("end hook runs %q; want one per host", tail)
	}
}

// Successful hooks leave the lease ACTIVE, then TERMINATED; each host sees its start
// before its end, with the lease's facts in its environment.
func TestEngineHooksRunOnEveryHostAtStartAndEnd(t *testing.T) {
	w := newWorld(t, "n1", "n2", "n3")
	dir := t.TempDir()
	script := `echo "$CLIMATE_EVENT $CLIMATE_LEASE_ID $CLIMATE_RESERVATION_ID $CLIMATE_START $CLIMATE_END" >> "$1/$CLIMATE_HOST_NAME"`
	acts := &Actions{Store: w.store, Runner: noWait(3), Parallel: 2, Hooks: map[climate.EventType]Hook{
		climate.EventStartLease: sh(script, dir), climate.EventEndLease: sh(script, dir)}}
	l := w.lease("ok", 3, t0.Add(time.Hour), t0.Add(2*time.Hour))
	reports := w.runEngine(acts)
	<-w.clock.TimerAt(t0.Add(time.Hour))
	w.clock.Set(t0.Add(time.Hour))
	if r := next(t, reports); r.Err != nil || r.Status != climate.LeaseActive {
		t.Fatalf("start: %+v; want ACTIVE", r)
	}
	<-w.clock.TimerAt(t0.Add(2 * time.Hour))
	w.clock.Set(t0.Add(2 * time.Hour))
	if r := next(t, reports); r.Err != nil || r.Status != climate.LeaseTerminated {
		t.Fatalf("end: %+v; want TERMINATED", r)
	}
	res := l.Reservations[0].ID
	for _, host := range []string{"n1", "n2", "n3"} {
		want := fmt.Sprintf("start_lease %[1]s %[2]s 2030-01-01T11:00:00Z 2030-01-01T12:00:00Z\nend_lease %[1]s %[2]s 2030-01-01T11:00:00Z 2030-01-01T12:00:00Z\n", l.ID, res)
		if got := readFile(t, filepath.Join(dir, host)); got != want {
			t.Errorf("%s saw\n%s\nwant\n%s", host, got, want)
		}
	}
}

// Hosts run in parallel, never more than Parallel at once; PrepareStart runs on each
// host before its hook, and its failure fails that host alone.
func TestActionsParallelBoundAndPrepare(t *testing.T) {
	w := newWorld(t, "n1", "n2", "n3", "n4", "n5")
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	inFlight, most, arrived := 0, 0, 0
	var hosts []string
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var p payload
		_ = jsonDecode(r, &p)
		mu.Lock()
		defer mu.Unlock()
		hosts = append(hosts, p.HostName)
		inFlight++
		most = max(most, inFlight)
		arrived++
		// Two at a time: each waits for its partner, so a runner that ran hosts one by one
		// would never finish (the test's deadline catches it).
		my := (arrived + 1) / 2
		cond.Broadcast()
		for arrived < 2*my {
			cond.Wait()
		}
		inFlight--
	}))
	defer srv.Close()
	prepared := map[string]bool{}
	acts := &Actions{Store: w.store, Runner: noWait(1), Parallel: 2,
		Hooks: map[climate.EventType]Hook{climate.EventStartLease: {URL: srv.URL}},
		PrepareStart: func(_ context.Context, _ *climate.Lease, h *climate.Host) error {
			mu.Lock()
			defer mu.Unlock()
			prepared[h.HypervisorHostname] = true
			if h.HypervisorHostname == "n5" {
				return fmt.Errorf("power on: BMC refused")
			}
			return nil
		}}
	l := w.lease("wide", 5, t0, t0.Add(time.Hour))
	err := acts.OnStart(context.Background(), w.get(l.ID))
	if err == nil || err.Error() != "start_lease failed on 1 of 5 hosts: host n5: power on: BMC refused" {
		t.Errorf("OnStart: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 2 || len(hosts) != 4 || len(prepared) != 5 {
		t.Errorf("at most %d at once (want 2); hooks ran on %v (want n1-n4); prepared %v", most, hosts, prepared)
	}
}

// A lease's message names at most three hosts.
func TestFailureMessageIsBounded(t *testing.T) {
	w := newWorld(t, "n1", "n2", "n3", "n4", "n5")
	acts := &Actions{Store: w.store, Runner: noWait(1), Hooks: map[climate.EventType]Hook{climate.EventEndLease: sh(`echo "no power" >&2; exit 1`)}}
	l := w.lease("wide", 5, t0, t0.Add(time.Hour))
	err := acts.OnEnd(context.Background(), w.get(l.ID))
	want := "end_lease failed on 5 of 5 hosts: host n1: command sh: exit status 1: no power (1 attempts); " +
		"host n2: command sh: exit status 1: no power (1 attempts); host n3: command sh: exit status 1: no power (1 attempts); and 2 more"
	if err == nil || err.Error() != want {
		t.Errorf("OnEnd: %v\nwant %s", err, want)
	}
	// No hook for an event: nothing runs.
	if err := acts.OnStart(context.Background(), w.get(l.ID)); err != nil {
		t.Errorf("OnStart without a start hook: %v", err)
	}
}

func jsonDecode(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }

// Host hooks and preparation act on hosts a lease holds whole, never on hosts where it
// holds instance slots beside other leases.
func TestActionsSkipInstanceSlots(t *testing.T) {
	w := newWorld(t, "n1")
	ran := false
	acts := &Actions{Store: w.store, Runner: noWait(1),
		PrepareStart: func(context.Context, *climate.Lease, *climate.Host) error { ran = true; return nil }}
	l := w.lease("whole", 1, t0, t0.Add(time.Hour))
	slots := *w.get(l.ID)
	slots.Reservations = []climate.Reservation{{ID: "r", ResourceType: "virtual:instance",
		Allocations: []climate.Allocation{{ResourceID: slots.Reservations[0].Allocations[0].ResourceID, Slots: 2, Size: climate.Size{VCPUs: 1, MemoryMB: 512}}}}}
	if err := acts.OnStart(context.Background(), &slots); err != nil || ran {
		t.Fatalf("a lease of slots: OnStart %v, prepared a host: %v", err, ran)
	}
	if err := acts.OnStart(context.Background(), w.get(l.ID)); err != nil || !ran {
		t.Fatalf("a lease of a whole host: OnStart %v, prepared: %v", err, ran)
	}
}
