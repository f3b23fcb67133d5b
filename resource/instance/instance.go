// Package instance is the virtual:instance resource type: amount instance-sized slots
// (vcpus, memory, disk each) on shared hosts, counted per slot and per instant, with
// Blazar's affinity rules. Its planning also serves flavor:instance (resource/flavor).
package instance

import (
	"context"
	"strings"

	"climate"
	"climate/plan"
	"climate/query"
	"climate/resource"
	"climate/resource/host"
)

// Name is the type's resource_type.
const Name = "virtual:instance"

// Type implements resource.Type for virtual:instance.
type Type struct{}

var _ resource.Type = Type{}

// fields are the request keys of an instance reservation.
var fields = []string{"amount", "vcpus", "memory_mb", "disk_gb", "affinity", "resource_properties"}

// Name implements resource.Type.
func (Type) Name() string { return Name }

func invalid(format string, args ...any) error {
	return climate.Errorf(climate.CodeInvalid, format, args...)
}

// New implements resource.Type with Blazar's rules: amount, vcpus, memory_mb and disk_gb
// required (one message naming every missing key); affinity and resource_properties may
// be left out (null and "", where Blazar insists on the keys).
func (t Type) New(_ context.Context, rr climate.ReservationRequest) (climate.Reservation, error) {
	if err := resource.Only(t, rr, fields...); err != nil {
		return climate.Reservation{}, err
	}
	var missing []string
	for _, f := range []struct {
		name string
		v    *int
	}{{"amount", rr.Amount}, {"vcpus", rr.VCPUs}, {"memory_mb", rr.MemoryMB}, {"disk_gb", rr.DiskGB}} {
		if f.v == nil {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return climate.Reservation{}, invalid("Missing parameter %s", strings.Join(missing, ", "))
	}
	r := climate.Reservation{ResourceType: Name, Amount: *rr.Amount, Size: climate.Size{VCPUs: *rr.VCPUs, MemoryMB: *rr.MemoryMB, DiskGB: *rr.DiskGB}}
	if rr.ResourceProperties != nil {
		r.ResourceProperties = *rr.ResourceProperties
	}
	SetAffinity(&r, rr.Affinity)
	return r, validate(&r)
}

// Update implements resource.Type: every field may change; the slots are re-planned,
// those the reservation holds kept where they still fit.
func (t Type) Update(_ context.Context, r *climate.Reservation, rr climate.ReservationRequest) error {
	if err := resource.Only(t, rr, fields...); err != nil {
		return err
	}
	for _, f := range []struct {
		to *int
		v  *int
	}{{&r.Amount, rr.Amount}, {&r.Size.VCPUs, rr.VCPUs}, {&r.Size.MemoryMB, rr.MemoryMB}, {&r.Size.DiskGB, rr.DiskGB}} {
		if f.v != nil {
			*f.to = *f.v
		}
	}
	if rr.ResourceProperties != nil {
		r.ResourceProperties = *rr.ResourceProperties
	}
	SetAffinity(r, rr.Affinity)
	return validate(r)
}

// SetAffinity applies a request's affinity (nil: not given) to r, giving r a server
// group id of Climate's making when it gains an affinity and none when it loses it.
func SetAffinity(r *climate.Reservation, a *climate.Affinity) {
	if a == nil {
		return
	}
	r.Affinity = a.Value
	switch {
	case r.Affinity == nil:
		r.ServerGroupID = ""
	case r.ServerGroupID == "":
		r.ServerGroupID = climate.NewID()
	}
}

func validate(r *climate.Reservation) error {
	if err := CheckAmount(r.Amount); err != nil {
		return err
	}
	if r.Size.VCPUs <= 0 {
		return invalid("Malformed parameter vcpus (must be greater than or equal to 1)")
	}
	if r.Size.MemoryMB <= 0 {
		return invalid("Malformed parameter memory_mb (must be greater than or equal to 1)")
	}
	if r.Size.DiskGB < 0 {
		return invalid("Malformed parameter disk_gb (must be greater than or equal to 0)")
	}
	if err := climate.CheckText("A property query", r.ResourceProperties, climate.MaxTextLength); err != nil {
		return err
	}
	_, err := query.Parse(r.ResourceProperties)
	return err
}

// CheckAmount refuses an amount of slots below one.
func CheckAmount(n int) error {
	if n <= 0 {
		return invalid("Malformed parameter amount (must be greater than or equal to 1)")
	}
	return nil
}

// Plan implements resource.Type: r.Amount slots of r.Size on hosts matching
// resource_properties.
func (Type) Plan(v *resource.View, l *climate.Lease, r *climate.Reservation, had, planned []climate.Allocation, rotate int) ([]climate.Allocation, error) {
	q, err := host.Queries(v.Properties, [2]string{"resource_properties", r.ResourceProperties})
	if err != nil {
		return nil, err
	}
	return PlanSlots(v, l, r, host.Matcher(q), q.String(), had, planned, rotate)
}

// PlanSlots places r.Amount slots of r.Size with r.Affinity on hosts match accepts
// (filterKey names match for the planner's cache), keeping the slots r had and counting
// the lease's other reservations: hosts they hold whole are out, slots they hold load
// their host.
func PlanSlots(v *resource.View, l *climate.Lease, r *climate.Reservation, match func(*climate.Host) bool, filterKey string, had, planned []climate.Allocation, rotate int) ([]climate.Allocation, error) {
	req := plan.SlotsRequest{
		Window: plan.Window{Start: l.Start, End: l.End}, Amount: r.Amount, Size: r.Size, Affinity: r.Affinity,
		Match: match, FilterKey: filterKey, Prefer: map[string]int{}, Exclude: map[string]bool{}, Extra: map[string]climate.Size{},
		Lease: l.ID, Rotate: rotate, ReclaimFrom: v.ReclaimFrom,
	}
	for _, a := range had {
		req.Prefer[a.ResourceID] += a.Slots
	}
	for _, a := range planned {
		if a.Shared() {
			req.Extra[a.ResourceID] = req.Extra[a.ResourceID].Plus(a.Size.Times(a.Slots))
		} else {
			req.Exclude[a.ResourceID] = true
		}
	}
	placed, err := v.Index.PlaceSlots(req)
	if err != nil {
		return nil, err
	}
	out := make([]climate.Allocation, len(placed))
	for i, p := range placed {
		out[i] = climate.Allocation{ResourceID: p.HostID, Slots: p.Slots, Size: r.Size}
	}
	return out, nil
}

// Fields implements resource.Type with Blazar's keys for instance reservations. The
// flavor instances boot with is the reservation's own (its id, as Blazar names it);
// aggregate_id stays null until an OpenStack driver creates the aggregate.
func (Type) Fields(r *climate.Reservation) map[string]any {
	return Fields(r)
}

// Fields returns an instance reservation's wire keys (flavor:instance shows the same).
func Fields(r *climate.Reservation) map[string]any {
	var group any
	if r.ServerGroupID != "" {
		group = r.ServerGroupID
	}
	return map[string]any{"amount": r.Amount, "vcpus": r.Size.VCPUs, "memory_mb": r.Size.MemoryMB, "disk_gb": r.Size.DiskGB,
		"affinity": r.Affinity, "resource_properties": r.ResourceProperties, "flavor_id": r.ID, "aggregate_id": nil,
		"server_group_id": group}
}

// Hosts implements resource.Type: none; slots share their hosts with other leases, so
// no host-wide action (a reboot, a power-off) may run for them.
func (Type) Hosts(*climate.Reservation) []string { return nil }
