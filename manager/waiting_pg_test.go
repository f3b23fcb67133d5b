package manager_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
	"climate/postgres"
)

// Three replicas on one PostgreSQL schema re-plan the same waiting leases at once: each
// lease is booked exactly once, and never two on the one host.
func TestWaitingLeasesBookedOnceAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	dsn := postgres.TestDSN(t)
	clk := clock.NewFake(t0)
	var replicas []*manager.Manager
	for range 3 {
		st, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		replicas = append(replicas, manager.New(st, clk, manager.Config{}))
	}
	m := replicas[0]
	addHosts(t, m, 1, nil)
	holder := create(t, m, alice, time.Hour, 7*time.Hour, hostReq(1, 1, "")) // both windows below
	var waiting []string
	for i := range 6 {
		clk.Advance(time.Millisecond)
		// Two windows: the first come of each window gets the host.
		start := time.Hour + time.Duration(i%2)*3*time.Hour
		l, err := m.CreateLease(ctx, bob, typed("w", climate.LeaseRetry, start, start+2*time.Hour, 0))
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, l.ID)
	}
	if err := m.DeleteLease(ctx, alice, holder.ID); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	booked := make([]int, len(replicas))
	for i, r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := r.RetryWaiting(ctx)
			if err != nil {
				t.Error(err)
			}
			booked[i] = n
		}()
	}
	wg.Wait()
	total, pending := booked[0]+booked[1]+booked[2], 0
	var windows []climate.Allocation
	for _, id := range waiting {
		l, err := m.GetLease(ctx, bob, id)
		if err != nil {
			t.Fatal(err)
		}
		if l.Status == climate.LeasePending {
			pending++
			for _, r := range l.Reservations {
				windows = append(windows, r.Allocations...)
			}
		}
	}
	if total != 2 || pending != 2 || len(windows) != 2 || climate.Overlaps(windows[0].Start, windows[0].End, windows[1].Start, windows[1].End) {
		t.Fatalf("booked per replica %v, %d pending, allocations %+v: want 2 leases booked once each, in two windows", booked, pending, windows)
	}
}
