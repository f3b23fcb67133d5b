// Package resource is the seam between the manager and the kinds of capacity a lease can
// reserve: each kind is a Type, in a package of its own (resource/host, …), and the
// manager validates, plans and checks every reservation through its type, so adding a
// kind is a new package, not a change everywhere.
package resource

import (
	"context"
	"slices"
	"strings"
	"time"

	"climate"
	"climate/plan"
)

// View is what planning reads: the availability index (every resource's busy intervals)
// and the properties filters may name, as of one pair of store revisions.
type View struct {
	// Index holds the hosts; its revisions are the view's.
	Index      *plan.Index
	Properties map[string]climate.ResourceProperty
	// FloatingIPs holds the floating IP addresses (plan.Index serves any resource that
	// one reservation at a time holds), and Addresses finds one by network and address.
	FloatingIPs *plan.Index
	Addresses   map[[2]string]*climate.FloatingIP
	// ReclaimFrom and Notice are preemption settings the manager gives one plan on a
	// copy of the view: a request that starts at or after ReclaimFrom may take hosts back
	// from preemptible leases (zero: never), and a preemptible lease holds each host for
	// at least Notice (the notice it is given before one is taken back).
	ReclaimFrom time.Time
	Notice      time.Duration
}

// Apply records allocation changes in every index of the view (each ignores other
// resources' ids).
func (v *View) Apply(remove, add []climate.Allocation) {
	v.Index.Apply(remove, add)
	if v.FloatingIPs != nil {
		v.FloatingIPs.Apply(remove, add)
	}
}

// Holds returns what both indexes of the view hold on the resources ids over [from, to),
// leaving lease skip's out (plan.Index.Holds).
func (v *View) Holds(ids []string, from, to time.Time, skip string) []climate.Allocation {
	out := v.Index.Holds(ids, from, to, skip)
	if v.FloatingIPs != nil {
		out = append(out, v.FloatingIPs.Holds(ids, from, to, skip)...)
	}
	return out
}

// NewView builds a view from the inventory and the allocations that may still matter. The
// options (plan.WithCleaning) configure the hosts' index only: a cleaning time is a host
// setting, floating IPs get none.
func NewView(hosts []climate.Host, fips []climate.FloatingIP, props []climate.ResourceProperty, allocs []climate.Allocation, hostOpts ...plan.Option) *View {
	v := &View{Index: plan.NewIndex(hosts, allocs, hostOpts...), Properties: make(map[string]climate.ResourceProperty, len(props)),
		Addresses: make(map[[2]string]*climate.FloatingIP, len(fips))}
	for _, p := range props {
		v.Properties[p.Name] = p
	}
	// Addresses as the planner's resources: the address as the name, the network as a
	// property the floating IP type filters on.
	as := make([]climate.Host, len(fips))
	for i := range fips {
		f := &fips[i]
		v.Addresses[[2]string{f.FloatingNetworkID, f.Address}] = f
		as[i] = climate.Host{ID: f.ID, HypervisorHostname: f.Address, Reservable: f.Reservable, CreatedAt: f.CreatedAt,
			Extra: map[string]string{NetworkProperty: f.FloatingNetworkID}}
	}
	v.FloatingIPs = plan.NewIndex(as, allocs)
	return v
}

// NetworkProperty is the property holding an address's network in View.FloatingIPs.
const NetworkProperty = "floating_network_id"

// Type is one kind of reservable capacity.
type Type interface {
	// Name is the reservations' resource_type ("physical:host").
	Name() string
	// New validates the reservation of a create request and returns it; the manager sets
	// its ids, status and times.
	New(ctx context.Context, rr climate.ReservationRequest) (climate.Reservation, error)
	// Update applies the fields an update request gives to r and validates the result.
	Update(ctx context.Context, r *climate.Reservation, rr climate.ReservationRequest) error
	// Plan chooses r's resources over l's window on v and returns them as allocations
	// (ResourceID, and Slots and Size for slots of a shared resource; the manager sets the
	// rest). had are r's allocations before an update, kept where they still fit; planned
	// are what the lease's earlier reservations were given in this plan (a resource held
	// whole there is taken; slots add to their host's load). rotate, when not zero, makes
	// it start its scan elsewhere (a retry after losing a race).
	Plan(v *View, l *climate.Lease, r *climate.Reservation, had, planned []climate.Allocation, rotate int) ([]climate.Allocation, error)
	// Fields returns the keys r shows on the wire beside every reservation's common ones,
	// as Blazar shows them for the type.
	Fields(r *climate.Reservation) map[string]any
	// Hosts returns the hosts r holds whole: what the lease's events act on (host hooks
	// at start, before end and end; power management). None for a type whose resources
	// are not hosts, or that shares its hosts with other leases.
	Hosts(r *climate.Reservation) []string
}

// Runs is a Type whose Plan gives each resource of a preemptible lease an end of its
// own (until the resource's next booking: resource/host). The manager plans a
// preemptible lease's reservation of another type over the longest window from the
// lease's start in which it fits, every allocation ending there.
type Runs interface {
	Type
	PlansRuns()
}

// Starts returns, in order and without repeats, the instants in (from, to) at which a
// hold of the view begins, each less the cleaning time of its index: the latest ends a
// preemptible lease may be given.
func (v *View) Starts(from, to time.Time) []time.Time {
	out := append(v.Index.Starts(from, to), v.FloatingIPs.Starts(from, to)...)
	slices.SortFunc(out, time.Time.Compare)
	return slices.Compact(out)
}

// Hosts returns the hosts r holds whole according to its type in ts (none for a type ts
// lacks).
func (ts Types) Hosts(r *climate.Reservation) []string {
	for _, t := range ts {
		if t.Name() == r.ResourceType {
			return t.Hosts(r)
		}
	}
	return nil
}

// Searcher is a Type that finds, by itself and faster than planning at every candidate
// start, the earliest windows in which one of its reservations fits.
type Searcher interface {
	// Earliest returns up to limit windows of length d in [after, deadline), earliest
	// first, in which r fits on v.
	Earliest(v *View, r *climate.Reservation, after, deadline time.Time, d time.Duration, limit int) ([]climate.Slot, error)
}

// Fields returns the wire keys of r's type, or none for a type ts lacks.
func (ts Types) Fields(r *climate.Reservation) map[string]any {
	for _, t := range ts {
		if t.Name() == r.ResourceType {
			return t.Fields(r)
		}
	}
	return nil
}

// IDs returns the resource ids of allocations, in order.
func IDs(allocs []climate.Allocation) []string {
	out := make([]string, len(allocs))
	for i, a := range allocs {
		out[i] = a.ResourceID
	}
	return out
}

// Whole returns allocations of the whole of each resource in ids.
func Whole(ids []string) []climate.Allocation {
	out := make([]climate.Allocation, len(ids))
	for i, id := range ids {
		out[i].ResourceID = id
	}
	return out
}

// Taken returns the resources the allocations hold, whole or in part.
func Taken(allocs []climate.Allocation) map[string]bool {
	out := make(map[string]bool, len(allocs))
	for _, a := range allocs {
		out[a.ResourceID] = true
	}
	return out
}

// Types is the set of types a service offers, by name.
type Types []Type

// Get returns the type named name, or the 400 Blazar answers for one it does not support.
func (ts Types) Get(name string) (Type, error) {
	if name == "" {
		return nil, climate.Errorf(climate.CodeInvalid, "Missing parameter resource_type")
	}
	for _, t := range ts {
		if t.Name() == name {
			return t, nil
		}
	}
	return nil, climate.Errorf(climate.CodeInvalid, "The %s resource type is not supported (supported: %s)", name, strings.Join(ts.Names(), ", "))
}

// Names returns the types' names.
func (ts Types) Names() []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name()
	}
	return out
}

// given lists the per-type fields a request gives, by their wire names.
func given(rr climate.ReservationRequest) []string {
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"min", rr.Min != nil}, {"max", rr.Max != nil}, {"hypervisor_properties", rr.HypervisorProperties != nil},
		{"resource_properties", rr.ResourceProperties != nil}, {"before_end", rr.BeforeEnd != nil},
		{"network_id", rr.NetworkID != nil}, {"amount", rr.Amount != nil}, {"required_floatingips", rr.RequiredFloatingIPs != nil},
		{"vcpus", rr.VCPUs != nil}, {"memory_mb", rr.MemoryMB != nil}, {"disk_gb", rr.DiskGB != nil},
		{"affinity", rr.Affinity != nil}, {"flavor_id", rr.FlavorID != nil},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// Only refuses a request that gives fields of another type than t (allowed are t's).
func Only(t Type, rr climate.ReservationRequest, allowed ...string) error {
	for _, f := range given(rr) {
		if !slices.Contains(allowed, f) {
			return climate.Errorf(climate.CodeInvalid, "Unknown parameter %q in a %s reservation (accepted: %s)", f, t.Name(), strings.Join(allowed, ", "))
		}
	}
	return nil
}
