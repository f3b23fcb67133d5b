package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"climate"
)

// Two Stores on one schema stand for two replicas: check-then-insert must still be atomic,
// because a write transaction's re-check locks the resource it reads until commit, across
// processes (not only the exclusion constraint: here every loser must fail its own
// re-check, before writing anything).
func TestTwoReplicasSerializeWriters(t *testing.T) {
	dsn := TestDSN(t)
	a, b := open(t, dsn), open(t, dsn)
	for round := range 4 {
		host := fmt.Sprint("X", round)
		errs := make([]error, 16)
		wrote := make([]bool, len(errs))
		var wg sync.WaitGroup
		ready := make(chan struct{})
		for i := range errs {
			s := a
			if i%2 == 1 {
				s = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ready
				errs[i] = s.Update(ctx, func(tx climate.Tx) error {
					got, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{host}, From: t0, To: t0.Add(time.Hour)})
					if err != nil {
						return err
					}
					if len(got) > 0 {
						return climate.ErrConflictRetry
					}
					wrote[i] = true
					return tx.InsertLease(ctx, testLease(fmt.Sprintf("l%d-%d", round, i), t0, t0.Add(time.Hour), host))
				})
			}()
		}
		close(ready)
		wg.Wait()
		ok, writers := 0, 0
		for i, err := range errs {
			if err == nil {
				ok++
			} else if !errors.Is(err, climate.ErrConflictRetry) {
				t.Errorf("round %d, writer %d: %v", round, i, err)
			}
			if wrote[i] {
				writers++
			}
		}
		if ok != 1 || writers != 1 {
			t.Errorf("round %d: %d commits, %d writers passed the re-check; want 1 and 1", round, ok, writers)
		}
	}
}

// recheck reads host's allocations over [t0, t0+1h) as a write transaction's re-check
// does, which locks host until commit.
func recheck(ctx context.Context, tx climate.Tx, host string) error {
	_, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{host}, From: t0, To: t0.Add(time.Hour)})
	return err
}

// A writer waiting for another's resource lock gives up when its context ends, and
// writes nothing.
func TestUpdateWaitingForTheLockIsCancellable(t *testing.T) {
	dsn := TestDSN(t)
	app := "climate-waiter-" + randomHex(4)
	a, b := open(t, dsn), open(t, dsn+"&application_name="+app)
	releaseHeld, done := holdUpdate(t, a, func(tx climate.Tx) error { return recheck(ctx, tx, "h1") })
	cctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		waited <- b.Update(cctx, func(tx climate.Tx) error {
			if err := recheck(cctx, tx, "h1"); err != nil {
				return err
			}
			return tx.InsertLease(cctx, testLease("l", t0, t0.Add(time.Hour), "h1"))
		})
	}()
	waitForLockWaiters(t, a, app, 1, "b queued for h1's lock")
	cancel()
	select {
	case err := <-waited:
		if err == nil {
			t.Error("cancelled Update: no error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cancelled Update still waiting for h1's lock")
	}
	// The server ended the wait too (pgx cancels the statement of a connection it drops):
	// b left the queue while a still holds the lock.
	waitForLockWaiters(t, a, app, 0, "b's cancelled wait ended on the server")
	releaseHeld()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	err := b.View(ctx, func(tx climate.Tx) error {
		_, err := tx.GetLease(ctx, "l")
		return err
	})
	if climate.ErrorCode(err) != climate.CodeNotFound {
		t.Errorf("lease of the cancelled Update: %v; want not found", err)
	}
}

// Nothing global serializes writers: while one holds host A from its re-check on (its
// transaction open), another books host B, commits, and its changes are in the log at
// once; the first then commits after it, and the log lists each transaction's changes
// together, in commit order, with revisions that leave no gap.
func TestWritersOnOtherResourcesDoNotWait(t *testing.T) {
	s := open(t, TestDSN(t))
	releaseHeld, first := holdUpdate(t, s, func(tx climate.Tx) error {
		if err := recheck(ctx, tx, "A"); err != nil {
			return err
		}
		return tx.InsertLease(ctx, testLease("la", t0, t0.Add(time.Hour), "A"))
	})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a broken store waits for the first
	defer cancel()
	err := s.Update(wctx, func(tx climate.Tx) error {
		if err := recheck(wctx, tx, "B"); err != nil {
			return err
		}
		return tx.InsertLease(wctx, testLease("lb", t0, t0.Add(time.Hour), "B"))
	})
	if err != nil {
		t.Fatalf("writer on B while A is held: %v", err)
	}
	changes := func() []climate.AllocationChange {
		var out []climate.AllocationChange
		if err := s.View(ctx, func(tx climate.Tx) error {
			var err error
			out, _, err = tx.(climate.AllocationLog).AllocationChanges(ctx, 0)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := changes(); len(got) != 1 || got[0].Allocation.LeaseID != "lb" || got[0].Revision != 1 {
		t.Fatalf("log with A's writer still open: %+v, want lb's allocation at revision 1", got)
	}
	releaseHeld()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	got := changes()
	if len(got) != 2 || got[1].Allocation.LeaseID != "la" || got[1].Revision != 2 {
		t.Fatalf("log: %+v, want lb's allocation at revision 1, then la's at 2", got)
	}
	var rev int64
	if err := s.View(ctx, func(tx climate.Tx) (err error) { rev, err = tx.AllocationRevision(ctx); return err }); err != nil || rev != 2 {
		t.Fatalf("allocation revision %d (%v), want 2", rev, err)
	}
}

// Writers of one resource wait for each other only where their windows share a day: one
// booking h1 two days after a held writer's window commits at once; one whose window
// overlaps it waits, and its re-check then sees the held writer's booking; one reading h1
// without an end (a host's deletion) waits for every writer of h1.
func TestWritersOfOtherDaysDoNotWait(t *testing.T) {
	dsn := TestDSN(t)
	overlapping, unbounded := "climate-overlap-"+randomHex(4), "climate-unbounded-"+randomHex(4)
	a, b, c := open(t, dsn), open(t, dsn+"&application_name="+overlapping), open(t, dsn+"&application_name="+unbounded)
	releaseHeld, first := holdUpdate(t, a, func(tx climate.Tx) error {
		if err := recheck(ctx, tx, "h1"); err != nil {
			return err
		}
		return tx.InsertLease(ctx, testLease("held", t0, t0.Add(time.Hour), "h1"))
	})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a broken store waits for the held writer
	defer cancel()
	later := t0.Add(48 * time.Hour)
	if err := a.Update(wctx, func(tx climate.Tx) error {
		if _, err := tx.ListAllocations(wctx, climate.AllocationFilter{ResourceIDs: []string{"h1"}, From: later, To: later.Add(time.Hour)}); err != nil {
			return err
		}
		return tx.InsertLease(wctx, testLease("later", later, later.Add(time.Hour), "h1"))
	}); err != nil {
		t.Fatalf("writer of h1 two days later while the first is held: %v", err)
	}

	seen := make(chan []climate.Allocation, 1)
	overlap := make(chan error, 1)
	go func() {
		overlap <- b.Update(ctx, func(tx climate.Tx) error {
			as, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{"h1"}, From: t0.Add(30 * time.Minute), To: t0.Add(90 * time.Minute)})
			seen <- as
			return err
		})
	}()
	whole := make(chan error, 1)
	go func() {
		whole <- c.Update(ctx, func(tx climate.Tx) error {
			_, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{"h1"}, From: t0})
			return err
		})
	}()
	waitForLockWaiters(t, a, overlapping, 1, "the overlapping writer waits for the held one")
	waitForLockWaiters(t, a, unbounded, 1, "the unbounded read waits for the held writer")
	releaseHeld()
	for _, ch := range []<-chan error{first, overlap, whole} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if as := <-seen; len(as) != 1 || as[0].LeaseID != "held" {
		t.Errorf("the overlapping writer's re-check read %+v; want the held writer's allocation", as)
	}
}

// A window's lock days are the days it touches (its end excluded), none when it is
// unbounded or would take too many locks.
func TestLockDays(t *testing.T) {
	day := func(d int64) *int64 { return &d }
	midnight := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	n := midnight.Unix() / 86400
	for _, c := range []struct {
		what        string
		from, to    time.Time
		resources   int
		first, last *int64
	}{
		{"within a day", midnight.Add(time.Hour), midnight.Add(2 * time.Hour), 10, day(n), day(n)},
		{"to midnight", midnight.Add(time.Hour), midnight.Add(24 * time.Hour), 10, day(n), day(n)},
		{"past midnight", midnight.Add(time.Hour), midnight.Add(25 * time.Hour), 10, day(n), day(n + 1)},
		{"before 1970", time.Unix(-3600, 0), time.Unix(60, 0), 1, day(-1), day(0)},
		{"unbounded", midnight, time.Time{}, 1, nil, nil},
		{"128 locks", midnight, midnight.Add(64 * 24 * time.Hour), 2, day(n), day(n + 63)},
		{"129 locks", midnight, midnight.Add(43 * 24 * time.Hour), 3, nil, nil},
	} {
		first, last := lockDays(c.from, c.to, c.resources)
		if !sameDay(first, c.first) || !sameDay(last, c.last) {
			t.Errorf("%s: days %v to %v; want %v to %v", c.what, deref(first), deref(last), deref(c.first), deref(c.last))
		}
	}
}

func sameDay(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int64) any {
	if p == nil {
		return "none"
	}
	return *p
}

// Writers queued behind a long Update wait in the process, not on pooled connections, so
// reads still get a connection: here the pool has two, and four writers wait.
func TestQueuedWritersLeaveConnectionsForReads(t *testing.T) {
	s := open(t, TestDSN(t)+"&pool_max_conns=2")
	holding, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.Update(ctx, func(climate.Tx) error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	var started sync.WaitGroup
	for range 4 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			_ = s.Update(ctx, func(climate.Tx) error { return nil })
		}()
	}
	defer wg.Wait()
	defer close(release)
	// The writers are on their way; had they a connection each, the pool would now be
	// exhausted (a broken store fails here most of the time, a good one never).
	started.Wait()
	runtime.Gosched()
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.View(vctx, func(tx climate.Tx) error { _, err := tx.AllocationRevision(vctx); return err }); err != nil {
		t.Fatalf("View while writers queue: %v", err)
	}
}

// waitForLockWaiters polls through s until n connections of application app wait for a
// lock, as PostgreSQL reports it.
func waitForLockWaiters(t *testing.T, s *Store, app string, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections of %s wait for a lock; want %d (%s)", got, app, n, what)
		}
	}
}

// Two replicas changing one lease take turns from the read to the commit, so neither
// writes back what it read before the other's commit: the engine of one starting the
// lease (PENDING → STARTING) while the other's marks another event done keeps both. A
// write transaction's GetLease locks the lease's row.
func TestLeaseReadModifyWritesTakeTurns(t *testing.T) {
	dsn := TestDSN(t)
	app := "climate-lease-" + randomHex(4)
	a, b := open(t, dsn), open(t, dsn+"&application_name="+app)
	l := testLease("l", t0, t0.Add(time.Hour), "h1")
	l.Events = append(l.Events, climate.Event{ID: "l-end", LeaseID: "l", Type: climate.EventEndLease, Time: t0.Add(time.Hour),
		Status: climate.EventUndone, CreatedAt: t0})
	insert(t, a, l)
	releaseHeld, first := holdUpdate(t, a, func(tx climate.Tx) error {
		l, err := tx.GetLease(ctx, "l")
		if err != nil {
			return err
		}
		l.Status = climate.LeaseStarting
		return tx.UpdateLease(ctx, l)
	})
	second := make(chan error, 1)
	go func() {
		second <- b.Update(ctx, func(tx climate.Tx) error {
			l, err := tx.GetLease(ctx, "l")
			if err != nil {
				return err
			}
			l.Event(climate.EventEndLease).Status = climate.EventDone
			return tx.UpdateLease(ctx, l)
		})
	}()
	waitForLockWaiters(t, a, app, 1, "b's read waits for a's change of the lease")
	releaseHeld()
	for _, done := range []<-chan error{first, second} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	err := a.View(ctx, func(tx climate.Tx) error {
		got, err := tx.GetLease(ctx, "l")
		if err != nil {
			return err
		}
		if got.Status != climate.LeaseStarting || got.Event(climate.EventEndLease).Status != climate.EventDone {
			t.Errorf("the lease after both: %s, end event %s; want STARTING and DONE", got.Status, got.Event(climate.EventEndLease).Status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A claim of a lease's due event waits for a writer holding the lease, so the writer
// cannot write back the event as it read it, unclaimed, over the claim: the claim waits
// from the writer's read to its commit.
func TestClaimsWaitForTheLeasesWriter(t *testing.T) {
	dsn := TestDSN(t)
	app := "climate-claim-" + randomHex(4)
	a, b := open(t, dsn), open(t, dsn+"&application_name="+app)
	insert(t, a, testLease("l", t0, t0.Add(time.Hour), "h1"))
	releaseHeld, writer := holdUpdate(t, a, func(tx climate.Tx) error {
		l, err := tx.GetLease(ctx, "l")
		if err != nil {
			return err
		}
		l.Name = "renamed"
		return tx.UpdateLease(ctx, l)
	})
	claimed := make(chan []climate.Event, 1)
	go func() {
		var got []climate.Event
		err := b.Update(ctx, func(tx climate.Tx) (err error) {
			got, err = tx.ClaimDueEvents(ctx, "b", t0, t0.Add(time.Minute), 10)
			return err
		})
		if err != nil {
			t.Error(err)
		}
		claimed <- got
	}()
	waitForLockWaiters(t, a, app, 1, "b's claim waits for a's writer of the lease")
	releaseHeld()
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
	if got := <-claimed; len(got) != 1 || got[0].ID != "l-start" {
		t.Fatalf("claimed %+v, want l-start", got)
	}
	err := a.View(ctx, func(tx climate.Tx) error {
		l, err := tx.GetLease(ctx, "l")
		if err == nil && (l.Name != "renamed" || l.Events[0].Status != climate.EventInProgress || l.Events[0].ClaimedBy != "b") {
			t.Errorf("the lease after both: %q, start event %s by %q; want renamed, IN_PROGRESS by b", l.Name, l.Events[0].Status, l.Events[0].ClaimedBy)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// holdUpdate runs fn in an Update of s and keeps that transaction open, its locks held,
// until release is called (at the latest when the test ends); done receives the Update's
// result. It returns once fn has run.
func holdUpdate(t *testing.T, s *Store, fn func(climate.Tx) error) (release func(), done <-chan error) {
	t.Helper()
	holding, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release) // a failed check must not leave the held writer waiting
	result := make(chan error, 1)
	go func() {
		result <- s.Update(ctx, func(tx climate.Tx) error {
			err := fn(tx)
			close(holding)
			if err != nil {
				return err
			}
			<-held
			return nil
		})
	}()
	<-holding
	return release, result
}
