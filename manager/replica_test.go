package manager

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/plan"
	"climate/resource"
	"climate/sqlite"
)

// Two managers on one store stand for two processes (replicas) sharing a database: each
// must follow the other's commits by applying the store's allocation log to its index,
// and its plans must then be those a fresh look at the store gives.

var (
	replicaT0     = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	replicaAdmin  = climate.Identity{UserID: "root", ProjectID: "ops", Roles: []string{"admin"}}
	replicaMember = climate.Identity{UserID: "alice", ProjectID: "physics", Roles: []string{"member"}}
)

func openReplicaStore(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// replicaHosts registers n more hosts through m.
func replicaHosts(t *testing.T, m *Manager, n int) []string {
	t.Helper()
	had, err := m.ListHosts(context.Background(), replicaAdmin)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range n {
		h, err := m.CreateHost(context.Background(), replicaAdmin, map[string]string{"name": fmt.Sprintf("host-%d", len(had)+i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.ID)
	}
	return ids
}

// storeState is the brute-force view: the allocation revision and every allocation, from
// one snapshot. It fails the test if two allocations of a host overlap.
func storeState(t *testing.T, st climate.Store) (int64, []climate.Allocation) {
	t.Helper()
	ctx := context.Background()
	var rev int64
	var allocs []climate.Allocation
	err := st.View(ctx, func(tx climate.Tx) (err error) {
		if rev, err = tx.AllocationRevision(ctx); err != nil {
			return err
		}
		allocs, err = tx.ListAllocations(ctx, climate.AllocationFilter{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range allocs { // ordered by host, then start
		if i > 0 && allocs[i-1].ResourceID == a.ResourceID && allocs[i-1].End.After(a.Start) {
			t.Fatalf("host %s double-booked: %+v and %+v", a.ResourceID, allocs[i-1], a)
		}
	}
	return rev, allocs
}

// checkReplica brings m's view up to date and compares it with the store: the same
// revision and number of intervals, and over a grid of windows the same free hosts. A view
// that was behind must have caught up on the log, once, and never rebuilt after the first
// build.
func checkReplica(t *testing.T, name string, m *Manager, st climate.Store, hosts []string) {
	t.Helper()
	ctx := context.Background()
	rev, allocs := storeState(t, st)
	m.mu.RLock()
	behind := m.avail != nil && m.avail.Index.AllocationRevision != rev // nil: the first build
	m.mu.RUnlock()
	catchUps := m.catchUps.Load()
	err := m.view(ctx, func(a *resource.View) error {
		if a.Index.AllocationRevision != rev {
			t.Errorf("%s: view at allocation revision %d, store at %d", name, a.Index.AllocationRevision, rev)
		}
		if got := a.Index.Allocations(); got != len(allocs) {
			t.Errorf("%s: view holds %d intervals, store %d allocations", name, got, len(allocs))
		}
		for start := range 48 {
			for _, hours := range []int{1, 3, 8} {
				s, e := replicaT0.Add(time.Duration(start)*time.Hour), replicaT0.Add(time.Duration(start+hours)*time.Hour)
				got, _, err := a.Index.PlaceHosts(plan.HostRequest{Window: plan.Window{Start: s, End: e}, Max: len(hosts)})
				if err != nil {
					return err
				}
				slices.Sort(got)
				if want := freeHosts(hosts, allocs, s, e); !slices.Equal(got, want) {
					t.Errorf("%s: free over [+%dh, +%dh): view %v, store %v", name, start, start+hours, got, want)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: view: %v", name, err)
	}
	if n := m.catchUps.Load() - catchUps; behind && n != 1 || !behind && n != 0 {
		t.Errorf("%s: %d catch-ups for a view that was behind: %v", name, n, behind)
	}
	if n := m.rebuilds.Load(); n != 1 {
		t.Errorf("%s: %d rebuilds, want only the first build", name, n)
	}
}

// freeHosts is the brute force: the hosts (sorted) with no allocation overlapping [s, e).
func freeHosts(hosts []string, allocs []climate.Allocation, s, e time.Time) []string {
	busy := map[string]bool{}
	for _, a := range allocs {
		if climate.Overlaps(a.Start, a.End, s, e) {
			busy[a.ResourceID] = true
		}
	}
	out := []string{}
	for _, h := range hosts {
		if !busy[h] {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// randomOp creates, updates (moving the window, sometimes resizing a reservation) or
// deletes a lease through m. Conflicts are expected (the hosts are few), and so is not
// finding a lease that a concurrent writer deleted.
func randomOp(t *testing.T, rng *rand.Rand, m *Manager, hosts int) {
	ctx := context.Background()
	leases, _, err := CollectLeases(ctx, m, replicaAdmin, climate.LeaseQuery{})
	if err != nil {
		t.Error(err)
		return
	}
	window := func() (climate.Date, climate.Date) {
		s := 1 + rng.IntN(40)
		return climate.Date{Time: replicaT0.Add(time.Duration(s) * time.Hour)},
			climate.Date{Time: replicaT0.Add(time.Duration(s+1+rng.IntN(6)) * time.Hour)}
	}
	size := func() (*int, *int) { mn, mx := 1, 1+rng.IntN(min(3, hosts)); return &mn, &mx }
	op := rng.IntN(10)
	switch {
	case op < 4 || len(leases) == 0:
		start, end := window()
		mn, mx := size()
		_, err = m.CreateLease(ctx, replicaMember, climate.LeaseRequest{Name: "l", Start: start, End: end,
			Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: mn, Max: mx}}})
	case op < 8:
		l := leases[rng.IntN(len(leases))]
		u := climate.LeaseUpdate{}
		u.Start, u.End = window()
		if rng.IntN(2) == 0 {
			mn, mx := size()
			u.Reservations = []climate.ReservationRequest{{ID: l.Reservations[0].ID, Min: mn, Max: mx}}
		}
		_, err = m.UpdateLease(ctx, replicaMember, l.ID, u)
	default:
		err = m.DeleteLease(ctx, replicaMember, leases[rng.IntN(len(leases))].ID)
	}
	if code := climate.ErrorCode(err); err != nil && code != climate.CodeConflict && code != climate.CodeNotFound {
		t.Errorf("op %d: %v", op, err)
	}
}

func revisionOf(m *Manager) int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.avail.Index.AllocationRevision
}

// TestReplicasCatchUp interleaves random writes of two managers. After each write, each
// manager is checked against the store or, at random, left behind for a while, so that one
// catch-up also covers several commits (a lease created then deleted, a window moved twice).
func TestReplicasCatchUp(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			st := openReplicaStore(t)
			clk := clock.NewFake(replicaT0)
			ms := []*Manager{New(st, clk, Config{}), New(st, clk, Config{})}
			hosts := replicaHosts(t, ms[0], 5)
			checkReplica(t, "a", ms[0], st, hosts)
			checkReplica(t, "b", ms[1], st, hosts)
			rng := rand.New(rand.NewPCG(seed, 1))
			var behindChecks int
			for step := range 120 {
				// A writer whose view is current keeps it current through its own commit,
				// without a catch-up (commitChange's fast path).
				w := ms[rng.IntN(2)]
				before, _ := storeState(t, st)
				current, catchUps := revisionOf(w) == before, w.catchUps.Load()
				randomOp(t, rng, w, len(hosts))
				if after, _ := storeState(t, st); current && (revisionOf(w) != after || w.catchUps.Load() != catchUps) {
					t.Errorf("step %d: the writer's view went from current to revision %d (store %d) with %d catch-ups", step, revisionOf(w), after, w.catchUps.Load()-catchUps)
				}
				for i, m := range ms {
					if rng.IntN(3) == 0 {
						continue
					}
					if rev, _ := storeState(t, st); rev != revisionOf(m) {
						behindChecks++
					}
					checkReplica(t, fmt.Sprintf("step %d, manager %c", step, 'a'+i), m, st, hosts)
				}
				if t.Failed() {
					t.FailNow()
				}
			}
			checkReplica(t, "a at the end", ms[0], st, hosts)
			checkReplica(t, "b at the end", ms[1], st, hosts)
			if catchUps := ms[0].catchUps.Load() + ms[1].catchUps.Load(); behindChecks < 40 || catchUps < int64(behindChecks) {
				t.Errorf("%d catch-ups, %d checks behind the store: the sequence did not exercise the log", catchUps, behindChecks)
			}
		})
	}
}

// TestReplicasConcurrentWriters runs writers on both managers at once: catch-ups then land
// between the managers' own commits and alongside planners holding the read lock. Each
// manager must end where the store is, without having rebuilt.
func TestReplicasConcurrentWriters(t *testing.T) {
	st := openReplicaStore(t)
	clk := clock.NewFake(replicaT0)
	ms := []*Manager{New(st, clk, Config{}), New(st, clk, Config{})}
	hosts := replicaHosts(t, ms[0], 6)
	checkReplica(t, "a", ms[0], st, hosts)
	checkReplica(t, "b", ms[1], st, hosts)
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for range 15 {
				randomOp(t, rng, ms[w%2], len(hosts))
			}
		}()
	}
	wg.Wait()
	checkReplica(t, "a", ms[0], st, hosts)
	checkReplica(t, "b", ms[1], st, hosts)
	if ms[0].catchUps.Load() == 0 || ms[1].catchUps.Load() == 0 {
		t.Errorf("catch-ups: a %d, b %d; want both to have followed the other", ms[0].catchUps.Load(), ms[1].catchUps.Load())
	}
}

// withoutLog hides the store's allocation log (pruned: the log says it does not reach
// back), standing for stores that cannot tell a replica what changed.
type withoutLog struct {
	climate.Store
	pruned bool
}

type txWithoutLog struct{ climate.Tx } // the embedded interface hides AllocationChanges

type txPrunedLog struct{ climate.Tx }

func (txPrunedLog) AllocationChanges(context.Context, int64) ([]climate.AllocationChange, bool, error) {
	return nil, false, nil
}

func (s withoutLog) wrap(tx climate.Tx) climate.Tx {
	if s.pruned {
		return txPrunedLog{tx}
	}
	return txWithoutLog{tx}
}

func (s withoutLog) View(ctx context.Context, fn func(climate.Tx) error) error {
	return s.Store.View(ctx, func(tx climate.Tx) error { return fn(s.wrap(tx)) })
}

func (s withoutLog) Update(ctx context.Context, fn func(climate.Tx) error) error {
	return s.Store.Update(ctx, func(tx climate.Tx) error { return fn(s.wrap(tx)) })
}

// Without a usable log, or after a host change, a replica rebuilds its view.
func TestReplicaRebuildsWhenItCannotCatchUp(t *testing.T) {
	ctx := context.Background()
	st := openReplicaStore(t)
	clk := clock.NewFake(replicaT0)
	a := New(st, clk, Config{})
	hosts := replicaHosts(t, a, 2)
	replicas := map[string]*Manager{
		"no log":     New(withoutLog{Store: st}, clk, Config{}),
		"pruned log": New(withoutLog{Store: st, pruned: true}, clk, Config{}),
		"log":        New(st, clk, Config{}),
	}
	want := func(name string, m *Manager, rebuilds, catchUps int64) {
		t.Helper()
		err := m.view(ctx, func(av *resource.View) error {
			rev, allocs := storeState(t, st)
			if av.Index.AllocationRevision != rev || av.Index.Allocations() != len(allocs) {
				t.Errorf("%s: view at revision %d with %d intervals; store at %d with %d", name, av.Index.AllocationRevision, av.Index.Allocations(), rev, len(allocs))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if r, c := m.rebuilds.Load(), m.catchUps.Load(); r != rebuilds || c != catchUps {
			t.Errorf("%s: %d rebuilds, %d catch-ups; want %d, %d", name, r, c, rebuilds, catchUps)
		}
	}
	for name, m := range replicas {
		want(name, m, 1, 0)
	}
	l, err := a.CreateLease(ctx, replicaMember, climate.LeaseRequest{Name: "l", Start: climate.Date{Time: replicaT0.Add(time.Hour)}, End: climate.Date{Time: replicaT0.Add(2 * time.Hour)},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: new(1), Max: new(2)}}})
	if err != nil {
		t.Fatal(err)
	}
	want("no log", replicas["no log"], 2, 0)
	want("pruned log", replicas["pruned log"], 2, 0)
	want("log", replicas["log"], 1, 1)

	// A host change moves the inventory revision: every replica rebuilds, even when
	// allocations moved too.
	replicaHosts(t, a, 1)
	if err := a.DeleteLease(ctx, replicaMember, l.ID); err != nil {
		t.Fatal(err)
	}
	want("log after a host change", replicas["log"], 2, 1)
	checkFree := func(m *Manager) {
		err := m.view(ctx, func(av *resource.View) error {
			got, _, err := av.Index.PlaceHosts(plan.HostRequest{Window: plan.Window{Start: replicaT0, End: replicaT0.Add(3 * time.Hour)}, Max: 10})
			if len(got) != len(hosts)+1 {
				t.Errorf("free hosts %v, want the %d hosts registered", got, len(hosts)+1)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	checkFree(replicas["log"])
}

// afterView runs hook once, after the next View of the store returns.
type afterView struct {
	climate.Store
	mu   sync.Mutex
	hook func()
}

func (s *afterView) View(ctx context.Context, fn func(climate.Tx) error) error {
	err := s.Store.View(ctx, fn)
	s.mu.Lock()
	hook := s.hook
	s.hook = nil
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	return err
}

// A manager's own commit updates its index with what the store changed, even when another
// replica changed the same lease after this manager read it (and the index caught up on
// that change before the commit): the lease it read is then not what the commit replaced.
func TestOwnCommitOverAConcurrentUpdate(t *testing.T) {
	ctx := context.Background()
	st := openReplicaStore(t)
	clk := clock.NewFake(replicaT0)
	hooked := &afterView{Store: st}
	a, b := New(hooked, clk, Config{}), New(st, clk, Config{})
	hosts := replicaHosts(t, a, 2)
	one := 1
	l, err := a.CreateLease(ctx, replicaMember, climate.LeaseRequest{Name: "l", Start: climate.Date{Time: replicaT0.Add(time.Hour)}, End: climate.Date{Time: replicaT0.Add(3 * time.Hour)},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one}}})
	if err != nil {
		t.Fatal(err)
	}
	checkReplica(t, "b", b, st, hosts)
	at := func(h int) climate.Date { return climate.Date{Time: replicaT0.Add(time.Duration(h) * time.Hour)} }
	// a's UpdateLease first reads the lease; right then b moves it.
	hooked.hook = func() {
		if _, err := b.UpdateLease(ctx, replicaMember, l.ID, climate.LeaseUpdate{Start: at(10), End: at(12)}); err != nil {
			t.Errorf("b: %v", err)
		}
	}
	// a checks its view before it plans, as after a second idle (trustIndexFor), so its
	// index catches up on b's change before a's commit.
	a.currentAt.Store(0)
	if _, err := a.UpdateLease(ctx, replicaMember, l.ID, climate.LeaseUpdate{End: at(4)}); err != nil {
		t.Fatal(err)
	}
	if hooked.hook != nil {
		t.Fatal("b's update did not run")
	}
	catchUps := a.catchUps.Load()
	checkReplica(t, "a", a, st, hosts)
	if a.catchUps.Load() != catchUps {
		t.Errorf("a caught up after its own commit; want its commit applied to its view")
	}
	checkReplica(t, "b", b, st, hosts)
}

// A plan avoids only the in-flight allocations that overlap its window, its cleaning time
// included on both sides: the others cannot conflict with it.
func TestInFlightOverlapping(t *testing.T) {
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(id string, from, to int) climate.Allocation {
		return climate.Allocation{ID: id, ResourceID: "h", Start: t0.Add(time.Duration(from) * time.Hour), End: t0.Add(time.Duration(to) * time.Hour)}
	}
	var f inFlight
	doneA := f.add([]climate.Allocation{at("before", 0, 2), at("touching", 2, 4), at("inside", 5, 6)})
	doneB := f.add([]climate.Allocation{at("across", 3, 10), at("after", 12, 13)})
	ids := func(allocs []climate.Allocation) []string {
		var out []string
		for _, a := range allocs {
			out = append(out, a.ID)
		}
		slices.Sort(out)
		return out
	}
	from, to := t0.Add(4*time.Hour), t0.Add(12*time.Hour)
	if got, want := ids(f.overlapping(from, to)), []string{"across", "inside"}; !slices.Equal(got, want) {
		t.Errorf("overlapping [4h, 12h): %v, want %v (half-open windows)", got, want)
	}
	doneB()
	if got, want := ids(f.overlapping(from.Add(-time.Hour), to.Add(time.Hour))), []string{"inside", "touching"}; !slices.Equal(got, want) {
		t.Errorf("after one commit is done, overlapping [3h, 13h): %v, want %v", got, want)
	}
	doneA()
	if got := f.overlapping(t0, t0.Add(100*time.Hour)); len(got) != 0 {
		t.Errorf("with nothing in flight: %v", got)
	}
}

// KeepFresh leaves an idle manager's index alone while it was found current within the
// period, and catches it up from the log (no rebuild) once a period passed unchecked:
// the other manager's commit then reaches it with no request of its own.
func TestKeepFreshCatchesAnIdleReplicaUp(t *testing.T) {
	st := openReplicaStore(t)
	clk := clock.NewFake(replicaT0)
	a, b := New(st, clk, Config{}), New(st, clk, Config{})
	hosts := replicaHosts(t, a, 3)
	checkReplica(t, "b before", b, st, hosts)
	mn, mx := 2, 2
	if _, err := a.CreateLease(context.Background(), replicaMember, climate.LeaseRequest{Name: "l",
		Start: climate.Date{Time: replicaT0.Add(time.Hour)}, End: climate.Date{Time: replicaT0.Add(3 * time.Hour)},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &mn, Max: &mx}}}); err != nil {
		t.Fatal(err)
	}
	stored, _ := storeState(t, st)
	// tick runs keepFresh with period for one tick: the second send returns once the loop
	// is back waiting, so the first tick's work is done.
	tick := func(period time.Duration) {
		ctx, cancel := context.WithCancel(context.Background())
		ticks, done := make(chan time.Time), make(chan struct{})
		go func() { b.keepFresh(ctx, ticks, period); close(done) }()
		ticks <- time.Now()
		ticks <- time.Now()
		cancel()
		<-done
	}
	tick(time.Hour) // b's index was found current just now
	if rev := revisionOf(b); rev == stored {
		t.Fatalf("with b found current within the period, keepFresh caught it up (revision %d)", rev)
	}
	catchUps := b.catchUps.Load()
	tick(0)
	if rev := revisionOf(b); rev != stored {
		t.Errorf("after a period unchecked, b's index is at revision %d, the store at %d", rev, stored)
	}
	if n := b.catchUps.Load() - catchUps; n != 1 {
		t.Errorf("keepFresh brought b up to date with %d catch-ups, want 1", n)
	}
	checkReplica(t, "b after", b, st, hosts) // current, from the log: one build in all
}
