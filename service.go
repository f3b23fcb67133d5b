package climate

import (
	"context"
	"time"
)

// LeaseService is what the API offers on leases; the manager implements it.
type LeaseService interface {
	CreateLease(ctx context.Context, who Identity, req LeaseRequest) (*Lease, error)
	GetLease(ctx context.Context, who Identity, id string) (*Lease, error)
	ListLeases(ctx context.Context, who Identity) ([]Lease, error)
	UpdateLease(ctx context.Context, who Identity, id string, u LeaseUpdate) (*Lease, error)
	DeleteLease(ctx context.Context, who Identity, id string) error
}

// HostService is what the API offers on hosts; the manager implements it.
type HostService interface {
	// CreateHost registers a host from the request's keys: "name", built-in host fields,
	// and extra capabilities (every other key).
	CreateHost(ctx context.Context, who Identity, fields map[string]string) (*Host, error)
	GetHost(ctx context.Context, who Identity, id string) (*Host, error)
	ListHosts(ctx context.Context, who Identity) ([]Host, error)
	UpdateHost(ctx context.Context, who Identity, id string, fields map[string]string) (*Host, error)
	DeleteHost(ctx context.Context, who Identity, id string) error
	// HostAllocations lists, per host (or for hostID only), the reservations holding it.
	HostAllocations(ctx context.Context, who Identity, hostID string, q AllocationQuery) ([]HostAllocation, error)
	ListHostProperties(ctx context.Context, who Identity, all bool) ([]PropertyInfo, error)
	SetHostPropertyPrivate(ctx context.Context, who Identity, name string, private bool) (*ResourceProperty, error)
}

// AvailabilityService answers calendar questions about hosts (Climate's extensions).
type AvailabilityService interface {
	// EarliestSlots finds the earliest windows in which enough matching hosts are free.
	EarliestSlots(ctx context.Context, who Identity, q SlotQuery) ([]Slot, error)
	// Timeline counts matching hosts free in each time bucket of a range.
	Timeline(ctx context.Context, who Identity, q TimelineQuery) (*Timeline, error)
}

// Date is a date as a request gives it: unset, "now", "earliest" (lease creation only:
// the earliest start at which the reservation fits), or a time.
type Date struct {
	Now      bool
	Earliest bool
	Time     time.Time
}

// IsSet reports whether the request gave the date.
func (d Date) IsSet() bool { return d.Now || d.Earliest || !d.Time.IsZero() }

// LeaseRequest is a request to create a lease.
type LeaseRequest struct {
	Name         string
	Start, End   Date
	BeforeEnd    *time.Time
	Reservations []ReservationRequest
	// Duration and Deadline go with Start.Earliest: the lease lasts Duration and must end
	// by Deadline (zero: a year from now).
	Duration time.Duration
	Deadline time.Time
	// DryRun plans the lease and returns it without writing anything.
	DryRun bool
}

// SlotQuery asks for the earliest windows of Duration, starting at or after After and
// ending by Deadline, in which Count hosts matching the properties are free.
type SlotQuery struct {
	Count                int
	Duration             time.Duration
	After, Deadline      time.Time // zero: now, and a year after After
	HypervisorProperties string
	ResourceProperties   string
	Limit                int // how many windows; zero means 3
}

// Slot is a window in which enough hosts are free.
type Slot struct {
	Start, End time.Time
	Free       int // matching hosts free for the whole window
}

// TimelineQuery asks how many matching hosts are free in each Step of [From, To).
type TimelineQuery struct {
	From, To             time.Time
	Step                 time.Duration
	HypervisorProperties string
	ResourceProperties   string
}

// Timeline is the answer to a TimelineQuery.
type Timeline struct {
	Matching int    // reservable hosts matching the properties
	Buckets  []Slot // Free counts hosts free for the whole bucket
}

// ReservationRequest describes one reservation in a create or update request. Nil
// pointers are fields the request did not give.
type ReservationRequest struct {
	ID                   string // update only
	ResourceType         string
	Min, Max             *int
	HypervisorProperties *string
	ResourceProperties   *string
	BeforeEnd            *string
}

// LeaseUpdate is a request to change a lease; unset fields keep their value.
type LeaseUpdate struct {
	Name         *string
	Start, End   Date
	BeforeEnd    *time.Time
	Reservations []ReservationRequest
}

// HostAllocation lists the reservations holding one host.
type HostAllocation struct {
	HostID       string
	Reservations []AllocatedReservation
}

// AllocatedReservation is one reservation's hold on a host.
type AllocatedReservation struct {
	ID, LeaseID string
	Start, End  time.Time
}

// AllocationQuery filters host allocations; with neither field set only allocations that
// are current or in the future are listed (Blazar's behaviour).
type AllocationQuery struct {
	LeaseID, ReservationID string
}

// PropertyInfo describes a host property for the properties listing.
type PropertyInfo struct {
	ResourceProperty
	Values []string // distinct values across hosts, sorted
}
