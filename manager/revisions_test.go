package manager

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/postgres"
	"climate/sqlite"
)

// countingStore counts a PostgreSQL store's one-statement revision reads.
type countingStore struct {
	*postgres.Store
	revisions, changesSince atomic.Int64
}

func (s *countingStore) Revisions(ctx context.Context) (int64, int64, error) {
	s.revisions.Add(1)
	return s.Store.Revisions(ctx)
}

func (s *countingStore) ChangesSince(ctx context.Context, since int64) (int64, int64, []climate.AllocationChange, bool, error) {
	s.changesSince.Add(1)
	return s.Store.ChangesSince(ctx, since)
}

// On a store that reads its revisions in one statement (PostgreSQL), a view that is
// behind, after another replica's commit or its own, catches up in the statement that
// finds it so: one round trip, not a second to read the log.
// twoReplicas opens two stores on one PostgreSQL schema, the first counting its
// revision reads, and a manager on each.
func twoReplicas(t *testing.T) (a *countingStore, b *postgres.Store, ma, mb *Manager) {
	ctx := context.Background()
	dsn := postgres.TestDSN(t)
	open := func() *postgres.Store {
		st, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b = &countingStore{Store: open()}, open()
	clk := clock.NewFake(replicaT0)
	return a, b, New(a, clk, Config{}), New(b, clk, Config{})
}

func TestViewCatchesUpInOneStatement(t *testing.T) {
	ctx := context.Background()
	a, b, ma, mb := twoReplicas(t)
	hosts := replicaHosts(t, ma, 3)
	checkReplica(t, "a", ma, a, hosts)
	checkReplica(t, "b", mb, b, hosts)
	one, any := 1, ""
	for i, m := range []*Manager{mb, ma} { // the other replica's commit, then its own
		start := replicaT0.Add(time.Duration(1+4*i) * time.Hour)
		_, err := m.CreateLease(ctx, replicaMember, climate.LeaseRequest{Name: "l", Start: climate.Date{Time: start}, End: climate.Date{Time: start.Add(2 * time.Hour)},
			Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one, ResourceProperties: &any}}})
		if err != nil {
			t.Fatal(err)
		}
		revisions, changesSince := a.revisions.Load(), a.changesSince.Load()
		checkReplica(t, "a", ma, a, hosts) // behind: one catch-up, and then as the store
		if n, m := a.revisions.Load()-revisions, a.changesSince.Load()-changesSince; n != 0 || m != 1 {
			t.Errorf("lease %d: the view read the revisions %d times and the changes %d times, want 0 and 1", i, n, m)
		}
	}
}

// A manager's commit leaves its index current (PostgreSQL: its commit reads the log back
// in its round trip, climate.CommitReader; SQLite: the write transaction reads its own
// changes), and its next plan, within trustIndexFor, reads nothing before it: a creation
// is the write transaction alone. A plan made on an index another replica has since
// moved on fails its commit's re-check and is made again on a checked view.
func TestPlansTrustAnIndexItsCommitsCaughtUp(t *testing.T) {
	a, b, ma, mb := twoReplicas(t)
	plansTrustAnIndexItsCommitsCaughtUp(t, a, b, ma, mb, func() int64 { return a.revisions.Load() + a.changesSince.Load() }, 1)
}

// viewCounting counts a SQLite store's read transactions that read the allocation
// revision: its revision checks and catch-ups.
type viewCounting struct {
	*sqlite.Store
	views atomic.Int64
}

func (s *viewCounting) View(ctx context.Context, fn func(climate.Tx) error) error {
	return s.Store.View(ctx, func(tx climate.Tx) error {
		return fn(revisionCounting{Tx: tx, log: tx.(climate.AllocationLog), views: &s.views})
	})
}

// revisionCounting is a Tx that counts its reads of the allocation revision (a revision
// check or a catch-up reads it once).
type revisionCounting struct {
	climate.Tx
	log   climate.AllocationLog
	views *atomic.Int64
}

func (t revisionCounting) AllocationRevision(ctx context.Context) (int64, error) {
	t.views.Add(1)
	return t.Tx.AllocationRevision(ctx)
}

func (t revisionCounting) AllocationChanges(ctx context.Context, since int64) ([]climate.AllocationChange, bool, error) {
	return t.log.AllocationChanges(ctx, since)
}

func TestPlansTrustAnIndexItsCommitsCaughtUpSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "climate.db")
	open := func() *sqlite.Store { // two Stores on one file stand for two processes
		st, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := &viewCounting{Store: open()}, open()
	clk := clock.NewFake(replicaT0)
	plansTrustAnIndexItsCommitsCaughtUp(t, a, b, New(a, clk, Config{}), New(b, clk, Config{}), a.views.Load, 2)
}

// plansTrustAnIndexItsCommitsCaughtUp runs the test on a, whose reads of the revisions
// or the log reads counts, and b, another process's store on the same database; a check
// that finds the index behind and catches it up takes checkReads of them.
func plansTrustAnIndexItsCommitsCaughtUp(t *testing.T, a, b climate.Store, ma, mb *Manager, reads func() int64, checkReads int64) {
	ctx := context.Background()
	hosts := replicaHosts(t, ma, 1)
	checkReplica(t, "b", mb, b, hosts)
	one := 1
	lease := func(m *Manager, startHour int) error {
		start := replicaT0.Add(time.Duration(startHour) * time.Hour)
		_, err := m.CreateLease(ctx, replicaMember, climate.LeaseRequest{Name: "l", Start: climate.Date{Time: start}, End: climate.Date{Time: start.Add(time.Hour)},
			Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one}}})
		return err
	}

	for i := range 3 {
		before := reads()
		if err := lease(ma, 1+2*i); err != nil {
			t.Fatal(err)
		}
		if rev, _ := storeState(t, b); revisionOf(ma) != rev { // b: a's reads count what a's manager does
			t.Fatalf("lease %d: the index is at revision %d after its commit, the store at %d", i, revisionOf(ma), rev)
		}
		if n := reads() - before; i > 0 && n != 0 {
			t.Errorf("lease %d: %d reads of the revisions or the log before planning, want none", i, n)
		}
	}
	checkReplica(t, "a", ma, a, hosts)

	// b books the one host at hour 10; a's index does not know it yet, so its plan for the
	// same hour takes the host, the re-check refuses it, and the second plan, on a checked
	// view, finds no host free.
	if err := lease(mb, 10); err != nil {
		t.Fatal(err)
	}
	before := reads()
	if err := lease(ma, 10); climate.ErrorCode(err) != climate.CodeConflict {
		t.Fatalf("a's lease over b's: %v, want not enough hosts", err)
	}
	if n := reads() - before; n != checkReads {
		t.Errorf("%d reads before planning again, want the check's %d", n, checkReads)
	}
	checkReplica(t, "a after the conflict", ma, a, hosts)

	// A refusal is not answered from a trusted index: b deletes a's lease at hour 20,
	// which a's index still holds, and a's lease for that hour is planned again on a
	// checked view, which finds the host free.
	start := climate.Date{Time: replicaT0.Add(20 * time.Hour)}
	l, err := ma.CreateLease(ctx, replicaMember, climate.LeaseRequest{Name: "l", Start: start, End: climate.Date{Time: start.Time.Add(time.Hour)},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := mb.DeleteLease(ctx, replicaMember, l.ID); err != nil {
		t.Fatal(err)
	}
	if err := lease(ma, 20); err != nil {
		t.Errorf("a's lease where b freed the host: %v", err)
	}
	checkReplica(t, "a at the end", ma, a, hosts)
}
