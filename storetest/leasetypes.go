package storetest

import (
	"context"
	"testing"
	"time"

	"climate"
)

// testLeaseTypes: a lease's type, retry deadline and priority round-trip through insert,
// get, the status filter and update; a Blazar lease keeps them zero.
func testLeaseTypes(t *testing.T, s climate.Store) {
	ctx := context.Background()
	waiting := newLease("w", "p", t0.Add(time.Hour), t0.Add(2*time.Hour))
	waiting.Reservations[0].Allocations = nil
	waiting.Status, waiting.Type, waiting.RetryUntil, waiting.Priority = climate.LeaseWaiting, climate.LeaseRetry, ts(t0.Add(5*time.Hour)), 7
	plain := newLease("b", "p", t0.Add(time.Hour), t0.Add(2*time.Hour), "h1")
	if err := s.Update(ctx, func(tx climate.Tx) error {
		if err := tx.InsertLease(ctx, waiting); err != nil {
			return err
		}
		return tx.InsertLease(ctx, plain)
	}); err != nil {
		t.Fatal(err)
	}
	check := func(want climate.LeaseType, until time.Time, priority int, status climate.LeaseStatus) {
		t.Helper()
		var got *climate.Lease
		err := s.View(ctx, func(tx climate.Tx) error {
			var err error
			got, err = tx.GetLease(ctx, "w")
			return err
		})
		if err != nil || got.Type != want || !got.RetryUntil.Equal(until) || got.Priority != priority || got.Status != status {
			t.Fatalf("lease w: %v, type %q until %v priority %d status %s; want %q %v %d %s", err, got.Type, got.RetryUntil, got.Priority, got.Status, want, until, priority, status)
		}
	}
	check(climate.LeaseRetry, waiting.RetryUntil, 7, climate.LeaseWaiting)
	err := s.View(ctx, func(tx climate.Tx) error {
		got, err := tx.ListLeases(ctx, climate.LeaseFilter{Statuses: []climate.LeaseStatus{climate.LeaseWaiting, climate.LeaseInProgress}})
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0].ID != "w" {
			t.Errorf("waiting leases: %d", len(got))
		}
		b, err := tx.GetLease(ctx, "b")
		if err == nil && (b.Type != "" || !b.RetryUntil.IsZero() || b.Priority != 0) {
			t.Errorf("a Blazar lease: type %q until %v priority %d", b.Type, b.RetryUntil, b.Priority)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waiting.Status, waiting.RetryUntil, waiting.Priority = climate.LeasePending, time.Time{}, 0
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.UpdateLease(ctx, waiting) }); err != nil {
		t.Fatal(err)
	}
	check(climate.LeaseRetry, time.Time{}, 0, climate.LeasePending)
}
