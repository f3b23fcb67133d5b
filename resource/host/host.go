// Package host is the physical:host resource type: whole compute hosts, chosen by count
// (min to max) and property queries, each held by one reservation at a time.
package host

import (
	"context"
	"strings"
	"time"

	"climate"
	"climate/plan"
	"climate/query"
	"climate/resource"
)

// Type implements resource.Type for physical:host.
type Type struct{}

var _ resource.Type = Type{}

// Name implements resource.Type.
func (Type) Name() string { return climate.ResourceTypeHost }

// fields are the request keys of a host reservation.
var fields = []string{"min", "max", "hypervisor_properties", "resource_properties", "before_end"}

func invalid(format string, args ...any) error {
	return climate.Errorf(climate.CodeInvalid, format, args...)
}

// New implements resource.Type with Blazar's rules: min and max required, 1 ≤ min ≤ max,
// property queries that parse, before_end one of "", "default", "snapshot".
func (t Type) New(_ context.Context, rr climate.ReservationRequest) (climate.Reservation, error) {
	if err := resource.Only(t, rr, fields...); err != nil {
		return climate.Reservation{}, err
	}
	if rr.Min == nil {
		return climate.Reservation{}, invalid("Missing parameter min")
	}
	if rr.Max == nil {
		return climate.Reservation{}, invalid("Missing parameter max")
	}
	r := climate.Reservation{ResourceType: rr.ResourceType, Min: *rr.Min, Max: *rr.Max, BeforeEnd: "default"}
	if rr.HypervisorProperties != nil {
		r.HypervisorProperties = *rr.HypervisorProperties
	}
	if rr.ResourceProperties != nil {
		r.ResourceProperties = *rr.ResourceProperties
	}
	if rr.BeforeEnd != nil {
		r.BeforeEnd = *rr.BeforeEnd
	}
	return r, validate(&r)
}

// Update implements resource.Type: min, max and the queries may change, before_end not.
func (t Type) Update(_ context.Context, r *climate.Reservation, rr climate.ReservationRequest) error {
	if err := resource.Only(t, rr, fields...); err != nil {
		return err
	}
	if rr.BeforeEnd != nil {
		return invalid("Malformed parameter before_end: it cannot be updated")
	}
	if rr.Min != nil {
		r.Min = *rr.Min
	}
	if rr.Max != nil {
		r.Max = *rr.Max
	}
	if rr.HypervisorProperties != nil {
		r.HypervisorProperties = *rr.HypervisorProperties
	}
	if rr.ResourceProperties != nil {
		r.ResourceProperties = *rr.ResourceProperties
	}
	return validate(r)
}

func validate(r *climate.Reservation) error {
	if r.Min <= 0 || r.Max <= 0 {
		return invalid("Malformed parameter min and max (must be greater than or equal to 1)")
	}
	if r.Max < r.Min {
		return invalid("Invalid values for min/max of hosts. Max must be equal to or larger than min.")
	}
	switch r.BeforeEnd {
	case "", "default", "snapshot":
	default:
		return invalid("Malformed parameter before_end: %q (expected \"\", \"default\" or \"snapshot\")", r.BeforeEnd)
	}
	for _, s := range []string{r.HypervisorProperties, r.ResourceProperties} {
		if err := climate.CheckText("A property query", s, climate.MaxTextLength); err != nil {
			return err
		}
		if _, err := query.Parse(s); err != nil {
			return err
		}
	}
	return nil
}

// Plan implements resource.Type: best fit among the matching free hosts (plan.Index);
// for a preemptible lease, hosts free from its start (plan.PlacePreemptible).
func (Type) Plan(v *resource.View, l *climate.Lease, r *climate.Reservation, had, planned []climate.Allocation, rotate int) ([]climate.Allocation, error) {
	q, err := Filter(r, v.Properties)
	if err != nil {
		return nil, err
	}
	req := plan.HostRequest{
		Window: plan.Window{Start: l.Start, End: l.End}, Min: r.Min, Max: r.Max,
		Match: Matcher(q), FilterKey: q.String(), Prefer: resource.IDs(had), Exclude: resource.Taken(planned), Lease: l.ID, Rotate: rotate,
		ReclaimFrom: v.ReclaimFrom,
	}
	if l.Preemptible {
		// Hosts free now, each until the window's end or its next booking.
		// A lease that shrinks takes reserved-but-idle hosts first, leaving free hosts to
		// leases that need them now; one that ends at the first take-back, the longest.
		runs, _, err := v.Index.PlacePreemptible(req, v.Notice, l.OnPreempt != climate.PreemptEnd)
		if err != nil {
			return nil, err
		}
		out := make([]climate.Allocation, len(runs))
		for i, run := range runs {
			out[i] = climate.Allocation{ResourceID: run.ID, End: run.End, Preemptible: true}
		}
		return out, nil
	}
	hosts, _, err := v.Index.PlaceHosts(req)
	return resource.Whole(hosts), err
}

// PlansRuns marks Plan as giving each host of a preemptible lease its own end
// (resource.Runs).
func (Type) PlansRuns() {}

// Filter parses a reservation's two property queries and checks every property name it
// uses is known, so a typo is a 400 rather than a silent "no host matches".
func Filter(r *climate.Reservation, known map[string]climate.ResourceProperty) (*query.Query, error) {
	return Queries(known, [2]string{"hypervisor_properties", r.HypervisorProperties}, [2]string{"resource_properties", r.ResourceProperties})
}

// Queries parses named property queries ({name, query}) into one and checks their
// property names.
func Queries(known map[string]climate.ResourceProperty, queries ...[2]string) (*query.Query, error) {
	var qs []*query.Query
	for _, f := range queries {
		q, err := query.Parse(f[1])
		if err != nil {
			return nil, err
		}
		for _, p := range q.Properties() {
			if _, ok := known[p]; !ok && !climate.IsHostColumn(p) {
				return nil, invalid("Unknown property %q in %s: it is neither a host field (%s) nor a registered extra capability",
					p, f[0], strings.Join(climate.HostColumns, ", "))
			}
		}
		qs = append(qs, q)
	}
	return query.And(qs...), nil
}

// Matcher turns a query into the planner's filter (nil when it matches every host).
func Matcher(q *query.Query) func(*climate.Host) bool {
	if q.MatchAll() {
		return nil
	}
	return func(h *climate.Host) bool { return q.Match(h.Property) }
}

// Fields implements resource.Type with Blazar's keys for host reservations.
func (Type) Fields(r *climate.Reservation) map[string]any {
	return map[string]any{"min": r.Min, "max": r.Max, "hypervisor_properties": r.HypervisorProperties,
		"resource_properties": r.ResourceProperties, "before_end": r.BeforeEnd}
}

var _ resource.Searcher = Type{}

// Earliest implements resource.Searcher: the windows in which r's minimum of matching
// hosts is free (plan.Index's sweep).
func (Type) Earliest(v *resource.View, r *climate.Reservation, after, deadline time.Time, d time.Duration, limit int) ([]climate.Slot, error) {
	q, err := Filter(r, v.Properties)
	if err != nil {
		return nil, err
	}
	var out []climate.Slot
	for _, s := range v.Index.EarliestSlots(plan.SlotRequest{Count: r.Min, Duration: d, After: after, Deadline: deadline,
		Match: Matcher(q), FilterKey: q.String(), Limit: limit}) {
		out = append(out, climate.Slot{Start: s.Start, End: s.End, Free: s.Free})
	}
	return out, nil
}

// Hosts implements resource.Type: every host the reservation holds.
func (Type) Hosts(r *climate.Reservation) []string { return resource.IDs(r.Allocations) }
