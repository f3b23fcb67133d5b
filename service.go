package climate

import (
	"context"
	"time"
)

// LeaseService is what the API offers on leases; the manager implements it.
type LeaseService interface {
	CreateLease(ctx context.Context, who Identity, req LeaseRequest) (*Lease, error)
	GetLease(ctx context.Context, who Identity, id string) (*Lease, error)
	// ListLeases passes the leases the caller may see that match q to fn, in list order
	// (creation time, then id), in batches that are each read in their own transaction, so
	// memory does not grow with the number of leases. more reports that leases remain after
	// the q.Limit passed. An error before fn's first call is the query's (bad marker,
	// forbidden); fn's error stops the listing and is returned.
	ListLeases(ctx context.Context, who Identity, q LeaseQuery, fn func([]Lease) error) (more bool, err error)
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
	// HostAllocations passes, for every host in list order (or for q.HostID only), the
	// reservations holding it to fn, in batches of hosts, paged as ListLeases pages leases.
	HostAllocations(ctx context.Context, who Identity, q AllocationQuery, fn func([]HostAllocation) error) (more bool, err error)
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
	Name       string
	Start, End Date
	BeforeEnd  *time.Time
	// BeforeStart, when set, is when before_start_lease fires (Climate's extension).
	BeforeStart  *time.Time
	Reservations []ReservationRequest
	// Duration and Deadline go with Start.Earliest: the lease lasts Duration and must end
	// by Deadline (zero: a year from now).
	Duration time.Duration
	Deadline time.Time
	// DryRun plans the lease and returns it without writing anything.
	DryRun bool
	// Type, RetryUntil and Priority are Climate's lease types (Lease.Type); zero values
	// behave as Blazar's leases.
	Type       LeaseType
	RetryUntil time.Time
	Priority   int
	MaxRetries int
	// Preemptible and OnPreempt make a preemptible lease (Lease.Preemptible); OnPreempt ""
	// means shrink.
	Preemptible bool
	OnPreempt   PreemptAction
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
	// Reservations are further reservations the window must fit (instance slots,
	// floating IPs), beside Count hosts (which may then be 0).
	Reservations []ReservationRequest
}

// Slot is a window in which enough hosts are free.
type Slot struct {
	Start, End time.Time
	Free       int // matching hosts free for the whole window (a search of hosts only)
	// In a timeline that asked for them: the instance slots of the asked size and the
	// floating IPs of the asked network free for the whole bucket.
	FreeSlots, FreeFloatingIPs *int
}

// TimelineQuery asks how many matching hosts are free in each Step of [From, To).
type TimelineQuery struct {
	From, To             time.Time
	Step                 time.Duration
	HypervisorProperties string
	ResourceProperties   string
	// SlotSize, when set, also counts instance slots of that size on the matching hosts;
	// NetworkID, when set, the floating IPs of that network.
	SlotSize  *Size
	NetworkID string
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
	// virtual:floatingip's fields.
	NetworkID           *string
	Amount              *int
	RequiredFloatingIPs *[]string
	// Instance reservations' fields (virtual:instance; flavor:instance gives FlavorID).
	// Affinity is set when the key was given; its value is nil for null/"None".
	VCPUs, MemoryMB, DiskGB *int
	Affinity                *Affinity
	FlavorID                *string
}

// Affinity is an instance reservation's affinity as a request gave it: Value true (one
// host), false (distinct hosts) or nil (none).
type Affinity struct{ Value *bool }

// LeaseUpdate is a request to change a lease; unset fields keep their value.
type LeaseUpdate struct {
	Name         *string
	Start, End   Date
	BeforeEnd    *time.Time
	BeforeStart  *time.Time
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
	// Slots is how many instance slots the reservation holds on the host; 0 when it
	// holds the whole host.
	Slots int
}

// AllocationQuery selects and pages host allocations. Without LeaseID, ReservationID or
// From, only allocations that are current or in the future are listed (Blazar's behaviour).
type AllocationQuery struct {
	HostID                 string // this host only (unknown: not found)
	LeaseID, ReservationID string
	From, To               time.Time // allocations overlapping [From, To); zero To: unbounded
	Marker                 string    // a host id: the list starts after this host
	Limit                  int       // at most this many hosts; 0: all
}

// LeaseQuery selects and pages the leases a caller lists; zero fields match everything.
type LeaseQuery struct {
	ProjectID string        // one project's leases: admins any, others only their own
	Name      string        // exact name
	Statuses  []LeaseStatus // any of these
	Marker    string        // a lease id: the list starts after this lease
	Limit     int           // at most this many leases; 0: all
}

// PropertyInfo describes a host property for the properties listing.
type PropertyInfo struct {
	ResourceProperty
	Values []string // distinct values across hosts, sorted
}

// Trusts delegates a lease owner's roles to Climate for the lease's actions (Keystone
// trusts, with --auth keystone), as Blazar does.
type Trusts interface {
	// Create makes a trust from who (with who's token) to Climate's service user, on
	// who's project with who's roles, impersonating who; it returns the trust's id.
	Create(ctx context.Context, who Identity) (string, error)
	// Delete deletes a trust; one already gone is not an error.
	Delete(ctx context.Context, id string) error
	// Token returns a token that acts as the trust's trustor; an error when the trust is
	// gone or unusable.
	Token(ctx context.Context, id string) (string, error)
}

type trustTokenKey struct{}

// WithTrustToken returns ctx carrying a token from a lease's trust, for the lease's
// actions (drivers, hooks) to act as its owner.
func WithTrustToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, trustTokenKey{}, token)
}

// TrustToken returns the trust token ctx carries, or "".
func TrustToken(ctx context.Context) string {
	t, _ := ctx.Value(trustTokenKey{}).(string)
	return t
}
