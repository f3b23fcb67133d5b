package climate

import (
	"fmt"
	"strings"
	"testing"
)

func TestLeaseTransitions(t *testing.T) {
	allowed := []struct{ from, to LeaseStatus }{
		{LeasePending, LeaseStarting}, {LeaseStarting, LeaseActive}, {LeaseActive, LeaseTerminating},
		{LeaseTerminating, LeaseTerminated}, {LeaseStarting, LeaseError}, {LeaseError, LeaseTerminating},
		{LeaseCreating, LeasePending}, {LeaseTerminated, LeaseUpdating}, {LeaseUpdating, LeaseActive},
	}
	for _, c := range allowed {
		if !c.from.CanTransition(c.to) {
			t.Errorf("%s → %s should be allowed", c.from, c.to)
		}
	}
	forbidden := []struct{ from, to LeaseStatus }{
		{LeasePending, LeaseActive}, {LeasePending, LeaseTerminating}, {LeaseActive, LeaseStarting},
		{LeaseTerminated, LeaseActive}, {LeaseDeleting, LeasePending}, {LeaseTerminating, LeaseActive},
	}
	for _, c := range forbidden {
		if c.from.CanTransition(c.to) {
			t.Errorf("%s → %s should be refused", c.from, c.to)
		}
	}
	for _, s := range []LeaseStatus{LeasePending, LeaseActive, LeaseTerminated, LeaseError} {
		if !s.IsStable() {
			t.Errorf("%s is stable", s)
		}
	}
	if LeaseStarting.IsStable() {
		t.Error("STARTING is transitional")
	}
}

func TestReservationTransitions(t *testing.T) {
	if !ReservationPending.CanTransition(ReservationActive) || !ReservationActive.CanTransition(ReservationDeleted) ||
		!ReservationError.CanTransition(ReservationDeleted) {
		t.Error("forward transitions refused")
	}
	if ReservationDeleted.CanTransition(ReservationActive) || ReservationActive.CanTransition(ReservationPending) {
		t.Error("backward transitions allowed")
	}
}

func TestDeriveLeaseStatus(t *testing.T) {
	cases := []struct {
		start, end EventStatus
		res        ReservationStatus
		want       LeaseStatus
	}{
		{EventUndone, EventUndone, ReservationPending, LeasePending},
		{EventDone, EventUndone, ReservationActive, LeaseActive},
		{EventDone, EventInProgress, ReservationActive, LeaseActive}, // end claimed, not run yet
		{EventDone, EventDone, ReservationDeleted, LeaseTerminated},
		{EventError, EventUndone, ReservationError, LeaseError},
		{EventDone, EventUndone, ReservationError, LeaseError}, // a reservation in error
		{EventUndone, EventDone, ReservationDeleted, LeaseError},
	}
	for _, c := range cases {
		l := &Lease{
			Events:       []Event{{Type: EventStartLease, Status: c.start}, {Type: EventEndLease, Status: c.end}},
			Reservations: []Reservation{{Status: c.res}},
		}
		if got := DeriveLeaseStatus(l); got != c.want {
			t.Errorf("start %s, end %s, reservation %s → %s, want %s", c.start, c.end, c.res, got, c.want)
		}
	}
	if DeriveLeaseStatus(&Lease{}) != LeaseError {
		t.Error("a lease without events is in error")
	}
}

// An identity printed any way shows no token.
func TestIdentityHidesItsToken(t *testing.T) {
	id := Identity{UserID: "u", ProjectID: "p", Roles: []string{"member"}, Token: "gAAAAAsecret"}
	for _, s := range []string{fmt.Sprint(id), fmt.Sprintf("%v %+v %#v %s", id, id, id, id), fmt.Sprintf("%v", &id)} {
		if strings.Contains(s, "secret") || !strings.Contains(s, "user u, project p") {
			t.Errorf("printed %q", s)
		}
	}
}
