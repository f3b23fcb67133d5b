package postgres

import (
	"runtime"
	"testing"
	"time"

	"climate"
	"climate/storetest"
)

// oneWriter opens a store with a single writer goroutine (five connections, four kept
// for reads), so requests queued behind a held batch commit as one.
func oneWriter(t *testing.T) *Store {
	t.Helper()
	return open(t, TestDSN(t)+"&pool_max_conns=5")
}

// holdWriter keeps s's writer in a batch of its own until release is closed; first
// receives that batch's outcome.
func holdWriter(t *testing.T, s *Store) (release chan struct{}, first chan error) {
	t.Helper()
	release, held, first := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		first <- s.Update(ctx, func(tx climate.Tx) error { close(held); <-release; return nil })
	}()
	<-held
	return release, first
}

// waitQueued returns once n requests wait for the writer.
func waitQueued(s *Store, n int) {
	for s.writes.Waiting() < n {
		runtime.Gosched()
	}
}

// TestGroupCommitBatchWithConflicts: storetest.GroupCommit on one writer, with a
// request whose statement fails, aborting the transaction until it is rolled back to
// the request's savepoint.
func TestGroupCommitBatchWithConflicts(t *testing.T) {
	s := oneWriter(t)
	storetest.GroupCommit(t, s, storetest.Queue{Waiting: s.writes.Waiting, Writes: s.Writes,
		FailStatement: func(ctl climate.Tx) error {
			_, err := ctl.(*tx).q.Exec(ctx, "SELECT 1 / 0")
			return err
		}})
}

// TestGroupCommitLaterRequestsYieldLocks: a batch's later request does not wait long for
// a lock (two batches could wait for each other, each holding its earlier requests'
// locks): it gives up its place, the batch commits without it, and it runs first in the
// next batch, where it waits as a lone transaction would.
func TestGroupCommitLaterRequestsYieldLocks(t *testing.T) {
	s := oneWriter(t)
	other, err := s.pool.Acquire(ctx) // holds the lock the second request wants
	if err != nil {
		t.Fatal(err)
	}
	defer func() { // before the store closes, whatever failed
		other.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
		other.Release()
	}()
	if _, err := other.Exec(ctx, `SELECT pg_advisory_lock(42)`); err != nil {
		t.Fatal(err)
	}

	release, first := holdWriter(t, s)
	plain, locking := make(chan error, 1), make(chan error, 1)
	go func() {
		plain <- s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, testLease("plain", t0, t0.Add(time.Hour), "h1")) })
	}()
	waitQueued(s, 1)
	go func() {
		locking <- s.Update(ctx, func(ctl climate.Tx) error {
			if _, err := ctl.(*tx).q.Exec(ctx, `SELECT pg_advisory_xact_lock(42)`); err != nil {
				return err
			}
			return ctl.InsertLease(ctx, testLease("locking", t0, t0.Add(time.Hour), "h2"))
		})
	}()
	waitQueued(s, 2)
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-plain: // committed while the lock is still held elsewhere
		if err != nil {
			t.Fatalf("the first request of the batch: %v", err)
		}
	case err := <-locking:
		t.Fatalf("the request waiting for a lock returned first: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the batch waited for its later request's lock")
	}
	if _, err := other.Exec(ctx, `SELECT pg_advisory_unlock(42)`); err != nil {
		t.Fatal(err)
	}
	if err := <-locking; err != nil {
		t.Errorf("the request that gave up its place: %v", err)
	}
	for _, id := range []string{"plain", "locking"} {
		if err := s.View(ctx, func(tx climate.Tx) error { _, err := tx.GetLease(ctx, id); return err }); err != nil {
			t.Errorf("lease %s: %v", id, err)
		}
	}
}

// TestUpdateAfterClose: an Update on a closed store fails at once, not for ever; closing
// again is harmless.
func TestUpdateAfterClose(t *testing.T) {
	s, err := Open(ctx, TestDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Update(ctx, func(climate.Tx) error { return nil }); climate.ErrorCode(err) != climate.CodeInternal {
		t.Errorf("Update after Close: %v", err)
	}
	s.Close()
}

// TestGroupCommitBrokenBatchRunsAlone: a request's held write that fails does so in a
// later round trip, here the next request's, so the batch cannot tell whose it was:
// it is rolled back whole, and each request runs again alone. The others are kept, and
// the failing one gets its own error.
func TestGroupCommitBrokenBatchRunsAlone(t *testing.T) {
	s := oneWriter(t)
	end := t0.Add(time.Hour)
	insert(t, s, testLease("taken", t0, end, "h1"))
	release, first := holdWriter(t, s)
	names := []string{"a", "taken", "b"}
	errs := make([]chan error, len(names))
	for i, id := range names {
		errs[i] = make(chan error, 1)
		go func() {
			errs[i] <- s.Update(ctx, func(tx climate.Tx) error {
				if err := tx.InsertLease(ctx, testLease(id, t0, end, "h-"+id)); err != nil || id == "taken" {
					return err // taken's rows are held, to go with b's first statement
				}
				_, err := tx.GetLease(ctx, id) // sends the held rows
				return err
			})
		}()
		waitQueued(s, i+1)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, id := range names {
		err := <-errs[i]
		switch {
		case id == "taken" && climate.ErrorCode(err) != climate.CodeConflict:
			t.Errorf("the lease whose id is taken: %v, want a conflict", err)
		case id != "taken" && err != nil:
			t.Errorf("lease %s: %v", id, err)
		}
	}
	for _, id := range []string{"a", "b"} {
		if err := s.View(ctx, func(tx climate.Tx) error { _, err := tx.GetLease(ctx, id); return err }); err != nil {
			t.Errorf("lease %s: %v", id, err)
		}
	}
}
