package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"climate"
)

// TestGroupCommitBatchWithConflicts queues requests while the writer is busy, so they
// commit as one batch, and checks that exactly the right ones succeed: of several
// requests that each book host h1 over the same window after checking that nobody holds
// it (the manager's re-check), the first in the batch wins and the others see its
// allocation; requests that fail after writing, or panic, leave nothing behind; the
// requests around them are kept.
func TestGroupCommitBatchWithConflicts(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "climate.db"))
	defer s.Close()
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

	// Hold the writer in a first batch until the others are queued.
	release, held := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.Update(ctx, func(tx climate.Tx) error { close(held); <-release; return nil })
	}()
	<-held
	const bookers = 6
	type outcome struct {
		name string
		err  error
		pan  any
	}
	requests := map[string]func(climate.Tx) error{
		"late-failure": func(tx climate.Tx) error {
			if err := tx.InsertLease(ctx, lease("late", "h2")); err != nil {
				return err
			}
			return errLate
		},
		"panic": func(tx climate.Tx) error {
			if err := tx.InsertLease(ctx, lease("panic", "h3")); err != nil {
				return err
			}
			panic("boom")
		},
		"other-host": book("other", "h4"),
	}
	for i := range bookers {
		requests[fmt.Sprintf("booker-%d", i)] = book(fmt.Sprintf("b%d", i), "h1")
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
	for len(s.writes) < len(requests) { // queued behind the held batch
		runtime.Gosched()
	}
	batchesBefore := s.batches
	close(release)
	wg.Wait()
	close(outcomes)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := s.batches - batchesBefore; got != 2 { // the held one, then all the queued ones
		t.Errorf("the queued requests committed in %d batches, want 1", got-1)
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
	var leases []climate.Lease
	if err := s.View(ctx, func(tx climate.Tx) error {
		var err error
		leases, err = tx.ListLeases(ctx, climate.LeaseFilter{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range leases {
		ids = append(ids, l.ID)
	}
	if len(ids) != 2 || ids[0] == "late" || ids[1] == "late" || ids[0] == "panic" || ids[1] == "panic" {
		t.Errorf("stored leases %v, want one booker's and other", ids)
	}
}

// TestUpdateAfterClose: an Update on a closed store fails at once, not for ever.
func TestUpdateAfterClose(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "climate.db"))
	s.Close()
	if err := s.Update(context.Background(), func(climate.Tx) error { return nil }); climate.ErrorCode(err) != climate.CodeInternal {
		t.Errorf("Update after Close: %v", err)
	}
}

// TestCloseTwice: closing a store again is harmless, as database/sql's Close is.
func TestCloseTwice(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "climate.db"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.Close()
}
