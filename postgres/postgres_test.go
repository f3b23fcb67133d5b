package postgres

import (
	"context"
	"testing"
	"time"

	"climate"
	"climate/storetest"
)

var ctx = context.Background()

// open opens a store on dsn and closes it when the test ends.
func open(t testing.TB, dsn string) *Store {
	t.Helper()
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Each subtest gets a fresh schema, dropped when it ends.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) climate.Store {
		s, err := Open(ctx, TestDSN(t))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s // storetest closes it
	})
}

// testLease returns a lease over [start, end) with one reservation allocating hosts and an
// UNDONE start event.
func testLease(id string, start, end time.Time, hosts ...string) *climate.Lease {
	r := climate.Reservation{ID: id + "-r", LeaseID: id, ResourceType: climate.ResourceTypeHost,
		Status: climate.ReservationPending, Min: 1, Max: len(hosts), CreatedAt: start}
	for _, h := range hosts {
		r.Allocations = append(r.Allocations, climate.Allocation{ID: id + "-" + h, ReservationID: r.ID, LeaseID: id,
			ResourceID: h, Start: start, End: end})
	}
	return &climate.Lease{ID: id, Name: id, UserID: "u", ProjectID: "p", Start: start, End: end,
		Status: climate.LeasePending, CreatedAt: start, Reservations: []climate.Reservation{r},
		Events: []climate.Event{{ID: id + "-start", LeaseID: id, Type: climate.EventStartLease, Time: start,
			Status: climate.EventUndone, CreatedAt: start}}}
}

var t0 = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

func insert(t *testing.T, s climate.Store, ls ...*climate.Lease) {
	t.Helper()
	err := s.Update(ctx, func(tx climate.Tx) error {
		for _, l := range ls {
			if err := tx.InsertLease(ctx, l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("InsertLease: %v", err)
	}
}

// PostgreSQL's text cannot hold NUL characters: that is bad input, not an internal error.
func TestNULCharactersAreInvalid(t *testing.T) {
	s := open(t, TestDSN(t))
	l := testLease("l", t0, t0.Add(time.Hour))
	l.Name = "a\x00b"
	err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, l) })
	if climate.ErrorCode(err) != climate.CodeInvalid {
		t.Errorf("InsertLease with a NUL in the name: %v (code %s); want invalid", err, climate.ErrorCode(err))
	}
}

// A write held back by the pipe (an audit entry) goes with the transaction's next
// statement: its error comes back from that statement, and nothing of the transaction
// is written. Without a next statement, COMMIT carries it, and its id is set by then.
func TestHeldWritesGoWithTheNextStatement(t *testing.T) {
	s := open(t, TestDSN(t))
	bad := &climate.AuditEntry{Time: t0, Actor: climate.AuditActorUser, Action: "lease.create", TargetType: "lease", TargetID: "l", Reason: "a\x00b"}
	var readErr error
	err := s.Update(ctx, func(tx climate.Tx) error {
		if err := tx.InsertLease(ctx, testLease("l", t0, t0.Add(time.Hour), "h1")); err != nil {
			return err
		}
		if err := tx.InsertAudit(ctx, bad); err != nil {
			t.Fatalf("InsertAudit, held back: %v", err)
		}
		_, readErr = tx.GetLease(ctx, "l")
		return readErr
	})
	if climate.ErrorCode(readErr) != climate.CodeInvalid || climate.ErrorCode(err) != climate.CodeInvalid {
		t.Errorf("the read after a held audit entry with a NUL: %v; Update: %v; want both invalid", readErr, err)
	}
	err = s.View(ctx, func(tx climate.Tx) error {
		_, err := tx.GetLease(ctx, "l")
		return err
	})
	if climate.ErrorCode(err) != climate.CodeNotFound {
		t.Errorf("the lease of the failed transaction: %v; want not found", err)
	}

	good := &climate.AuditEntry{Time: t0, Actor: climate.AuditActorUser, Action: "lease.create", TargetType: "lease", TargetID: "l"}
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertAudit(ctx, good) }); err != nil {
		t.Fatal(err)
	}
	var listed []climate.AuditEntry
	if err := s.View(ctx, func(tx climate.Tx) (err error) {
		listed, err = tx.ListAudit(ctx, climate.AuditFilter{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if good.ID == 0 || len(listed) != 1 || listed[0].ID != good.ID {
		t.Errorf("audit entry sent with COMMIT: id %d, listed %+v", good.ID, listed)
	}
}

// Vacuum vacuums and analyzes every table of the store's schema, and only those: the
// tables of another schema in the same database keep their state.
func TestVacuumAnalyzesTheSchemasTables(t *testing.T) {
	s, other := open(t, TestDSN(t)), open(t, TestDSN(t))
	notAnalyzed := func(st *Store) (n int) {
		t.Helper()
		if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_user_tables
			WHERE schemaname = $1 AND (last_vacuum IS NULL OR last_analyze IS NULL)`, st.schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := notAnalyzed(other)
	if err := s.Vacuum(ctx); err != nil {
		t.Fatalf("Vacuum: %v", err)
	}
	if n := notAnalyzed(s); n != 0 {
		t.Errorf("after Vacuum: %d tables of %s not vacuumed and analyzed; want none", n, s.schema)
	}
	if n, err := s.NotAnalyzed(ctx); err != nil || n != 0 {
		t.Errorf("after Vacuum: NotAnalyzed = %d, %v; want 0", n, err)
	}
	if n, err := other.NotAnalyzed(ctx); err != nil || n == 0 {
		t.Errorf("another schema: NotAnalyzed = %d, %v; want its tables", n, err)
	}
	if n := notAnalyzed(other); n != before || n == 0 {
		t.Errorf("another schema: %d tables not vacuumed and analyzed after, %d before; want the same, not none", n, before)
	}
}

// Autovacuum reads the server's setting.
func TestAutovacuumReadsTheSetting(t *testing.T) {
	s := open(t, TestDSN(t))
	var shown string
	if err := s.pool.QueryRow(ctx, `SHOW autovacuum`).Scan(&shown); err != nil {
		t.Fatal(err)
	}
	on, err := s.Autovacuum(ctx)
	if err != nil || on != (shown == "on") {
		t.Errorf("Autovacuum = %v, %v; SHOW autovacuum says %q", on, err, shown)
	}
}
