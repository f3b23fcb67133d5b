// Package climate holds Climate's domain: leases, reservations, allocations, events and the
// inventory they draw on, the errors every layer shares, and the interfaces adapters implement.
// It imports nothing but the standard library.
package climate

import (
	"fmt"
	"strconv"
	"time"
)

// Resource types a reservation may ask for (Blazar's names).
const (
	ResourceTypeHost = "physical:host"
)

// Lease is a project's contract over the half-open window [Start, End).
type Lease struct {
	ID           string
	Name         string
	UserID       string
	ProjectID    string
	TrustID      string
	Start        time.Time
	End          time.Time
	Status       LeaseStatus
	Degraded     bool
	CreatedAt    time.Time
	UpdatedAt    time.Time // zero when never updated
	Reservations []Reservation
	Events       []Event
	// Type is the lease's type (Climate's extension; "" behaves as Blazar's leases do).
	// RetryUntil is when a waiting retry or best-effort lease gives up; Priority orders
	// waiting leases (higher first, then first come, first served).
	Type       LeaseType
	RetryUntil time.Time
	Priority   int
	// MaxRetries, when not 0, makes a waiting lease give up after that many re-plans that
	// did not fit; Retries counts them.
	MaxRetries, Retries int
	// Preemptible leases (Climate's extension) run on hosts that are free now but may be
	// reserved later: a lease that reserves such a host takes it back, after a
	// lease.preempted notice, and the preemptible lease shrinks or ends (OnPreempt).
	Preemptible bool
	OnPreempt   PreemptAction
	// Cost is what the lease charges its project's budget now, from its usage records
	// (Climate's extension); nil when not read.
	Cost *float64
	// Names names the resources the lease holds as the plan that gave them saw the
	// inventory, which its commit checked was still current; nil when not known (a lease
	// read from the store). The API shows names beside ids (Climate's extension).
	Names *ResourceNames
}

// ResourceNames names resources by id: hosts (and the hosts of instance slots) by their
// hypervisor hostname, floating IPs by their address.
type ResourceNames struct {
	Hosts, Addresses map[string]string
}

// PreemptAction is what a preemptible lease does when one of its hosts is taken back.
type PreemptAction string

// Preempt actions. Shrink keeps the lease with its other hosts (it ends when it has none
// left); End ends the whole lease when the first host is taken back.
const (
	PreemptShrink PreemptAction = "shrink"
	PreemptEnd    PreemptAction = "end"
)

// LeaseType is how a lease treats a shortage of capacity (Climate's founding lease types).
type LeaseType string

// Lease types. Immediate starts now or not at all; Scheduled is accepted only for a
// window where it fits (Blazar's leases); Retry waits (WAITING) until capacity frees and
// starts as soon as it fits, or fails at its RetryUntil; BestEffort hunts the same way
// (IN_PROGRESS) and times out (TIMEDOUT).
const (
	LeaseImmediate  LeaseType = "immediate"
	LeaseRetry      LeaseType = "retry"
	LeaseBestEffort LeaseType = "best_effort"
	LeaseScheduled  LeaseType = "scheduled"
)

// Waits reports whether a lease of type t that does not fit is kept waiting.
func (t LeaseType) Waits() bool { return t == LeaseRetry || t == LeaseBestEffort }

// WaitingStatus is the status of a lease of type t while it waits for capacity, and
// GaveUpStatus the one it ends in when it never fits.
func (t LeaseType) WaitingStatus() LeaseStatus {
	if t == LeaseBestEffort {
		return LeaseInProgress
	}
	return LeaseWaiting
}

// GaveUpStatus is the end status of a lease of type t that never fitted.
func (t LeaseType) GaveUpStatus() LeaseStatus {
	if t == LeaseBestEffort {
		return LeaseTimedOut
	}
	return LeaseFailed
}

// Event returns the lease's first event of type t, or nil.
func (l *Lease) Event(t EventType) *Event {
	for i := range l.Events {
		if l.Events[i].Type == t {
			return &l.Events[i]
		}
	}
	return nil
}

// Reservation is one resource request inside a lease and, once planned, its allocations.
type Reservation struct {
	ID           string
	LeaseID      string
	ResourceType string
	Status       ReservationStatus
	// Min and Max bound the number of hosts of a physical:host reservation.
	Min, Max int
	// HypervisorProperties and ResourceProperties are property queries as the client sent them.
	HypervisorProperties string
	ResourceProperties   string
	// BeforeEnd is the action at the before_end event: "", "default" or "snapshot".
	BeforeEnd string
	// NetworkID, Amount and RequiredFloatingIPs describe a virtual:floatingip reservation:
	// Amount addresses of the external network NetworkID, the RequiredFloatingIPs among them.
	NetworkID           string
	Amount              int
	RequiredFloatingIPs []string
	// Size and Affinity describe an instance reservation (virtual:instance,
	// flavor:instance): Amount slots of Size each; Affinity true puts them all on one host,
	// false on distinct hosts, nil anywhere (packing). ServerGroupID names the group that
	// enforces the affinity (Climate's id in standalone mode, Nova's once a driver makes
	// it); empty without affinity. A flavor:instance reservation keeps its source flavor,
	// extra specs included, as JSON in ResourceProperties, as Blazar does.
	Size             Size
	Affinity         *bool
	ServerGroupID    string
	MissingResources bool
	ResourcesChanged bool
	CreatedAt        time.Time
	UpdatedAt        time.Time
	Allocations      []Allocation
}

// Allocation books one resource for one reservation over its lease's window.
// The window is stored with the allocation so that overlap checks need no join.
type Allocation struct {
	ID            string
	ReservationID string
	LeaseID       string
	ResourceID    string
	Start, End    time.Time
	// Slots is, for an allocation that shares its resource with others (instance slots
	// on a host), how many slots of Size it holds there; 0 for one that holds the whole
	// resource. Stored on the allocation so capacity checks need no join.
	Slots int
	Size  Size
	// Preemptible marks the allocation of a preemptible lease: a reserving lease may take
	// its resource back from a notice ahead (the allocation then ends earlier).
	Preemptible bool
}

// Size is how much of a host one instance slot takes.
type Size struct {
	VCPUs, MemoryMB, DiskGB int
}

// Times returns s scaled by n (n slots of size s).
func (s Size) Times(n int) Size { return Size{s.VCPUs * n, s.MemoryMB * n, s.DiskGB * n} }

// Plus returns the sum of s and o.
func (s Size) Plus(o Size) Size {
	return Size{s.VCPUs + o.VCPUs, s.MemoryMB + o.MemoryMB, s.DiskGB + o.DiskGB}
}

// Within reports whether s fits in capacity c on every dimension.
func (s Size) Within(c Size) bool {
	return s.VCPUs <= c.VCPUs && s.MemoryMB <= c.MemoryMB && s.DiskGB <= c.DiskGB
}

// Shared reports whether the allocation holds slots of its resource rather than all of it.
func (a *Allocation) Shared() bool { return a.Slots > 0 }

// Capacity is what a host offers instance slots: its vcpus, memory and local disk (raw,
// as Blazar counts them, without allocation ratios).
func (h *Host) Capacity() Size { return Size{h.VCPUs, h.MemoryMB, h.LocalGB} }

// Overlaps reports whether the half-open windows [s1, e1) and [s2, e2) intersect.
func Overlaps(s1, e1, s2, e2 time.Time) bool { return s1.Before(e2) && s2.Before(e1) }

// Later returns the later of two times.
func Later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Earlier returns the earlier of two times.
func Earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Event is something due at a time for a lease.
type Event struct {
	ID        string
	LeaseID   string
	Type      EventType
	Time      time.Time
	Status    EventStatus
	CreatedAt time.Time
	UpdatedAt time.Time
	// ClaimedBy is the engine run (its instance id) holding the event while IN_PROGRESS.
	// Only claims write it; it is cleared when the event leaves IN_PROGRESS.
	ClaimedBy string
	// TakenOver is set, on an event Tx.ClaimDueEvents returns, when the event was claimed
	// already and its claim had lapsed: another run's claim taken over. Not stored.
	TakenOver bool
}

// EventType names what an event does.
type EventType string

// Event types. BeforeStart is Climate's heads-up; the others are Blazar's.
const (
	EventStartLease     EventType = "start_lease"
	EventEndLease       EventType = "end_lease"
	EventBeforeEndLease EventType = "before_end_lease"
	// EventBeforeStartLease is a heads-up before a lease starts (Climate's extension).
	EventBeforeStartLease EventType = "before_start_lease"
	// EventRetryDeadline ends a waiting retry or best-effort lease that never fitted
	// (Climate's extension).
	EventRetryDeadline EventType = "retry_deadline"
	// EventPreemptLease gives a preemptible lease notice that hosts are taken back from it
	// (at its allocations' ends, a notice ahead) (Climate's extension).
	EventPreemptLease EventType = "preempt_lease"
)

// EventStatus is an event's progress.
type EventStatus string

// Event statuses (Blazar's).
const (
	EventUndone     EventStatus = "UNDONE"
	EventInProgress EventStatus = "IN_PROGRESS"
	EventDone       EventStatus = "DONE"
	EventError      EventStatus = "ERROR"
)

// Host is a whole compute host an operator registered as reservable inventory.
type Host struct {
	ID                 string
	HypervisorHostname string
	ServiceName        string
	VCPUs              int
	MemoryMB           int
	LocalGB            int
	CPUInfo            string
	HypervisorType     string
	HypervisorVersion  int
	AvailabilityZone   string
	TrustID            string
	Reservable         bool
	// Extra holds the operator's extra capabilities (free-form string properties).
	Extra     map[string]string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Power is the host's power state under power management; nil when none was recorded.
	// Stores read it with the host; UpdateHost leaves it alone (SetHostPower writes it).
	Power *HostPower
}

// Property returns the value of a host property by its query name: a built-in column
// (vcpus, memory_mb, …) or an extra capability. ok is false when the host lacks it.
func (h *Host) Property(name string) (value string, ok bool) {
	switch name {
	case "id":
		return h.ID, true
	case "hypervisor_hostname":
		return h.HypervisorHostname, true
	case "service_name":
		return h.ServiceName, true
	case "vcpus":
		return strconv.Itoa(h.VCPUs), true
	case "memory_mb":
		return strconv.Itoa(h.MemoryMB), true
	case "local_gb":
		return strconv.Itoa(h.LocalGB), true
	case "cpu_info":
		return h.CPUInfo, true
	case "hypervisor_type":
		return h.HypervisorType, true
	case "hypervisor_version":
		return strconv.Itoa(h.HypervisorVersion), true
	case "availability_zone":
		return h.AvailabilityZone, true
	case "trust_id":
		return h.TrustID, true
	case "reservable":
		if h.Reservable {
			return "true", true
		}
		return "false", true
	}
	v, ok := h.Extra[name]
	return v, ok
}

// HostColumns are the built-in host properties; any other name is an extra capability.
var HostColumns = []string{
	"id", "hypervisor_hostname", "service_name", "vcpus", "memory_mb", "local_gb", "cpu_info",
	"hypervisor_type", "hypervisor_version", "availability_zone", "trust_id", "reservable",
}

// IsHostColumn reports whether name is a built-in host property.
func IsHostColumn(name string) bool {
	for _, c := range HostColumns {
		if c == name {
			return true
		}
	}
	return false
}

// ResourceProperty is a named extra capability known to the service.
type ResourceProperty struct {
	ID           string
	ResourceType string
	Name         string
	Private      bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Identity is who makes a request.
type Identity struct {
	UserID    string
	ProjectID string
	Roles     []string
	// Names and domains, as Keystone tells them (--auth keystone); empty otherwise.
	UserName, ProjectName         string
	UserDomainID, ProjectDomainID string
	// Token is the caller's Keystone token (--auth keystone), kept only in memory to
	// delegate the caller's roles to Climate (a trust); never stored or logged.
	Token string
}

// String describes the identity without its token, so that no log or message can leak
// it through %v.
func (id Identity) String() string {
	return fmt.Sprintf("user %s, project %s, roles %v", id.UserID, id.ProjectID, id.Roles)
}

// GoString is String, for %#v.
func (id Identity) GoString() string { return id.String() }

// IsAdmin reports whether the identity holds the admin role.
func (id Identity) IsAdmin() bool {
	for _, r := range id.Roles {
		if r == "admin" {
			return true
		}
	}
	return false
}
