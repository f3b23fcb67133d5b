package manager_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
)

// The maximum lease duration (Blazar's MaxLeaseDurationFilter) and the extension window, at
// their boundaries, on both stores: exactly the maximum is accepted, a second more refused
// with a 403 that says what fits; an exempt project is not bound; an end moves later only
// within the window before it.
func TestEnforcementOfDurations(t *testing.T) {
	run := func(t *testing.T, st climate.Store) {
		ctx := context.Background()
		clk := clock.NewFake(t0)
		m := manager.New(st, clk, manager.Config{Enforcement: manager.Enforcement{
			MaxLeaseDuration: 7 * 24 * time.Hour, ExtensionWindow: 48 * time.Hour, ExemptProjects: []string{"chemistry"}}})
		addHosts(t, m, 2, nil)
		create := func(who climate.Identity, name string, d time.Duration) (*climate.Lease, error) {
			return m.CreateLease(ctx, who, climate.LeaseRequest{Name: name, Start: at(time.Hour), End: at(time.Hour + d),
				Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
		}
		week := 7 * 24 * time.Hour
		l, err := create(alice, "week", week)
		if err != nil {
			t.Fatalf("exactly the maximum: %v", err)
		}
		_, err = create(alice, "week+1s", week+time.Second)
		if climate.ErrorCode(err) != climate.CodeForbidden || !strings.Contains(err.Error(),
			"Lease duration of 604801 seconds must be less than or equal to the maximum lease duration of 604800 seconds (168h0m0s): the longest lease from 2030-01-01 11:00:00 ends at 2030-01-08 11:00:00.") {
			t.Errorf("a second over: %v", err)
		}
		if _, err := create(bob, "exempt", 2*week); err != nil {
			t.Errorf("an exempt project: %v", err)
		}
		_, err = m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "asap", Start: climate.Date{Earliest: true}, Duration: week + time.Minute,
			Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
		if climate.ErrorCode(err) != climate.CodeForbidden {
			t.Errorf("start_date earliest, a minute over: %v", err)
		}
		// Shortening is always allowed; extending only within 48 h of the end, and never
		// past the maximum.
		if _, err := m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{End: at(time.Hour + week - 24*time.Hour)}); err != nil {
			t.Fatalf("shortening: %v", err)
		}
		_, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{End: at(time.Hour + week)})
		if climate.ErrorCode(err) != climate.CodeForbidden || !strings.Contains(err.Error(), "can be extended only within 48h of its end: from 2030-01-05 11:00:00 on") {
			t.Errorf("extending before the window: %v", err)
		}
		clk.Set(t0.Add(time.Hour + week - 24*time.Hour - 48*time.Hour)) // the window opens
		markStarted(t, st, l.ID)
		if _, err := m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{End: at(time.Hour + week)}); err != nil {
			t.Errorf("extending when the window opens: %v", err)
		}
		_, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{End: at(time.Hour + week + time.Second)})
		if climate.ErrorCode(err) != climate.CodeForbidden || !strings.Contains(err.Error(), "maximum lease duration") {
			t.Errorf("extending past the maximum: %v", err)
		}
	}
	onBothStores(t, run)
}

// markStarted records a lease's start as the engine would (no engine runs here).
func markStarted(t *testing.T, st climate.Store, id string) {
	t.Helper()
	err := st.Update(context.Background(), func(tx climate.Tx) error {
		l, err := tx.GetLease(context.Background(), id)
		if err != nil {
			return err
		}
		for i := range l.Events {
			if l.Events[i].Type == climate.EventStartLease {
				l.Events[i].Status = climate.EventDone
			}
		}
		for i := range l.Reservations {
			l.Reservations[i].Status = climate.ReservationActive
		}
		l.Status = climate.LeaseActive
		return tx.UpdateLease(context.Background(), l)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// refuser is an operator's service that refuses every lease of one project.
type refuser struct{ project string }

func (r refuser) CheckCreate(_ context.Context, _ climate.Identity, l *climate.Lease) error {
	if l.ProjectID == r.project {
		return climate.Errorf(climate.CodeForbidden, "project %s has no allocation left", r.project)
	}
	return nil
}

func (r refuser) CheckUpdate(ctx context.Context, who climate.Identity, _, l *climate.Lease) error {
	return r.CheckCreate(ctx, who, l)
}

// A lease the operator's service refuses is not created (nothing is written) and keeps
// the service's message; an update it refuses changes nothing; an exempt project is not
// asked.
func TestExternalServiceRefusalChangesNothing(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	m := manager.New(st, clock.NewFake(t0), manager.Config{Enforcement: manager.Enforcement{External: refuser{"physics"}, ExemptProjects: []string{"ops"}}})
	addHosts(t, m, 1, nil)
	req := climate.LeaseRequest{Name: "l", Start: at(time.Hour), End: at(2 * time.Hour), Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}}
	if _, err := m.CreateLease(ctx, alice, req); climate.ErrorCode(err) != climate.CodeForbidden || err.Error() != "project physics has no allocation left" {
		t.Errorf("refused create: %v", err)
	}
	leases, _, _ := manager.CollectLeases(ctx, m, admin, climate.LeaseQuery{})
	if len(leases) != 0 {
		t.Errorf("a refused lease was written: %d leases", len(leases))
	}
	l, err := m.CreateLease(ctx, bob, req)
	if err != nil {
		t.Fatal(err)
	}
	m2 := manager.New(st, clock.NewFake(t0), manager.Config{Enforcement: manager.Enforcement{External: refuser{"chemistry"}}})
	if _, err := m2.UpdateLease(ctx, bob, l.ID, climate.LeaseUpdate{End: at(3 * time.Hour)}); climate.ErrorCode(err) != climate.CodeForbidden {
		t.Errorf("refused update: %v", err)
	}
	if got, _ := m2.GetLease(ctx, admin, l.ID); !got.End.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("a refused update changed the lease: ends %s", got.End)
	}
	m3 := manager.New(st, clock.NewFake(t0), manager.Config{Enforcement: manager.Enforcement{External: refuser{"ops"}, ExemptProjects: []string{"ops"}}})
	req.Start, req.End = at(5*time.Hour), at(6*time.Hour) // the host is free then
	if _, err := m3.CreateLease(ctx, admin, req); err != nil {
		t.Errorf("an exempt project was refused: %v", err)
	}
}
