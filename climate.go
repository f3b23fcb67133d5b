// Package climate holds Climate's domain: leases, reservations, allocations, events and the
// inventory they draw on, the errors every layer shares, and the interfaces adapters implement.
// It imports nothing but the standard library.
package climate

import (
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
	MissingResources    bool
	ResourcesChanged    bool
	CreatedAt           time.Time
	UpdatedAt           time.Time
	Allocations         []Allocation
}

// Allocation books one resource for one reservation over its lease's window.
// The window is stored with the allocation so that overlap checks need no join.
type Allocation struct {
	ID            string
	ReservationID string
	LeaseID       string
	ResourceID    string
	Start, End    time.Time
}

// Overlaps reports whether the half-open windows [s1, e1) and [s2, e2) intersect.
func Overlaps(s1, e1, s2, e2 time.Time) bool { return s1.Before(e2) && s2.Before(e1) }

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
}

// IsAdmin reports whether the identity holds the admin role.
func (id Identity) IsAdmin() bool {
	for _, r := range id.Roles {
		if r == "admin" {
			return true
		}
	}
	return false
}
