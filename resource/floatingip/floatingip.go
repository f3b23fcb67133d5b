// Package floatingip is the virtual:floatingip resource type: external IP addresses of one
// network, registered by admins (/v1/floatingips), each held by one reservation at a time.
package floatingip

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"climate"
	"climate/plan"
	"climate/resource"
)

// Name is the type's resource_type.
const Name = "virtual:floatingip"

// Type implements resource.Type for virtual:floatingip.
type Type struct{}

var _ resource.Type = Type{}

// fields are the request keys of a floating IP reservation.
var fields = []string{"network_id", "amount", "required_floatingips"}

// Name implements resource.Type.
func (Type) Name() string { return Name }

func invalid(format string, args ...any) error {
	return climate.Errorf(climate.CodeInvalid, format, args...)
}

// New implements resource.Type with Blazar's rules: network_id and amount required,
// amount ≥ 1, required_floatingips valid addresses, no more of them than amount.
func (t Type) New(_ context.Context, rr climate.ReservationRequest) (climate.Reservation, error) {
	if err := resource.Only(t, rr, fields...); err != nil {
		return climate.Reservation{}, err
	}
	if rr.NetworkID == nil || *rr.NetworkID == "" {
		return climate.Reservation{}, invalid("Missing parameter network_id")
	}
	if rr.Amount == nil {
		return climate.Reservation{}, invalid("Missing parameter amount")
	}
	r := climate.Reservation{ResourceType: Name, NetworkID: *rr.NetworkID, Amount: *rr.Amount}
	if rr.RequiredFloatingIPs != nil {
		r.RequiredFloatingIPs = *rr.RequiredFloatingIPs
	}
	return r, validate(&r)
}

// Update implements resource.Type: amount may change; network_id may not, and
// required_floatingips only to none (Blazar's rules).
func (t Type) Update(_ context.Context, r *climate.Reservation, rr climate.ReservationRequest) error {
	if err := resource.Only(t, rr, fields...); err != nil {
		return err
	}
	if rr.NetworkID != nil && *rr.NetworkID != r.NetworkID {
		return invalid("network_id of a floating IP reservation cannot be updated")
	}
	if rr.RequiredFloatingIPs != nil {
		if len(*rr.RequiredFloatingIPs) > 0 && !slices.Equal(canonical(*rr.RequiredFloatingIPs), r.RequiredFloatingIPs) {
			return invalid("required_floatingips can only be updated to an empty list")
		}
		r.RequiredFloatingIPs = canonical(*rr.RequiredFloatingIPs)
	}
	if rr.Amount != nil {
		r.Amount = *rr.Amount
	}
	return validate(r)
}

// canonical returns addresses in canonical form, leaving those that do not parse as they
// are (validate refuses them).
func canonical(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		if a, err := netip.ParseAddr(s); err == nil {
			s = a.Unmap().String()
		}
		out[i] = s
	}
	return out
}

func validate(r *climate.Reservation) error {
	if err := climate.CheckText("network_id", r.NetworkID, climate.MaxNameLength); err != nil {
		return err
	}
	if r.Amount <= 0 {
		return invalid("Malformed parameter amount (must be greater than or equal to 1)")
	}
	for i, s := range r.RequiredFloatingIPs {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return invalid("IP address %.64q is invalid form.", s)
		}
		r.RequiredFloatingIPs[i] = a.Unmap().String()
	}
	if len(r.RequiredFloatingIPs) == 0 {
		r.RequiredFloatingIPs = nil
	}
	for i, s := range r.RequiredFloatingIPs {
		if slices.Contains(r.RequiredFloatingIPs[:i], s) {
			return invalid("Floating IP %s is required twice", s)
		}
	}
	if len(r.RequiredFloatingIPs) > r.Amount {
		return invalid("The number of required floating IPs (%d) is larger than amount (%d).", len(r.RequiredFloatingIPs), r.Amount)
	}
	return nil
}

// Plan implements resource.Type: the required addresses, then best fit among the
// network's free ones (plan.Index, as for hosts).
func (Type) Plan(v *resource.View, l *climate.Lease, r *climate.Reservation, had, planned []climate.Allocation, rotate int) ([]climate.Allocation, error) {
	prefer := make([]string, 0, len(r.RequiredFloatingIPs)+len(had))
	for _, addr := range r.RequiredFloatingIPs {
		f := v.Addresses[[2]string{r.NetworkID, addr}]
		if f == nil {
			return nil, invalid("Not enough floating IPs available: %s is not a registered floating IP of network %s", addr, r.NetworkID)
		}
		prefer = append(prefer, f.ID)
	}
	for _, id := range resource.IDs(had) { // a required address is also one it had
		if !slices.Contains(prefer, id) {
			prefer = append(prefer, id)
		}
	}
	net := r.NetworkID
	ids, _, err := v.FloatingIPs.PlaceHosts(plan.HostRequest{
		Window: plan.Window{Start: l.Start, End: l.End}, Min: r.Amount, Max: r.Amount,
		Match:     func(h *climate.Host) bool { return h.Extra[resource.NetworkProperty] == net },
		FilterKey: "network " + net, Prefer: prefer, Exclude: resource.Taken(planned), Lease: l.ID, Rotate: rotate,
		ReclaimFrom: v.ReclaimFrom,
	})
	if err != nil {
		return nil, climate.Errorf(climate.CodeConflict, "Not enough floating IPs available: %d requested on network %s, fewer are free in the window", r.Amount, r.NetworkID)
	}
	var busy []string
	for i, id := range prefer[:len(r.RequiredFloatingIPs)] {
		if !slices.Contains(ids, id) {
			busy = append(busy, r.RequiredFloatingIPs[i])
		}
	}
	if len(busy) > 0 {
		return nil, climate.Errorf(climate.CodeConflict, "Not enough floating IPs available: required %s not free in the window", strings.Join(busy, ", "))
	}
	return resource.Whole(ids), nil
}

// Fields implements resource.Type with Blazar's keys for floating IP reservations.
func (Type) Fields(r *climate.Reservation) map[string]any {
	return map[string]any{"network_id": r.NetworkID, "amount": r.Amount, "required_floatingips": append([]string{}, r.RequiredFloatingIPs...)}
}

// Hosts implements resource.Type: none; addresses are not hosts.
func (Type) Hosts(*climate.Reservation) []string { return nil }
