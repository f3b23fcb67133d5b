package postgres

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

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
	// An allocation names its reservation's lease (one foreign key on the pair), not just
	// some lease.
	if _, err := s.pool.Exec(ctx, `INSERT INTO leases (id, name, user_id, project_id, start_at, end_at, status, created_at)
		VALUES ('raw2', 'raw2', 'u', 'p', $1, $2, 'PENDING', $1)`, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO allocations (id, reservation_id, lease_id, resource_id, start_at, end_at)
		VALUES ('raw-other-lease', 'raw-r', 'raw2', 'h9', $1, $2)`, t0, t0.Add(time.Hour))
	if sqlState(err) != "23503" {
		t.Errorf("an allocation of reservation raw-r naming lease raw2: %v; want a foreign key violation (SQLSTATE 23503)", err)
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

// Slot allocations (instance slots on a shared host) may overlap each other: their
// capacity is the manager's re-check. A whole-resource allocation may overlap neither a
// slot allocation of its resource nor another whole one; both are refused at commit.
func TestExclusionConstraintSlots(t *testing.T) {
	s := open(t, TestDSN(t))
	size := climate.Size{VCPUs: 2, MemoryMB: 2048, DiskGB: 20}
	slotLease := func(id string, start, end time.Time, slots int, hosts ...string) *climate.Lease {
		l := testLease(id, start, end, hosts...)
		r := &l.Reservations[0]
		r.ResourceType, r.Amount, r.Size = "virtual:instance", slots*len(hosts), size
		for i := range r.Allocations {
			r.Allocations[i].Slots, r.Allocations[i].Size = slots, size
		}
		return l
	}
	// refused writes l and wants the write accepted by InsertLease or UpdateLease (the
	// constraints are deferred) and refused at commit by constraint, as a conflict to
	// re-plan.
	refused := func(what string, l *climate.Lease, isUpdate bool, constraint string) {
		t.Helper()
		wrote := false
		err := s.Update(ctx, func(tx climate.Tx) error {
			var err error
			if isUpdate {
				err = tx.UpdateLease(ctx, l)
			} else {
				err = tx.InsertLease(ctx, l)
			}
			wrote = err == nil
			return err
		})
		if !wrote {
			t.Errorf("%s: the write itself failed (%v); want it refused only at commit", what, err)
		}
		var pe *pgconn.PgError
		if !errors.Is(err, climate.ErrConflictRetry) || climate.ErrorCode(err) != climate.CodeConflict ||
			!errors.As(err, &pe) || pe.Code != sqlExclusionViolation || pe.ConstraintName != constraint {
			t.Errorf("%s: %v (code %s); want ErrConflictRetry from %s", what, err, climate.ErrorCode(err), constraint)
		}
	}
	allocs := func(host string) []string {
		t.Helper()
		var ids []string
		err := s.View(ctx, func(tx climate.Tx) error {
			as, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{host}})
			for _, a := range as {
				ids = append(ids, a.ID)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}

	// Overlapping slot allocations of h1 commit, from separate transactions and from one.
	insert(t, s, slotLease("s1", t0, t0.Add(2*time.Hour), 2, "h1"))
	insert(t, s, slotLease("s2", t0.Add(time.Hour), t0.Add(3*time.Hour), 1, "h1"),
		slotLease("s3", t0.Add(30*time.Minute), t0.Add(90*time.Minute), 3, "h1"))
	if got := allocs("h1"); len(got) != 3 {
		t.Fatalf("slot allocations of h1: %v; want s1, s2, s3", got)
	}

	// A whole-resource allocation overlapping them is refused, whichever comes first.
	refused("whole over slots", testLease("w1", t0.Add(2*time.Hour), t0.Add(4*time.Hour), "h1"), false, "allocations_no_double_booking")
	insert(t, s, testLease("w2", t0.Add(3*time.Hour), t0.Add(4*time.Hour), "h1")) // back to back with s2
	refused("slots over whole", slotLease("s4", t0.Add(150*time.Minute), t0.Add(200*time.Minute), 1, "h1"), false, "allocations_no_double_booking")
	// Turning a slot allocation into a whole one (an update) is refused too.
	s2 := slotLease("s2", t0.Add(time.Hour), t0.Add(3*time.Hour), 1, "h1")
	s2.Reservations[0].Allocations[0].Slots = 0
	refused("slots made whole", s2, true, "allocations_no_double_booking")
	if got := allocs("h1"); len(got) != 4 {
		t.Errorf("allocations of h1: %v; want s1, s2, s3, w2", got)
	}

	// Two whole-resource allocations still may not overlap.
	insert(t, s, testLease("w3", t0, t0.Add(time.Hour), "h2"))
	refused("whole over whole", testLease("w4", t0.Add(30*time.Minute), t0.Add(2*time.Hour), "h2"), false, "allocations_no_double_booking")
	if got := allocs("h2"); len(got) != 1 || got[0] != "w3-h2" {
		t.Errorf("allocations of h2: %v; want w3's", got)
	}
}
