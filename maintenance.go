package climate

import (
	"context"
	"time"
)

// Maintenance is a window in which an admin takes a host out of service, down or in
// maintenance (Climate's extension): from Start until End, or until further notice when
// End is zero. No allocation of the host, whole or instance slots, is planned over it,
// and the reservations holding the host then are healed: moved to other hosts, or
// flagged (Reservation.MissingResources, Lease.Degraded) until the host is back.
// Windows are inventory: adding or removing one moves the inventory revision.
type Maintenance struct {
	ID     string
	HostID string
	Start  time.Time
	End    time.Time // zero: until further notice
	Reason string
	// CreatedAt is when the window was recorded.
	CreatedAt time.Time
}

// UntilFurtherNotice reports whether the window has no end.
func (m *Maintenance) UntilFurtherNotice() bool { return m.End.IsZero() }

// Overlaps reports whether the window intersects the half-open window [s, e).
func (m *Maintenance) Overlaps(s, e time.Time) bool {
	return m.Start.Before(e) && (m.End.IsZero() || s.Before(m.End))
}

// MaintenanceFilter selects maintenance windows. Zero fields match everything.
type MaintenanceFilter struct {
	HostID string
	// From keeps the windows not over by From: those ending after it, and those without
	// an end.
	From time.Time
}

// MaintenanceStore is the part of a Tx that keeps hosts' maintenance windows.
type MaintenanceStore interface {
	// InsertMaintenance records a window (m.ID set by the caller) and moves the
	// inventory revision; CodeNotFound when its host is unknown. A window is deleted with
	// its host.
	InsertMaintenance(ctx context.Context, m *Maintenance) error
	// GetMaintenance returns one window; CodeNotFound when there is none.
	GetMaintenance(ctx context.Context, id string) (*Maintenance, error)
	// ListMaintenances returns the windows matching f, by start, then id.
	ListMaintenances(ctx context.Context, f MaintenanceFilter) ([]Maintenance, error)
	// DeleteMaintenance deletes a window (the host is back in service then) and moves
	// the inventory revision; CodeNotFound when there is none.
	DeleteMaintenance(ctx context.Context, id string) error
	// DegradedLeases returns the ids, in order, of the leases flagged degraded that end after
	// endAfter: what healing looks at again when a window changes.
	DegradedLeases(ctx context.Context, endAfter time.Time) ([]string, error)
}

// MaintenanceRequest takes a host out of service: from Start ("now" or a time) until End
// (unset: until further notice), for Reason.
type MaintenanceRequest struct {
	Start, End Date
	Reason     string
}

// HealOutcome is what healing did to a reservation.
type HealOutcome string

// Healing outcomes.
const (
	// HealReplanned: a reservation that has not started moved to other hosts.
	HealReplanned HealOutcome = "replanned"
	// HealReplaced: an active reservation got other hosts for the rest of its window
	// (resources_changed).
	HealReplaced HealOutcome = "replaced"
	// HealDegraded: no replacement; the reservation keeps the host and is flagged
	// missing_resources, its lease degraded.
	HealDegraded HealOutcome = "degraded"
	// HealRecovered: the reservation's hosts are all in service again: the flags are
	// cleared.
	HealRecovered HealOutcome = "recovered"
	// HealSkipped: the lease was starting, ending or changing; it is looked at again by
	// the next healing.
	HealSkipped HealOutcome = "skipped"
)

// Healing is what one healing did to one reservation.
type Healing struct {
	LeaseID, ReservationID string
	Outcome                HealOutcome
	// Down are the hosts in maintenance the reservation held; Hosts what it holds after.
	Down, Hosts []string
	// Detail says why, for a degraded or skipped reservation.
	Detail string
}

// Notification types of healing (Climate's extension).
const (
	// NotifyLeaseDegraded: a reservation of the lease lost a host to a maintenance
	// window and no replacement was found (its Error says which and why).
	NotifyLeaseDegraded = "lease.degraded"
	// NotifyLeaseHealed: the lease's reservations were moved off hosts in maintenance,
	// or its hosts are back in service and its flags were cleared.
	NotifyLeaseHealed = "lease.healed"
)

// MaintenanceService is what the API offers on maintenance windows; the manager
// implements it.
type MaintenanceService interface {
	// CreateMaintenance takes a host out of service and heals the reservations holding
	// it then, in one transaction.
	CreateMaintenance(ctx context.Context, who Identity, hostID string, req MaintenanceRequest) (*Maintenance, []Healing, error)
	// ListMaintenances returns a host's windows, or every host's when hostID is "".
	ListMaintenances(ctx context.Context, who Identity, hostID string) ([]Maintenance, error)
	GetMaintenance(ctx context.Context, who Identity, hostID, id string) (*Maintenance, error)
	// DeleteMaintenance puts the host back in service and heals again: reservations
	// flagged because of it are whole again.
	DeleteMaintenance(ctx context.Context, who Identity, hostID, id string) ([]Healing, error)
}
