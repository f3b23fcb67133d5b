package manager_test

import (
	"context"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
	"climate/postgres"
)

// On PostgreSQL a lease's creation, update and deletion are each one write transaction of
// few round trips (postgres/doc.go): a database a network away costs each of them a few
// milliseconds, not one per statement. A creation is three: BEGIN with the chosen hosts'
// locks and allocations; the lease's rows, the audit entry and the notification with the
// project's limits; the usage records and the charge with COMMIT. An update reads the
// lease twice (the manager, then UpdateLease to know what changed) and its usage
// records; a deletion reads the lease and its usage records, then deletes with COMMIT.
func TestWriteRoundTripsOnPostgres(t *testing.T) {
	ctx := context.Background()
	st, err := postgres.Open(ctx, postgres.TestDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := manager.New(st, clock.NewFake(t0), manager.Config{BeforeEnd: manager.DefaultBeforeEnd})
	addHosts(t, m, 4, nil)
	step := func(what string, want int64, do func()) {
		t.Helper()
		writes0, txs0 := st.Writes()
		trips0 := st.WriteRoundTrips()
		do()
		writes, txs := st.Writes()
		trips := st.WriteRoundTrips()
		if writes-writes0 != 1 || txs-txs0 != 1 || trips-trips0 != want {
			t.Errorf("%s: %d writes in %d transactions of %d round trips in all, want 1 in 1 of %d", what, writes-writes0, txs-txs0, trips-trips0, want)
		}
	}
	var l *climate.Lease
	step("creation", 3, func() { l = create(t, m, alice, time.Hour, 3*time.Hour, hostReq(2, 2, "")) })
	step("update", 6, func() {
		if _, err := m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{End: at(4 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	})
	step("deletion", 3, func() {
		if err := m.DeleteLease(ctx, alice, l.ID); err != nil {
			t.Fatal(err)
		}
	})
}
