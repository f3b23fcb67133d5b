package manager

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/postgres"
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
func TestViewCatchesUpInOneStatement(t *testing.T) {
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
	a, b := &countingStore{Store: open()}, open()
	clk := clock.NewFake(replicaT0)
	ma, mb := New(a, clk, Config{}), New(b, clk, Config{})
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
