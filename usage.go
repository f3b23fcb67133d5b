package climate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Usage classes: what a reservation's resource-hours count. Host reservations count
// host-hours, instance reservations vCPU-hours, floating IP reservations IP-hours.
const (
	ClassHost       = "host"
	ClassVCPU       = "vcpu"
	ClassFloatingIP = "floatingip"
)

// UsageClasses lists the usage classes, in the order reports show them.
var UsageClasses = []string{ClassHost, ClassVCPU, ClassFloatingIP}

// UsageRecord is what one allocation of a reservation reserved and held (Climate's
// extension: the accounting of issue "fair use"). It is written in the transactions that
// change the lease, as the lease moves through its events, and outlives the lease.
type UsageRecord struct {
	// AllocationID identifies the record: one per allocation a lease ever had.
	AllocationID                        string
	ReservationID, LeaseID, LeaseName   string
	ProjectID, ResourceType, ResourceID string
	Class                               string
	// Units is how many of Class the allocation holds: 1 host or IP, or its vCPUs.
	Units int
	// Start and End are the reserved window (the allocation's, as last planned).
	Start, End time.Time
	// HeldFrom is when the lease began to hold it (became ACTIVE); zero while it has not.
	// HeldUntil is when it stopped (the lease ended, failed or was deleted, or the
	// allocation was taken away); zero while held or never held.
	HeldFrom, HeldUntil time.Time
	// Rate is the cost of one hour of the whole allocation (Units × the class's price ×
	// the host's multipliers), fixed when the allocation was booked.
	Rate float64
	// Cost is what the allocation charges the project's budget now: the whole reserved
	// window while it is open, what was held once it is closed.
	Cost float64
	// Closed is set once the allocation is over: held and released, or released unheld.
	Closed    bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ReservedHours is the record's reserved resource-hours.
func (u *UsageRecord) ReservedHours() float64 {
	return float64(u.Units) * u.End.Sub(u.Start).Hours()
}

// HeldHours is the resource-hours held up to now.
func (u *UsageRecord) HeldHours(now time.Time) float64 {
	from, until := u.Held(now)
	return float64(u.Units) * until.Sub(from).Hours()
}

// Held returns the span held up to now (empty when nothing was).
func (u *UsageRecord) Held(now time.Time) (from, until time.Time) {
	if u.HeldFrom.IsZero() {
		return time.Time{}, time.Time{}
	}
	until = u.HeldUntil
	if until.IsZero() {
		until = Earlier(now, u.End)
	}
	if until.Before(u.HeldFrom) {
		until = u.HeldFrom
	}
	return u.HeldFrom, until
}

// ProjectCharge is what a project's budget was charged (the sum of its usage records'
// costs), how many of its leases have open records, and the units of each class its open
// records hold (at any time: an upper bound of what it holds at once), kept as running
// totals so limits are checked without reading the records.
type ProjectCharge struct {
	Charged                               float64
	OpenLeases                            int
	OpenHosts, OpenVCPUs, OpenFloatingIPs int
}

// Open returns the units of class the open records hold.
func (c ProjectCharge) Open(class string) int {
	switch class {
	case ClassHost:
		return c.OpenHosts
	case ClassVCPU:
		return c.OpenVCPUs
	case ClassFloatingIP:
		return c.OpenFloatingIPs
	}
	return 0
}

// AddOpen adds n units of class to c.
func (c *ProjectCharge) AddOpen(class string, n int) {
	switch class {
	case ClassHost:
		c.OpenHosts += n
	case ClassVCPU:
		c.OpenVCPUs += n
	case ClassFloatingIP:
		c.OpenFloatingIPs += n
	}
}

// UsageFilter selects usage records. Zero fields match everything.
type UsageFilter struct {
	ProjectID, LeaseID string
	// LeaseIDs, when set, keeps the records of these leases.
	LeaseIDs []string
	// OpenOnly keeps the records not closed.
	OpenOnly bool
	// From and To, when non-zero, keep records whose reserved window overlaps [From, To).
	From, To time.Time
	// AfterLease, AfterReservation and AfterAllocation keep the records after this one
	// in list order (a keyset position); Limit bounds the count (0: no bound).
	AfterLease, AfterReservation, AfterAllocation string
	Limit                                         int
}

// ProjectLimits are an operator's limits on one project (nil fields: no limit). They are
// checked inside the write transaction of each lease creation and update.
type ProjectLimits struct {
	ProjectID string
	// MaxHosts, MaxVCPUs and MaxFloatingIPs bound what the project holds at any instant.
	MaxHosts, MaxVCPUs, MaxFloatingIPs *int
	// MaxLeases bounds the project's leases booked and not yet over.
	MaxLeases *int
	// MaxLeaseDuration overrides the server's maximum lease duration for the project.
	MaxLeaseDuration *time.Duration
	// MaxAdvance bounds how far after its creation a lease may start.
	MaxAdvance *time.Duration
	// Budget bounds what the project's leases may cost, in the units of Prices: by
	// default one unit per host-hour, vCPU-hour or IP-hour.
	Budget *float64
	// Prices are the project's price per resource-hour of each class and its multipliers
	// for host properties.
	Prices Prices
	// Exempt projects are not held to any rule: these limits, the server's durations or
	// the external filter.
	Exempt    bool
	UpdatedAt time.Time
}

// Prices say what a resource-hour costs.
type Prices struct {
	// PerHour is the price of one resource-hour of a class; a class missing costs 1.
	PerHour map[string]float64
	// Multipliers scale the price of a host (and of instance slots on it) having a
	// property: a host matching several is scaled by each.
	Multipliers []PriceMultiplier
}

// PriceMultiplier scales the price of hosts whose property Property equals Value.
type PriceMultiplier struct {
	Property string  `json:"property"`
	Value    string  `json:"value"`
	Factor   float64 `json:"factor"`
}

// Price returns the price of one resource-hour of class.
func (p Prices) Price(class string) float64 {
	if v, ok := p.PerHour[class]; ok {
		return v
	}
	return 1
}

// Multiplier returns the product of the multipliers whose property h has.
func (p Prices) Multiplier(h *Host) float64 {
	f := 1.0
	for _, m := range p.Multipliers {
		if v, ok := h.Property(m.Property); ok && v == m.Value {
			f *= m.Factor
		}
	}
	return f
}

// UsageStore is the part of a Tx that keeps usage records, project limits and what each
// project's budget was charged.
type UsageStore interface {
	// ListUsage returns the records matching f, ordered by lease id, reservation id, then
	// allocation id (a lease's, and a reservation's, records together).
	ListUsage(ctx context.Context, f UsageFilter) ([]UsageRecord, error)
	// PutUsage inserts or replaces records by lease, reservation and allocation id.
	PutUsage(ctx context.Context, rs []UsageRecord) error
	// ChargeProject adds delta to project's totals. With totals, for a caller that checks
	// limits on them, it returns the new totals, and concurrent chargers that ask for
	// them take turns (PostgreSQL locks the project's row until the transaction ends);
	// without, it may only record the delta, with no lock, and return the zero totals.
	ChargeProject(ctx context.Context, project string, delta ProjectCharge, totals bool) (ProjectCharge, error)
	// ProjectCharged returns what project's budget was charged (zero when never).
	ProjectCharged(ctx context.Context, project string) (ProjectCharge, error)
	// GetProjectLimits returns project's limits; ok is false when none were set.
	GetProjectLimits(ctx context.Context, project string) (l *ProjectLimits, ok bool, err error)
	// PutProjectLimits sets a project's limits.
	PutProjectLimits(ctx context.Context, l *ProjectLimits) error
}

// storedLimits is how stores keep a project's limits: one JSON document, durations in
// seconds, so both stores read and write them alike.
type storedLimits struct {
	MaxHosts         *int               `json:"max_hosts,omitempty"`
	MaxVCPUs         *int               `json:"max_vcpus,omitempty"`
	MaxFloatingIPs   *int               `json:"max_floating_ips,omitempty"`
	MaxLeases        *int               `json:"max_leases,omitempty"`
	MaxLeaseDuration *int64             `json:"max_lease_duration,omitempty"`
	MaxAdvance       *int64             `json:"max_advance,omitempty"`
	Budget           *float64           `json:"budget,omitempty"`
	PerHour          map[string]float64 `json:"prices,omitempty"`
	Multipliers      []PriceMultiplier  `json:"multipliers,omitempty"`
	Exempt           bool               `json:"exempt,omitempty"`
}

// EncodeLimits returns l as a store keeps it.
func EncodeLimits(l *ProjectLimits) (string, error) {
	s := storedLimits{MaxHosts: l.MaxHosts, MaxVCPUs: l.MaxVCPUs, MaxFloatingIPs: l.MaxFloatingIPs, MaxLeases: l.MaxLeases,
		MaxLeaseDuration: seconds(l.MaxLeaseDuration), MaxAdvance: seconds(l.MaxAdvance), Budget: l.Budget,
		PerHour: l.Prices.PerHour, Multipliers: l.Prices.Multipliers, Exempt: l.Exempt}
	b, err := json.Marshal(s)
	if err != nil {
		return "", &Error{Code: CodeInternal, Err: err}
	}
	return string(b), nil
}

// DecodeLimits reads a project's limits as a store keeps them.
func DecodeLimits(project, doc string, updated time.Time) (*ProjectLimits, error) {
	var s storedLimits
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		return nil, &Error{Code: CodeInternal, Err: fmt.Errorf("project %s's stored limits: %w", project, err)}
	}
	return &ProjectLimits{ProjectID: project, MaxHosts: s.MaxHosts, MaxVCPUs: s.MaxVCPUs, MaxFloatingIPs: s.MaxFloatingIPs,
		MaxLeases: s.MaxLeases, MaxLeaseDuration: duration(s.MaxLeaseDuration), MaxAdvance: duration(s.MaxAdvance),
		Budget: s.Budget, Prices: Prices{PerHour: s.PerHour, Multipliers: s.Multipliers}, Exempt: s.Exempt, UpdatedAt: updated}, nil
}

func seconds(d *time.Duration) *int64 {
	if d == nil {
		return nil
	}
	s := int64(*d / time.Second)
	return &s
}

func duration(s *int64) *time.Duration {
	if s == nil {
		return nil
	}
	d := time.Duration(*s) * time.Second
	return &d
}

// Patch is one field of a partial update: Set when the request named the field, Value
// nil when it asked to clear it.
type Patch[T any] struct {
	Set   bool
	Value *T
}

// LimitsUpdate changes some of a project's limits; fields not Set stay as they are.
type LimitsUpdate struct {
	MaxHosts, MaxVCPUs, MaxFloatingIPs, MaxLeases Patch[int]
	MaxLeaseDuration, MaxAdvance                  Patch[time.Duration]
	Budget                                        Patch[float64]
	// PerHour and Multipliers, when Set, replace the prices (nil: the defaults).
	PerHour     Patch[map[string]float64]
	Multipliers Patch[[]PriceMultiplier]
	Exempt      Patch[bool]
}

// ProjectAccount is a project's limits with what its budget was charged.
type ProjectAccount struct {
	Limits ProjectLimits
	// Charged is what the project's leases cost its budget now: their whole reserved
	// windows while open, what they held once over. OpenLeases counts its leases booked
	// and not yet over (those max_leases bounds).
	Charged    float64
	OpenLeases int
}

// UsageQuery is what a client asks of the usage records: a project (admins: any, or all
// when empty) and a window (zero: unbounded) that the figures are clipped to.
type UsageQuery struct {
	ProjectID string
	From, To  time.Time
}

// ReservationUsage is one reservation's usage within a query's window: the sums of its
// allocations' records.
type ReservationUsage struct {
	ProjectID, LeaseID, LeaseName, ReservationID, ResourceType, Class string
	Start, End                                                        time.Time
	// ReservedHours and HeldHours are resource-hours (Class-hours) in the window; Cost
	// is what the hours held there cost, and Charged what the reservation charges the
	// budget now (its whole window while open).
	ReservedHours, HeldHours, Cost, Charged float64
	// Open while the reservation may still hold something.
	Open bool
}

// UsageService serves usage records and project limits; the manager implements it.
type UsageService interface {
	// ListUsage passes the usage of each reservation matching q to fn, batch by batch.
	ListUsage(ctx context.Context, who Identity, q UsageQuery, fn func([]ReservationUsage) error) error
	GetProjectLimits(ctx context.Context, who Identity, project string) (*ProjectAccount, error)
	UpdateProjectLimits(ctx context.Context, who Identity, project string, u LimitsUpdate) (*ProjectAccount, error)
}
