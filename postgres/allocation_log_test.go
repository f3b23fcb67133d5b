package postgres

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"climate"
)

// changes reads the allocation log after since, and the revision, in one snapshot.
func changes(t *testing.T, s *Store, since int64) ([]climate.AllocationChange, bool, int64) {
	t.Helper()
	var cs []climate.AllocationChange
	var ok bool
	var rev int64
	err := s.View(ctx, func(tx climate.Tx) (err error) {
		if rev, err = tx.AllocationRevision(ctx); err != nil {
			return err
		}
		cs, ok, err = tx.(climate.AllocationLog).AllocationChanges(ctx, since)
		return err
	})
	if err != nil {
		t.Fatalf("AllocationChanges(%d): %v", since, err)
	}
	return cs, ok, rev
}

func TestAllocationLogContents(t *testing.T) {
	s := open(t, TestDSN(t))
	l := testLease("l", t0, t0.Add(time.Hour), "h1", "h2")
	insert(t, s, l)
	a1, a2 := l.Reservations[0].Allocations[0], l.Reservations[0].Allocations[1]
	moved := a1
	moved.End = t0.Add(2 * time.Hour)
	l.Reservations[0].Allocations = []climate.Allocation{moved}
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.UpdateLease(ctx, l) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.DeleteLease(ctx, "l") }); err != nil {
		t.Fatal(err)
	}
	got, ok, rev := changes(t, s, 0)
	// One revision per row change: h1, h2 added; h1 changed (old out, new in at one
	// revision) and h2 removed in one update; the delete cascades to the moved h1.
	want := []climate.AllocationChange{
		{Revision: 1, Allocation: a1},
		{Revision: 2, Allocation: a2},
		{Revision: 3, Removed: true, Allocation: a1},
		{Revision: 3, Allocation: moved},
		{Revision: 4, Removed: true, Allocation: a2},
		{Revision: 5, Removed: true, Allocation: moved},
	}
	if !ok || rev != 5 || !reflect.DeepEqual(got, want) {
		t.Errorf("log from 0: ok %v, revision %d,\n got %+v\nwant %+v", ok, rev, got, want)
	}
	if got, ok, _ := changes(t, s, 3); !ok || !reflect.DeepEqual(got, want[4:]) {
		t.Errorf("log from 3: ok %v, %+v; want %+v", ok, got, want[4:])
	}
	// A caller ahead of the store followed another history: it must rebuild.
	if _, ok, _ := changes(t, s, 6); ok {
		t.Error("log from 6 with the store at 5: ok; want not ok")
	}
}

// Statements written by hand are logged too, by the statement triggers (0027): an
// update logs only the rows it changed, each as one change.
func TestAllocationLogStatements(t *testing.T) {
	s := open(t, TestDSN(t))
	insert(t, s, testLease("l", t0, t0.Add(time.Hour), "h1", "h2"))
	if _, err := s.pool.Exec(ctx, `UPDATE allocations SET end_at = end_at`); err != nil {
		t.Fatal(err)
	}
	if got, ok, rev := changes(t, s, 2); !ok || rev != 2 || len(got) != 0 {
		t.Fatalf("after rewriting both rows unchanged: ok %v, revision %d, %+v; want no change at 2", ok, rev, got)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE allocations SET end_at = end_at + interval '1 hour' WHERE resource_id IN ('h1', 'h2')`); err != nil {
		t.Fatal(err)
	}
	got, ok, rev := changes(t, s, 2)
	if !ok || rev != 4 || len(got) != 4 {
		t.Fatalf("after moving both: ok %v, revision %d, %+v; want 4 entries up to 4", ok, rev, got)
	}
	for i, c := range got {
		if c.Revision != int64(3+i/2) || c.Removed != (i%2 == 0) || c.Allocation.ID != got[i/2*2].Allocation.ID {
			t.Errorf("entry %d: %+v; want each row's removal then addition, at revisions 3 and 4", i, c)
		}
	}
	if end := got[1].Allocation.End; !end.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("added end %v; want %v", end, t0.Add(2*time.Hour))
	}

	// A change rolled back to a savepoint is not logged; the stamp run early by SET
	// CONSTRAINTS … IMMEDIATE logs what came before it, and the changes after it get a
	// stamp of their own (0028).
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, q := range []string{
			`SAVEPOINT a`,
			`UPDATE allocations SET end_at = end_at + interval '1 hour' WHERE resource_id = 'h1'`,
			`ROLLBACK TO SAVEPOINT a`,
			`UPDATE allocations SET end_at = end_at + interval '2 hours' WHERE resource_id = 'h2'`,
			`SET CONSTRAINTS ALL IMMEDIATE`,
			`UPDATE allocations SET end_at = end_at + interval '3 hours' WHERE resource_id = 'h1'`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, rev = changes(t, s, 4)
	if !ok || rev != 6 || len(got) != 4 {
		t.Fatalf("after the transaction: ok %v, revision %d, %+v; want 4 entries up to 6", ok, rev, got)
	}
	for i, want := range []struct {
		rev      int64
		removed  bool
		resource string
		end      time.Time
	}{
		{5, true, "h2", t0.Add(2 * time.Hour)}, {5, false, "h2", t0.Add(4 * time.Hour)},
		{6, true, "h1", t0.Add(2 * time.Hour)}, {6, false, "h1", t0.Add(5 * time.Hour)},
	} {
		c := got[i]
		if c.Revision != want.rev || c.Removed != want.removed || c.Allocation.ResourceID != want.resource || !c.Allocation.End.Equal(want.end) {
			t.Errorf("entry %d: %+v; want %+v", i, c, want)
		}
	}
}

func TestPruneAllocationLog(t *testing.T) {
	s := open(t, TestDSN(t))
	for i, h := range []string{"h1", "h2", "h3", "h4"} {
		insert(t, s, testLease(h, t0.Add(time.Duration(i)*time.Hour), t0.Add(time.Duration(i+1)*time.Hour), h))
	}
	if _, ok, rev := changes(t, s, 0); !ok || rev != 4 {
		t.Fatalf("before pruning: ok %v, revision %d; want ok at 4", ok, rev)
	}
	n, err := s.PruneAllocationLog(ctx, 2)
	if err != nil || n != 2 {
		t.Fatalf("PruneAllocationLog(2): %d, %v; want 2 entries deleted", n, err)
	}
	for since := int64(0); since <= 4; since++ {
		got, ok, _ := changes(t, s, since)
		if wantOK := since >= 2; ok != wantOK || (ok && len(got) != int(4-since)) {
			t.Errorf("after pruning, from %d: %d changes, ok %v; want ok %v", since, len(got), ok, wantOK)
		}
	}
	// Keeping more than there is deletes nothing and never lowers the mark.
	if n, err := s.PruneAllocationLog(ctx, 100); err != nil || n != 0 {
		t.Errorf("PruneAllocationLog(100): %d, %v; want 0", n, err)
	}
	if _, ok, _ := changes(t, s, 1); ok {
		t.Error("from 1 after PruneAllocationLog(100): ok; want still not ok")
	}
	if n, err := s.PruneAllocationLog(ctx, 0); err != nil || n != 2 {
		t.Errorf("PruneAllocationLog(0): %d, %v; want 2", n, err)
	}
	if got, ok, _ := changes(t, s, 4); !ok || len(got) != 0 {
		t.Errorf("from the current revision after pruning everything: %d changes, ok %v; want none, ok", len(got), ok)
	}
	if _, err := s.PruneAllocationLog(ctx, -1); err == nil {
		t.Error("PruneAllocationLog(-1): no error")
	}
}
