package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"climate"
)

// Two Stores on one file stand for two processes: check-then-insert must still be atomic
// (with deferred transactions instead of BEGIN IMMEDIATE this fails with SQLITE_BUSY).
func TestTwoProcessesSerializeWriters(t *testing.T) {
	for round := 0; round < 5; round++ { // one round only sometimes races
		twoStoresRace(t)
	}
}

func twoStoresRace(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	a := open(t, path)
	defer a.Close()
	b := open(t, path)
	defer b.Close()
	start := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	var wg sync.WaitGroup
	errs := make([]error, 16)
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
				got, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{"X"}, From: start, To: end})
				if err != nil {
					return err
				}
				if len(got) > 0 {
					return climate.ErrConflictRetry
				}
				id := fmt.Sprint("l", i)
				return tx.InsertLease(ctx, &climate.Lease{ID: id, Start: start, End: end, CreatedAt: start,
					Reservations: []climate.Reservation{{ID: id + "r", LeaseID: id, Allocations: []climate.Allocation{{ID: id + "a", ReservationID: id + "r", LeaseID: id, ResourceID: "X", Start: start, End: end}}}}})
			})
		}()
	}
	close(ready)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		if err == nil {
			ok++
		} else if !errors.Is(err, climate.ErrConflictRetry) {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	if ok != 1 {
		t.Errorf("%d inserts, want 1", ok)
	}
}
