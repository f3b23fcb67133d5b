// Package flavor is the flavor:instance resource type: amount instances of a registered
// flavor, planned as instance slots (resource/instance) of the flavor's size, with its
// extra specs mapped as in Blazar (§5.3): resources:VCPU/PCPU/MEMORY_MB/DISK_GB set the
// size, trait:T=required|forbidden filter hosts. Unlike Blazar, affinity and updates are
// supported.
//
// Standalone hosts have no Placement inventory: a host offers its vcpus (VCPU and PCPU
// alike), memory_mb and local_gb, and has trait T when its extra capability T is "true".
package flavor

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"climate"
	"climate/resource"
	"climate/resource/instance"
)

// Name is the type's resource_type.
const Name = "flavor:instance"

// Lookup returns a registered flavor; climate.CodeNotFound when there is none.
type Lookup func(ctx context.Context, id string) (*climate.Flavor, error)

// Type implements resource.Type for flavor:instance; Flavors finds the flavor a
// reservation names.
type Type struct{ Flavors Lookup }

var _ resource.Type = Type{}

// fields are the request keys of a flavor reservation. resource_properties is accepted
// as Blazar's client sends it ("") and replaced by the flavor, as Blazar does.
var fields = []string{"flavor_id", "amount", "affinity", "resource_properties"}

// Name implements resource.Type.
func (Type) Name() string { return Name }

func invalid(format string, args ...any) error {
	return climate.Errorf(climate.CodeInvalid, format, args...)
}

// New implements resource.Type: flavor_id and amount required; the flavor's size and
// extra specs are copied into the reservation, so a later change to the flavor does not
// change it.
func (t Type) New(ctx context.Context, rr climate.ReservationRequest) (climate.Reservation, error) {
	if err := resource.Only(t, rr, fields...); err != nil {
		return climate.Reservation{}, err
	}
	var missing []string
	if rr.FlavorID == nil || *rr.FlavorID == "" {
		missing = append(missing, "flavor_id")
	}
	if rr.Amount == nil {
		missing = append(missing, "amount")
	}
	if len(missing) > 0 {
		return climate.Reservation{}, invalid("Missing parameter %s", strings.Join(missing, ", "))
	}
	r := climate.Reservation{ResourceType: Name, Amount: *rr.Amount}
	if err := instance.CheckAmount(r.Amount); err != nil {
		return r, err
	}
	if err := t.setFlavor(ctx, &r, *rr.FlavorID); err != nil {
		return r, err
	}
	instance.SetAffinity(&r, rr.Affinity)
	return r, nil
}

// Update implements resource.Type: amount, affinity and the flavor may change.
func (t Type) Update(ctx context.Context, r *climate.Reservation, rr climate.ReservationRequest) error {
	if err := resource.Only(t, rr, fields...); err != nil {
		return err
	}
	if rr.Amount != nil {
		if err := instance.CheckAmount(*rr.Amount); err != nil {
			return err
		}
		r.Amount = *rr.Amount
	}
	if rr.FlavorID != nil {
		if err := t.setFlavor(ctx, r, *rr.FlavorID); err != nil {
			return err
		}
	}
	instance.SetAffinity(r, rr.Affinity)
	return nil
}

// source is the flavor as a reservation keeps it (in resource_properties, as Blazar).
type source struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	VCPUs      int               `json:"vcpus"`
	RAM        int               `json:"ram"`
	Disk       int               `json:"disk"`
	Ephemeral  int               `json:"OS-FLV-EXT-DATA:ephemeral"`
	ExtraSpecs map[string]string `json:"extra_specs"`
}

// setFlavor copies flavor id's size and specs into r.
func (t Type) setFlavor(ctx context.Context, r *climate.Reservation, id string) error {
	if err := climate.CheckText("flavor_id", id, climate.MaxNameLength); err != nil {
		return err
	}
	f, err := t.Flavors(ctx, id)
	if climate.ErrorCode(err) == climate.CodeNotFound {
		return invalid("Invalid flavor_id %q: no such flavor (climate flavor list shows them)", id)
	}
	if err != nil {
		return err
	}
	src := source{ID: f.ID, Name: f.Name, VCPUs: f.VCPUs, RAM: f.RAM, Disk: f.Disk, Ephemeral: f.Ephemeral, ExtraSpecs: f.ExtraSpecs}
	size, err := sizeOf(src)
	if err != nil {
		return err
	}
	if _, err := traitsOf(src); err != nil {
		return err
	}
	b, err := json.Marshal(src)
	if err != nil {
		return err
	}
	r.Size, r.ResourceProperties = size, string(b)
	return nil
}

// sizeOf is a flavor's slot: vcpus, ram and disk + ephemeral, overridden by its
// resources:VCPU/PCPU/MEMORY_MB/DISK_GB extra specs.
func sizeOf(f source) (climate.Size, error) {
	size := climate.Size{VCPUs: f.VCPUs, MemoryMB: f.RAM, DiskGB: f.Disk + f.Ephemeral}
	var groups climate.Size // Nova's request groups (resources1:, resources_gpu:) add to it
	for _, k := range slices.Sorted(maps.Keys(f.ExtraSpecs)) {
		group, class, ok := specKey(k, "resources")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(f.ExtraSpecs[k])
		if err != nil || n < 0 {
			return size, invalid("Flavor %s: extra spec %s=%q is not a non-negative integer", f.ID, k, f.ExtraSpecs[k])
		}
		set := func(dim func(*climate.Size) *int) {
			if group == "" { // the unnumbered group replaces the flavor's own size
				*dim(&size) = n
			} else {
				*dim(&groups) += n
			}
		}
		switch class {
		case "VCPU", "PCPU":
			set(func(s *climate.Size) *int { return &s.VCPUs })
		case "MEMORY_MB":
			set(func(s *climate.Size) *int { return &s.MemoryMB })
		case "DISK_GB":
			set(func(s *climate.Size) *int { return &s.DiskGB })
		default:
			if n > 0 {
				return size, climate.Errorf(climate.CodeConflict, "Flavor %s asks for resource class %s: standalone hosts offer only VCPU, PCPU, MEMORY_MB and DISK_GB", f.ID, class)
			}
		}
	}
	size = size.Plus(groups)
	if size.VCPUs <= 0 || size.MemoryMB <= 0 {
		return size, invalid("Flavor %s reserves no vCPU or no memory", f.ID)
	}
	return size, nil
}

// specKey splits an extra spec key of Nova's granular syntax, prefix[GROUP]:NAME
// ("resources:VCPU", "resources1:VGPU", "trait_gpu:CUSTOM_X"), into its group and name.
func specKey(k, prefix string) (group, name string, ok bool) {
	head, name, found := strings.Cut(k, ":")
	group, hasPrefix := strings.CutPrefix(head, prefix)
	if !found || !hasPrefix || strings.Trim(group, "_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
		return "", "", false
	}
	return group, name, true
}

// traitsOf returns a flavor's trait:T specs as T → required.
func traitsOf(f source) (map[string]bool, error) {
	out := map[string]bool{}
	for k, v := range f.ExtraSpecs {
		_, trait, ok := specKey(k, "trait")
		if !ok {
			continue
		}
		switch v {
		case "required":
			out[trait] = true
		case "forbidden":
			out[trait] = false
		default:
			return nil, invalid("Invalid trait value %q for %s: expected \"required\" or \"forbidden\"", v, k)
		}
	}
	return out, nil
}

// Plan implements resource.Type: r.Amount slots of the flavor's size on hosts with its
// required traits and without its forbidden ones.
func (Type) Plan(v *resource.View, l *climate.Lease, r *climate.Reservation, had, planned []climate.Allocation, rotate int) ([]climate.Allocation, error) {
	var src source
	if err := json.Unmarshal([]byte(r.ResourceProperties), &src); err != nil {
		return nil, fmt.Errorf("reservation %s: stored flavor: %w", r.ID, err)
	}
	traits, err := traitsOf(src)
	if err != nil {
		return nil, err
	}
	var match func(*climate.Host) bool
	key := ""
	if len(traits) > 0 {
		names := slices.Sorted(maps.Keys(traits))
		for _, n := range names {
			key += fmt.Sprintf("%s=%v;", n, traits[n])
		}
		match = func(h *climate.Host) bool {
			for _, n := range names {
				if (h.Extra[n] == "true") != traits[n] {
					return false
				}
			}
			return true
		}
	}
	return instance.PlanSlots(v, l, r, match, "traits:"+key, had, planned, rotate)
}

// Fields implements resource.Type: an instance reservation's keys, resource_properties
// holding the source flavor as Blazar shows it.
func (Type) Fields(r *climate.Reservation) map[string]any { return instance.Fields(r) }

// Hosts implements resource.Type: none, as for virtual:instance.
func (Type) Hosts(*climate.Reservation) []string { return nil }
