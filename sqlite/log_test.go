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

// setRevision moves the allocation revision as if many changes had been made (and logged).
func setRevision(t *testing.T, s *Store, rev int64) {
	t.Helper()
	if _, err := s.w.ExecContext(context.Background(), `UPDATE meta SET value = ? WHERE key = 'allocation_revision'`, rev); err != nil {
		t.Fatal(err)
	}
}

// The log is a ring of logSlots revisions: it reads across the ring's end, asking from
// below what it holds is not ok (so a replica rebuilds instead of missing changes), and a
// slot's older half left by a changed row is not returned as a newer change.
func TestAllocationLogRing(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	defer s.Close()
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, leaseWith("l", "h1", 0)) }); err != nil {
		t.Fatal(err)
	}
	base := int64(2*logSlots - 3)
	setRevision(t, s, base)
	insertMany(t, s, "l", 6) // revisions base+1 … base+6, in slots logSlots-2, logSlots-1, 0, 1, 2, 3
	changes, ok, rev := allocationChanges(t, s, base)
	if !ok || rev != base+6 || len(changes) != 6 {
		t.Fatalf("AllocationChanges(%d) at revision %d: %d changes, ok %v; want 6 across the ring's end", base, rev, len(changes), ok)
	}
	for i, c := range changes {
		if c.Revision != base+1+int64(i) || c.Removed || c.Allocation.ID != fmt.Sprintf("l-a%d", i) || c.Allocation.End.Sub(c.Allocation.Start) != time.Hour || c.Allocation.Start.Location() != time.UTC {
			t.Errorf("change %d: %+v; want l-a%d added at revision %d, one hour, in UTC", i, c, i, base+1+int64(i))
		}
	}
	if changes, ok, _ := allocationChanges(t, s, base+4); !ok || len(changes) != 2 || changes[0].Revision != base+5 {
		t.Errorf("AllocationChanges(%d): %+v, ok %v; want the last 2", base+4, changes, ok)
	}
	if _, ok, _ := allocationChanges(t, s, rev-logSlots-1); ok {
		t.Errorf("AllocationChanges(%d) at revision %d: ok; want not ok, the ring holds %d revisions", rev-logSlots-1, rev, logSlots)
	}
	if _, ok, _ := allocationChanges(t, s, rev-logSlots); !ok {
		t.Errorf("AllocationChanges(%d) at revision %d: not ok; want ok, the ring holds %d revisions", rev-logSlots, rev, logSlots)
	}

	// A changed row fills both halves of slot base+7; one ring later an insertion replaces
	// only the added half, and the removal half, a ring old, must not come back.
	if _, err := s.w.ExecContext(ctx, `UPDATE allocations SET end_at = end_at + 1 WHERE id = 'l-a0'`); err != nil {
		t.Fatal(err)
	}
	setRevision(t, s, base+7+logSlots-1)
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, leaseWith("m", "h2", 1)) }); err != nil {
		t.Fatal(err)
	}
	changes, ok, rev = allocationChanges(t, s, base+7)
	if !ok || rev != base+7+logSlots || len(changes) != 1 || changes[0].Removed || changes[0].Allocation.ID != "m-a0" {
		t.Errorf("AllocationChanges(%d) at revision %d: %+v, ok %v; want only m-a0's addition", base+7, rev, changes, ok)
	}
	var rows int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM allocation_log`).Scan(&rows); err != nil || rows != 8 {
		t.Errorf("allocation_log holds %d rows (%v), want 8: 6 insertions, a change in 2 halves, one replaced", rows, err)
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
	// The store's code writes today's schema, so the lease of that time is written by hand:
	// three allocations, revisions 1-3.
	if _, err := old.ExecContext(ctx, `INSERT INTO leases (id, name, user_id, project_id, trust_id, start_at, end_at, status, degraded, created_at, updated_at)
		VALUES ('before', '', '', '', '', 0, 10800000000, '', 0, 0, NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := old.ExecContext(ctx, `INSERT INTO reservations (id, lease_id, resource_type, status, min_count, max_count,
		hypervisor_properties, resource_properties, before_end, missing_resources, resources_changed, created_at, updated_at)
		VALUES ('before-r', 'before', '', '', 0, 0, '', '', '', 0, 0, 0, NULL)`); err != nil {
		t.Fatal(err)
	}
	insertMany(t, pre, "before", 3)
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
