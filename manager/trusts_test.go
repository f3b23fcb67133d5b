package manager_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
)

// recordingTrusts is an in-memory climate.Trusts that records what the manager asks
// (Keystone itself is exercised in cmd/climate's real-Keystone tests).
type recordingTrusts struct {
	made, deleted []string
	failCreate    error
}

func (r *recordingTrusts) Create(_ context.Context, who climate.Identity) (string, error) {
	if r.failCreate != nil {
		return "", r.failCreate
	}
	id := "trust-of-" + who.UserID + "-" + string(rune('a'+len(r.made)))
	r.made = append(r.made, id)
	return id, nil
}
func (r *recordingTrusts) Delete(_ context.Context, id string) error {
	r.deleted = append(r.deleted, id)
	return nil
}
func (r *recordingTrusts) Token(context.Context, string) (string, error) { return "", nil }

// A lease gets a trust from its creator; a lease that is not created (no room) or is
// deleted leaves no trust behind; a dry run makes none; a refused trust refuses the lease.
func TestLeaseTrusts(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	trusts := &recordingTrusts{}
	m := manager.New(st, clock.NewFake(t0), manager.Config{Trusts: trusts})
	addHosts(t, m, 1, nil)

	l := create(t, m, alice, time.Hour, 2*time.Hour, hostReq(1, 1, ""))
	if len(trusts.made) != 1 || l.TrustID != trusts.made[0] {
		t.Fatalf("lease trust %q, made %v", l.TrustID, trusts.made)
	}
	if got, err := m.GetLease(ctx, alice, l.ID); err != nil || got.TrustID != l.TrustID {
		t.Fatalf("stored trust_id %q, %v", got.TrustID, err)
	}
	_, err := m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "full", Start: at(time.Hour), End: at(2 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available")
	if len(trusts.made) != 2 || !slices.Equal(trusts.deleted, trusts.made[1:]) {
		t.Fatalf("a refused lease's trust: made %v, deleted %v", trusts.made, trusts.deleted)
	}
	if _, err := m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "try", Start: at(3 * time.Hour), End: at(4 * time.Hour), DryRun: true,
		Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}}); err != nil || len(trusts.made) != 2 {
		t.Fatalf("dry run: %v, trusts made %v", err, trusts.made)
	}
	if err := m.DeleteLease(ctx, alice, l.ID); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(trusts.deleted, l.TrustID) {
		t.Fatalf("deleted lease's trust %s not deleted: %v", l.TrustID, trusts.deleted)
	}
	trusts.failCreate = climate.Errorf(climate.CodeForbidden, "Keystone refused to create a trust for the lease")
	_, err = m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "x", Start: at(time.Hour), End: at(2 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	if !errors.Is(err, trusts.failCreate) && climate.ErrorCode(err) != climate.CodeForbidden {
		t.Fatalf("a refused trust: %v", err)
	}
}
