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

// The log is appended to, one revision a row: it returns the changes after a revision in
// order, a changed row as its removal then its addition, and once the writer has pruned
// it, asking from below what it keeps is not ok (so a replica rebuilds instead of missing
// changes) while the revisions go on from the newest.
func TestAllocationLogAppendedAndPruned(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	defer s.Close()
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, leaseWith("l", "h1", 0)) }); err != nil {
		t.Fatal(err)
	}
	_, _, base := allocationChanges(t, s, 0)
	insertMany(t, s, "l", 6)
	changes, ok, rev := allocationChanges(t, s, base)
	if !ok || rev != base+6 || len(changes) != 6 {
		t.Fatalf("AllocationChanges(%d) at revision %d: %d changes, ok %v; want 6", base, rev, len(changes), ok)
	}
	for i, c := range changes {
		if c.Revision != base+1+int64(i) || c.Removed || c.Allocation.ID != fmt.Sprintf("l-a%d", i) || c.Allocation.End.Sub(c.Allocation.Start) != time.Hour || c.Allocation.Start.Location() != time.UTC {
			t.Errorf("change %d: %+v; want l-a%d added at revision %d, one hour, in UTC", i, c, i, base+1+int64(i))
		}
	}
	if changes, ok, _ := allocationChanges(t, s, base+4); !ok || len(changes) != 2 || changes[0].Revision != base+5 {
		t.Errorf("AllocationChanges(%d): %+v, ok %v; want the last 2", base+4, changes, ok)
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE allocations SET end_at = end_at + 1 WHERE id = 'l-a0'`); err != nil {
		t.Fatal(err)
	}
	changes, ok, rev = allocationChanges(t, s, base+6)
	if !ok || rev != base+8 || len(changes) != 2 || !changes[0].Removed || changes[1].Removed ||
		changes[0].Allocation.End.Add(time.Microsecond) != changes[1].Allocation.End {
		t.Errorf("after changing l-a0: %+v, ok %v, revision %d; want its removal, then its addition a microsecond longer, at revision %d", changes, ok, rev, base+8)
	}

	// Past logSlots revisions, the writer prunes the oldest in one of every pruneLogEvery
	// transactions; the newest logSlots stay.
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, leaseWith("m", "h2", 0)) }); err != nil {
		t.Fatal(err)
	}
	insertMany(t, s, "m", logSlots+5)
	for i := range pruneLogEvery {
		if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, leaseWith(fmt.Sprintf("e%d", i), "h2", 0)) }); err != nil {
			t.Fatal(err)
		}
	}
	var rows, oldest int64
	if err := s.r.QueryRowContext(ctx, `SELECT count(*), min(revision) FROM allocation_log`).Scan(&rows, &oldest); err != nil {
		t.Fatal(err)
	}
	_, _, rev = allocationChanges(t, s, 0)
	if rows != logSlots || oldest != rev-logSlots+1 {
		t.Errorf("allocation_log holds %d rows from revision %d at revision %d; want the newest %d", rows, oldest, rev, logSlots)
	}
	if _, ok, _ := allocationChanges(t, s, rev-logSlots-1); ok {
		t.Errorf("AllocationChanges(%d) at revision %d: ok; want not ok, the log keeps %d revisions", rev-logSlots-1, rev, logSlots)
	}
	if changes, ok, _ := allocationChanges(t, s, rev-logSlots); !ok || len(changes) != logSlots {
		t.Errorf("AllocationChanges(%d) at revision %d: %d changes, ok %v; want %d", rev-logSlots, rev, len(changes), ok, logSlots)
	}
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, leaseWith("n", "h3", 1)) }); err != nil {
		t.Fatal(err)
	}
	if changes, ok, after := allocationChanges(t, s, rev); !ok || after != rev+1 || len(changes) != 1 || changes[0].Allocation.ID != "n-a0" {
		t.Errorf("after pruning, AllocationChanges(%d): %+v, ok %v, revision %d; want n-a0's addition at revision %d", rev, changes, ok, after, rev+1)
	}

	// One pruning deletes pruneRows at most: a bulk load's log goes in steps.
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, leaseWith("p", "h4", 0)) }); err != nil {
		t.Fatal(err)
	}
	insertMany(t, s, "p", logSlots-1) // the log then holds 2 × logSlots: two prunings
	countRows := func() (n int64) {
		if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM allocation_log`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := countRows()
	s.pruneLog(ctx)
	if got := countRows(); got != before-pruneRows {
		t.Errorf("one pruning of %d rows left %d, want %d fewer", before, got, pruneRows)
	}
	s.pruneLog(ctx)
	if got := countRows(); got != logSlots {
		t.Errorf("a second pruning left %d rows, want the newest %d", got, logSlots)
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

// Revisions reads both counters in one statement: the same as reading each, after an
// inventory change and after an allocation change.
func TestRevisionsReadTogether(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "climate.db"))
	defer s.Close()
	check := func(step string) {
		t.Helper()
		err := s.Update(ctx, func(tx climate.Tx) error {
			alloc, inv, err := tx.(climate.RevisionsReader).Revisions(ctx)
			if err != nil {
				return err
			}
			wantAlloc, err := tx.AllocationRevision(ctx)
			if err != nil {
				return err
			}
			wantInv, err := tx.InventoryRevision(ctx)
			if err != nil {
				return err
			}
			if alloc != wantAlloc || inv != wantInv {
				t.Errorf("%s: Revisions %d and %d, want %d and %d", step, alloc, inv, wantAlloc, wantInv)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check("empty")
	h := &climate.Host{ID: "h1", HypervisorHostname: "h1", CreatedAt: time.Now()}
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertHost(ctx, h) }); err != nil {
		t.Fatal(err)
	}
	check("after a host")
	start := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.Update(ctx, func(tx climate.Tx) error {
		return tx.InsertLease(ctx, hostLease("l1", []string{"h1"}, start, start.Add(time.Hour)))
	}); err != nil {
		t.Fatal(err)
	}
	check("after a lease")
}
