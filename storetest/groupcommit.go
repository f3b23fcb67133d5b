package storetest

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

// Queue is what GroupCommit sees of a store's group commit (package groupcommit).
type Queue struct {
	// Waiting returns how many Updates wait for a writer; Writes how many writes the
	// writers committed, and in how many transactions (the store's Writes).
	Waiting func() int
	Writes  func() (writes, transactions int64)
	// FailStatement, when set, runs a statement that fails in tx and returns its error:
	// on PostgreSQL the transaction is then aborted until rolled back to the request's
	// savepoint.
	FailStatement func(tx climate.Tx) error
}

// GroupCommit queues requests while the store's only writer is busy, so they commit as
// one batch, and checks that exactly the right ones succeed: of several requests that
// each book host h1 over the same window after checking that nobody holds it (the
// manager's re-check), one wins and the others see its allocation; requests that fail
// after writing, fail in a statement or panic leave nothing behind; the requests around
// them are kept.
func GroupCommit(t *testing.T, s climate.Store, q Queue) {
	ctx := context.Background()
	start := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	lease := func(id, host string) *climate.Lease {
		return &climate.Lease{ID: id, Name: id, UserID: "u", ProjectID: "p", Start: start, End: end, Status: climate.LeasePending, CreatedAt: start,
			Reservations: []climate.Reservation{{ID: id + "-r", ResourceType: climate.ResourceTypeHost, Status: climate.ReservationPending, Min: 1, Max: 1, CreatedAt: start,
				Allocations: []climate.Allocation{{ID: id + "-a", ResourceID: host, Start: start, End: end}}}}}
	}
	errTaken := errors.New("h1 is taken")
	book := func(id, host string) func(climate.Tx) error { // check, then insert
		return func(tx climate.Tx) error {
			others, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{host}, From: start, To: end})
			if err != nil {
				return err
			}
			if len(others) > 0 {
				return errTaken
			}
			return tx.InsertLease(ctx, lease(id, host))
		}
	}
	errLate := errors.New("failed after writing")
	requests := map[string]func(climate.Tx) error{
		"late-failure": func(tx climate.Tx) error {
			if err := tx.InsertLease(ctx, lease("late", "h2")); err != nil {
				return err
			}
			_, err := tx.GetLease(ctx, "late") // a statement after the writes (PostgreSQL holds them until one)
			return errors.Join(err, errLate)
		},
		"panic": func(tx climate.Tx) error {
			if err := tx.InsertLease(ctx, lease("panic", "h3")); err != nil {
				return err
			}
			panic("boom")
		},
		"other-host": book("other", "h4"),
	}
	var errStatement error
	if q.FailStatement != nil {
		requests["bad-statement"] = func(tx climate.Tx) error {
			if err := tx.InsertLease(ctx, lease("bad", "h5")); err != nil {
				return err
			}
			errStatement = q.FailStatement(tx)
			return errStatement
		}
	}
	const bookers = 6
	for i := range bookers {
		requests[fmt.Sprintf("booker-%d", i)] = book(fmt.Sprintf("b%d", i), "h1")
	}

	// Hold the writer in a first batch until the others are queued.
	release, held := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.Update(ctx, func(tx climate.Tx) error { close(held); <-release; return nil })
	}()
	<-held
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
	for q.Waiting() < len(requests) { // queued behind the held batch
		runtime.Gosched()
	}
	writesBefore, batchesBefore := q.Writes()
	close(release)
	wg.Wait()
	close(outcomes)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	writes, batches := q.Writes()
	if got := batches - batchesBefore; got != 2 { // the held one, then all the queued ones
		t.Errorf("the queued requests committed in %d transactions, want 1", got-1)
	}
	if got := writes - writesBefore; got != 3 { // the held one, the booker that won, other-host
		t.Errorf("%d writes counted, want 3: the failed requests are not writes", got)
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
			if errStatement == nil || o.err != errStatement {
				t.Errorf("bad-statement: %v, want its statement's error %v", o.err, errStatement)
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
