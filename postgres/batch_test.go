package postgres

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"climate"
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
	for len(s.writes) < n {
		runtime.Gosched()
	}
}

// TestGroupCommitBatchWithConflicts queues requests while the writer is busy, so they
// commit as one batch, and checks that exactly the right ones succeed: of several
// requests that each book host h1 over the same window after checking that nobody holds
// it (the manager's re-check), one wins and the others see its allocation; requests that
// fail after writing, fail in a statement (the transaction aborted until rolled back to
// their savepoint) or panic leave nothing behind; the requests around them are kept.
func TestGroupCommitBatchWithConflicts(t *testing.T) {
	s := oneWriter(t)
	end := t0.Add(time.Hour)
	errTaken := errors.New("h1 is taken")
	book := func(id, host string) func(climate.Tx) error { // check, then insert
		return func(tx climate.Tx) error {
			others, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{host}, From: t0, To: end})
			if err != nil {
				return err
			}
			if len(others) > 0 {
				return errTaken
			}
			return tx.InsertLease(ctx, testLease(id, t0, end, host))
		}
	}
	errLate := errors.New("failed after writing")
	requests := map[string]func(climate.Tx) error{
		"late-failure": func(tx climate.Tx) error {
			if err := tx.InsertLease(ctx, testLease("late", t0, end, "h2")); err != nil {
				return err
			}
			_, err := tx.GetLease(ctx, "late") // sends the held rows
			return errors.Join(err, errLate)
		},
		"bad-statement": func(ctl climate.Tx) error {
			if err := ctl.InsertLease(ctx, testLease("bad", t0, end, "h3")); err != nil {
				return err
			}
			_, err := ctl.(*tx).q.Exec(ctx, "SELECT 1 / 0")
			return err
		},
		"panic": func(tx climate.Tx) error {
			if err := tx.InsertLease(ctx, testLease("panic", t0, end, "h5")); err != nil {
				return err
			}
			panic("boom")
		},
		"other-host": book("other", "h4"),
	}
	const bookers = 6
	for i := range bookers {
		requests[fmt.Sprintf("booker-%d", i)] = book(fmt.Sprintf("b%d", i), "h1")
	}

	release, first := holdWriter(t, s)
	type outcome struct {
		name string
		err  error
		pan  any
	}
	outcomes := make(chan outcome, len(requests))
	var wg sync.WaitGroup
	for name, fn := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if v := recover(); v != nil {
					outcomes <- outcome{name: name, pan: v}
				}
			}()
			outcomes <- outcome{name: name, err: s.Update(ctx, fn)}
		}()
	}
	waitQueued(s, len(requests))
	batchesBefore := s.batches.Load()
	close(release)
	wg.Wait()
	close(outcomes)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := s.batches.Load() - batchesBefore; got != 2 { // the held one, then all the queued ones
		t.Errorf("the queued requests committed in %d transactions, want 1", got-1)
	}

	won := 0
	for o := range outcomes {
		switch {
		case o.name == "panic":
			if o.pan != "boom" {
				t.Errorf("panic: Update returned %v, panicked with %v; want the panic passed on", o.err, o.pan)
			}
		case o.pan != nil:
			t.Errorf("%s panicked: %v", o.name, o.pan)
		case o.name == "late-failure":
			if !errors.Is(o.err, errLate) {
				t.Errorf("late-failure: %v", o.err)
			}
		case o.name == "bad-statement":
			if sqlState(o.err) != "22012" {
				t.Errorf("bad-statement: %v, want division by zero", o.err)
			}
		case o.name == "other-host":
			if o.err != nil {
				t.Errorf("other-host: %v", o.err)
			}
		case o.err == nil:
			won++
		case !errors.Is(o.err, errTaken):
			t.Errorf("%s: %v", o.name, o.err)
		}
	}
	if won != 1 {
		t.Errorf("%d requests booked h1 over the same hour, want exactly 1", won)
	}
	var ids []string
	if err := s.View(ctx, func(tx climate.Tx) error {
		leases, err := tx.ListLeases(ctx, climate.LeaseFilter{})
		for _, l := range leases {
			ids = append(ids, l.ID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || !(ids[0] == "other" || ids[1] == "other") {
		t.Errorf("stored leases %v, want one booker's and other", ids)
	}
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
