package climate

// LeaseStatus is a lease's state (Blazar's names).
type LeaseStatus string

// Stable and transitional lease statuses.
const (
	LeasePending     LeaseStatus = "PENDING"
	LeaseActive      LeaseStatus = "ACTIVE"
	LeaseTerminated  LeaseStatus = "TERMINATED"
	LeaseError       LeaseStatus = "ERROR"
	LeaseCreating    LeaseStatus = "CREATING"
	LeaseStarting    LeaseStatus = "STARTING"
	LeaseUpdating    LeaseStatus = "UPDATING"
	LeaseTerminating LeaseStatus = "TERMINATING"
	LeaseDeleting    LeaseStatus = "DELETING"
	// Climate's lease types: a retry lease waits in WAITING and ends FAILED if it never
	// fits; a best-effort one hunts in IN_PROGRESS and ends TIMEDOUT.
	LeaseWaiting    LeaseStatus = "WAITING"
	LeaseInProgress LeaseStatus = "IN_PROGRESS"
	LeaseFailed     LeaseStatus = "FAILED"
	LeaseTimedOut   LeaseStatus = "TIMEDOUT"
)

// LeaseStatuses lists every lease status.
var LeaseStatuses = []LeaseStatus{LeasePending, LeaseActive, LeaseTerminated, LeaseError, LeaseCreating,
	LeaseStarting, LeaseUpdating, LeaseTerminating, LeaseDeleting, LeaseWaiting, LeaseInProgress, LeaseFailed, LeaseTimedOut}

// nextLeaseStatuses is Blazar's NEXT_STATUSES table.
var nextLeaseStatuses = map[LeaseStatus][]LeaseStatus{
	LeasePending:     {LeaseStarting, LeaseUpdating, LeaseDeleting},
	LeaseActive:      {LeaseTerminating, LeaseUpdating, LeaseDeleting},
	LeaseTerminated:  {LeaseUpdating, LeaseDeleting},
	LeaseError:       {LeaseTerminating, LeaseUpdating, LeaseDeleting},
	LeaseCreating:    {LeasePending, LeaseDeleting},
	LeaseStarting:    {LeaseActive, LeaseError, LeaseDeleting},
	LeaseUpdating:    {LeasePending, LeaseActive, LeaseTerminated, LeaseError, LeaseDeleting},
	LeaseTerminating: {LeaseTerminated, LeaseError, LeaseDeleting},
	LeaseDeleting:    {LeaseError},
	LeaseWaiting:     {LeasePending, LeaseFailed, LeaseDeleting},
	LeaseInProgress:  {LeasePending, LeaseTimedOut, LeaseDeleting},
	LeaseFailed:      {LeaseDeleting},
	LeaseTimedOut:    {LeaseDeleting},
}

// CanTransition reports whether a lease may move from one status to another.
func (from LeaseStatus) CanTransition(to LeaseStatus) bool {
	for _, s := range nextLeaseStatuses[from] {
		if s == to {
			return true
		}
	}
	return false
}

// IsStable reports whether s is not a transitional status.
func (s LeaseStatus) IsStable() bool {
	switch s {
	case LeasePending, LeaseActive, LeaseTerminated, LeaseError, LeaseWaiting, LeaseInProgress, LeaseFailed, LeaseTimedOut:
		return true
	}
	return false
}

// ReservationStatus is a reservation's state (lowercase, as Blazar shows it).
type ReservationStatus string

// Reservation statuses.
const (
	ReservationPending ReservationStatus = "pending"
	ReservationActive  ReservationStatus = "active"
	ReservationDeleted ReservationStatus = "deleted"
	ReservationError   ReservationStatus = "error"
)

// CanTransition reports whether a reservation may move from one status to another.
func (from ReservationStatus) CanTransition(to ReservationStatus) bool {
	switch from {
	case ReservationPending:
		return to == ReservationActive || to == ReservationDeleted || to == ReservationError
	case ReservationActive:
		return to == ReservationDeleted || to == ReservationError
	case ReservationError:
		return to == ReservationDeleted
	}
	return false
}

// DeriveLeaseStatus computes a lease's stable status from its start and end events, as
// Blazar does after every operation: neither done → PENDING, started → ACTIVE, both done →
// TERMINATED, anything else → ERROR. A reservation in error also makes the lease ERROR.
// An IN_PROGRESS event counts as not done: the engine may have claimed a lease's end in
// the same batch as its start, and the end has not run when the start is recorded.
func DeriveLeaseStatus(l *Lease) LeaseStatus {
	start, end := l.Event(EventStartLease), l.Event(EventEndLease)
	if start == nil || end == nil {
		return LeaseError
	}
	notDone := func(e *Event) bool { return e.Status == EventUndone || e.Status == EventInProgress }
	var want ReservationStatus
	var status LeaseStatus
	switch {
	case notDone(start) && notDone(end):
		status, want = LeasePending, ReservationPending
	case start.Status == EventDone && notDone(end):
		status, want = LeaseActive, ReservationActive
	case start.Status == EventDone && end.Status == EventDone:
		status, want = LeaseTerminated, ReservationDeleted
	default:
		return LeaseError
	}
	for _, r := range l.Reservations {
		if r.Status != want {
			return LeaseError
		}
	}
	return status
}
