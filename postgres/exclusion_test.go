package postgres

import (
	"errors"
	"sync"
	"testing"
	"time"

	"climate"
)

// Writers that skip the manager's re-check and book one host over overlapping windows: the
// exclusion constraint lets exactly one commit and turns the other into ErrConflictRetry.
func TestExclusionConstraintRejectsOverlap(t *testing.T) {
	s := open(t, TestDSN(t))
	var wg sync.WaitGroup
	ready := make(chan struct{})
	errs := make([]error, 2)
	for i, l := range []*climate.Lease{
		testLease("a", t0, t0.Add(2*time.Hour), "h1"),
		testLease("b", t0.Add(time.Hour), t0.Add(3*time.Hour), "h1"),
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			errs[i] = s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, l) })
		}()
	}
	close(ready)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, climate.ErrConflictRetry) || climate.ErrorCode(err) != climate.CodeConflict:
			t.Errorf("writer %d: %v (code %s); want ErrConflictRetry", i, err, climate.ErrorCode(err))
		}
	}
	if ok != 1 {
		t.Fatalf("%d writers committed; want exactly 1 (errors: %v)", ok, errs)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM allocations WHERE resource_id = 'h1'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("allocations of h1: %d, %v; want 1", n, err)
	}

	// Nor can raw SQL double-book, and back-to-back windows are no overlap.
	if _, err := s.pool.Exec(ctx, `INSERT INTO leases (id, name, user_id, project_id, start_at, end_at, status, created_at)
		VALUES ('raw', 'raw', 'u', 'p', $1, $2, 'PENDING', $1)`, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO reservations (id, lease_id, resource_type, status, min_count, max_count, hypervisor_properties, resource_properties, before_end, created_at)
		VALUES ('raw-r', 'raw', 'physical:host', 'pending', 1, 1, '', '', '', $1)`, t0); err != nil {
		t.Fatal(err)
	}
	insertAlloc := func(id string, start, end time.Time) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO allocations (id, reservation_id, lease_id, resource_id, start_at, end_at)
			VALUES ($1, 'raw-r', 'raw', 'h1', $2, $3)`, id, start, end)
		return err
	}
	if err := insertAlloc("raw-overlap", t0.Add(30*time.Minute), t0.Add(90*time.Minute)); sqlState(err) != sqlExclusionViolation {
		t.Errorf("raw overlapping insert: %v; want SQLSTATE %s", err, sqlExclusionViolation)
	}
	// Whichever lease won holds h1 until 2h or 3h; the next slot starts where it ends.
	var end time.Time
	if err := s.pool.QueryRow(ctx, `SELECT end_at FROM allocations WHERE resource_id = 'h1'`).Scan(&end); err != nil {
		t.Fatal(err)
	}
	if err := insertAlloc("raw-after", end, end.Add(time.Hour)); err != nil {
		t.Errorf("back-to-back insert: %v; want success", err)
	}
}

// The constraint is deferred: a lease update that replaces an allocation by another of the
// same host and window (inserted before the old one is deleted) commits.
func TestExclusionConstraintIsDeferred(t *testing.T) {
	s := open(t, TestDSN(t))
	l := testLease("l", t0, t0.Add(time.Hour), "h1")
	insert(t, s, l)
	l.Reservations[0].Allocations[0].ID = "l-h1-new"
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.UpdateLease(ctx, l) }); err != nil {
		t.Fatalf("UpdateLease replacing an allocation: %v", err)
	}
	var ids []string
	err := s.View(ctx, func(tx climate.Tx) error {
		as, err := tx.ListAllocations(ctx, climate.AllocationFilter{})
		for _, a := range as {
			ids = append(ids, a.ID)
		}
		return err
	})
	if err != nil || len(ids) != 1 || ids[0] != "l-h1-new" {
		t.Errorf("allocations: %v, %v; want [l-h1-new]", ids, err)
	}
}
