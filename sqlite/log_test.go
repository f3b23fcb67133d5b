package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"climate"
)

func allocationChanges(t *testing.T, s *Store, since int64) (changes []climate.AllocationChange, ok bool, rev int64) {
	t.Helper()
	ctx := context.Background()
	err := s.View(ctx, func(tx climate.Tx) (err error) {
		if rev, err = tx.AllocationRevision(ctx); err != nil {
			return err
		}
		changes, ok, err = tx.(climate.AllocationLog).AllocationChanges(ctx, since)
		return err
	})
	if err != nil {
		t.Fatalf("AllocationChanges(%d): %v", since, err)
	}
	return changes, ok, rev
}

// leaseWith returns a lease with n one-hour allocations on host h.
func leaseWith(id, h string, n int) *climate.Lease {
	start := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	l := &climate.Lease{ID: id, Start: start, End: start.Add(time.Duration(n) * time.Hour), CreatedAt: start,
		Reservations: []climate.Reservation{{ID: id + "-r", LeaseID: id}}}
	for i := range n {
		s := start.Add(time.Duration(i) * time.Hour)
		l.Reservations[0].Allocations = append(l.Reservations[0].Allocations, climate.Allocation{
			ID: fmt.Sprintf("%s-a%d", id, i), ReservationID: id + "-r", LeaseID: id, ResourceID: h, Start: s, End: s.Add(time.Hour)})
	}
	return l
}

// insertMany gives lease l (stored, with reservation l-r) n more allocations in one
// statement: thousands of InsertLease calls are slow under the race detector.
func insertMany(t *testing.T, s *Store, l string, n int) {
	t.Helper()
	_, err := s.w.ExecContext(context.Background(), `WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n + 1 < ?)
		INSERT INTO allocations (id, reservation_id, lease_id, resource_id, start_at, end_at)
		SELECT ? || '-a' || n, ? || '-r', ?, 'h1', n * 3600000000, (n + 1) * 3600000000 FROM i`, n, l, l, l)
	if err != nil {
		t.Fatal(err)
	}
}

// The log keeps the newest allocation_log_keep revisions (10,000; 100 here) and up to 10%
// more; asking from below what it keeps is not ok, so a replica rebuilds instead of
// missing changes.
func TestAllocationLogPruned(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	defer s.Close()
	var keep int64
	if err := s.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'allocation_log_keep'`).Scan(&keep); err != nil || keep != 10000 {
		t.Fatalf("allocation_log_keep %d, %v; want 10,000 by default", keep, err)
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE meta SET value = 100 WHERE key = 'allocation_log_keep'`); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, leaseWith("l", "h1", 0)) }); err != nil {
		t.Fatal(err)
	}
	const n = 125 // one revision per allocation: pruning ran at 10, 20, …, 120
	insertMany(t, s, "l", n)
	const floor = 120 - 100
	if _, ok, rev := allocationChanges(t, s, 0); ok || rev != n {
		t.Errorf("AllocationChanges(0) at revision %d: ok %v; want revision %d, not ok: the start was pruned", rev, ok, n)
	}
	if _, ok, _ := allocationChanges(t, s, floor-1); ok {
		t.Errorf("AllocationChanges(%d): ok; want not ok, revision %d was pruned", floor-1, floor)
	}
	changes, ok, _ := allocationChanges(t, s, floor)
	if !ok || len(changes) != n-floor || changes[0].Revision != floor+1 || changes[len(changes)-1].Revision != n {
		t.Fatalf("AllocationChanges(%d): %d changes, ok %v; want revisions %d to %d, ok", floor, len(changes), ok, floor+1, n)
	}
	if a := changes[len(changes)-1].Allocation; a.ID != fmt.Sprintf("l-a%d", n-1) || a.End.Sub(a.Start) != time.Hour || a.Start.Location() != time.UTC {
		t.Errorf("last change %+v, want the last allocation inserted, one hour, in UTC", a)
	}
	var rows int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM allocation_log`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != n-floor {
		t.Errorf("allocation_log holds %d rows, want %d", rows, n-floor)
	}
	// Deleting them all moves the revision to 2n = 250 and prunes again at 250.
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.DeleteLease(ctx, "l") }); err != nil {
		t.Fatal(err)
	}
	if _, ok, rev := allocationChanges(t, s, 2*n-100-1); ok || rev != 2*n {
		t.Errorf("after deleting: AllocationChanges(%d) at revision %d: ok %v; want revision %d, not ok", 2*n-100-1, rev, ok, 2*n)
	}
	changes, ok, _ = allocationChanges(t, s, 2*n-100)
	if !ok || len(changes) != 100 || !changes[0].Removed || !changes[99].Removed {
		t.Errorf("after deleting: AllocationChanges(%d): %d changes, ok %v; want 100 removals", 2*n-100, len(changes), ok)
	}
}

// A database that had allocations before the log existed cannot replay them: its log
// starts at the revision the migration found.
func TestAllocationLogStartsAtMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	old, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		t.Fatal(err)
	}
	pre := &Store{w: old, r: old}
	for v, name := range []string{"0001_init.sql", "0002_allocation_revision.sql"} {
		body, err := migrations.ReadFile("migrations/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		if err := pre.apply(ctx, v+1, string(body)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if err := pre.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, leaseWith("before", "h1", 3)) }); err != nil {
		t.Fatal(err)
	}
	old.Close()

	s := open(t, path) // applies 0003
	defer s.Close()
	if _, ok, rev := allocationChanges(t, s, 0); ok || rev != 3 {
		t.Errorf("AllocationChanges(0) at revision %d: ok; want not ok, revisions 1-3 were never logged", rev)
	}
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.DeleteLease(ctx, "before") }); err != nil {
		t.Fatal(err)
	}
	changes, ok, _ := allocationChanges(t, s, 3)
	if !ok || len(changes) != 3 || changes[0].Revision != 4 || !changes[0].Removed {
		t.Errorf("AllocationChanges(3): %+v, ok %v; want the 3 removals from revision 4", changes, ok)
	}
}
