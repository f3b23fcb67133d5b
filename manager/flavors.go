package manager

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"climate"
)

// Flavors (Nova's, kept by Climate in standalone mode): the instance sizes
// flavor:instance reservations name. Admins register and delete them; readers (of any
// project) and admins see them, as Blazar's policies have it for its inventories.

// MaxExtraSpecs bounds a flavor's extra specs.
const MaxExtraSpecs = 64

// CreateFlavor registers a flavor. The id is the admin's (Nova's flavor ids are free-form
// strings) or generated; the name is required and unique. Extra specs follow Nova's
// rules for the keys placement reads: trait[N]:NAME is "required" or "forbidden", and
// resources[N]:CLASS a non-negative integer.
func (m *Manager) CreateFlavor(ctx context.Context, who climate.Identity, req climate.FlavorRequest) (*climate.Flavor, error) {
	if err := m.allow(who, "blazar:flavors:post", who.OwnTarget()); err != nil {
		return nil, err
	}
	if err := checkFlavorRequest(req); err != nil {
		return nil, err
	}
	f := &climate.Flavor{
		ID: req.ID, Name: req.Name, VCPUs: req.VCPUs, RAM: req.RAM, Disk: req.Disk, Ephemeral: req.Ephemeral,
		CreatedAt: m.now(),
	}
	if f.ID == "" {
		f.ID = climate.NewID()
	}
	if len(req.ExtraSpecs) > 0 {
		f.ExtraSpecs = maps.Clone(req.ExtraSpecs) // none is nil, as the stores give it back
	}
	if err := m.store.Update(ctx, func(tx climate.Tx) error {
		if err := tx.InsertFlavor(ctx, f); err != nil {
			return err
		}
		return m.audit(ctx, tx, climate.ByUser(who), "flavor.create", climate.AuditTarget{Type: "flavor", ID: f.ID}, nil, flavorSummary(f))
	}); err != nil {
		return nil, err
	}
	return f, nil
}

// checkFlavorRequest refuses what a flavor cannot be, naming the parameter.
func checkFlavorRequest(req climate.FlavorRequest) error {
	if req.Name == "" {
		return invalid("Missing parameter name")
	}
	if err := climate.CheckText("name", req.Name, climate.MaxNameLength); err != nil {
		return err
	}
	if strings.TrimSpace(req.Name) != req.Name {
		return invalid("Malformed parameter name (must not begin or end with whitespace): %q", req.Name)
	}
	if req.ID != "" {
		if err := checkFlavorID(req.ID); err != nil {
			return err
		}
		if err := checkNewFlavorID(req.ID); err != nil {
			return err
		}
	}
	for _, n := range []struct {
		name       string
		value, min int
	}{{"vcpus", req.VCPUs, 1}, {"ram", req.RAM, 1}, {"disk", req.Disk, 0}, {"ephemeral", req.Ephemeral, 0}} {
		if n.value < n.min || n.value > climate.MaxCount {
			return invalid("Malformed parameter %s (must be an integer from %d to %d): %d", n.name, n.min, climate.MaxCount, n.value)
		}
	}
	return checkExtraSpecs(req.ExtraSpecs)
}

// checkNewFlavorID refuses ids a URL could not name: with a slash, "." or "..", ending in
// ".json" (the API strips that suffix, as Blazar's does), or with control characters or
// surrounding whitespace.
func checkNewFlavorID(id string) error {
	switch {
	case strings.Contains(id, "/"):
		return invalid("Malformed parameter id (must not contain '/'): %q", id)
	case id == "." || id == "..":
		return invalid("Malformed parameter id (must not be %q)", id)
	case strings.HasSuffix(id, ".json"):
		return invalid("Malformed parameter id (must not end with \".json\"): %q", id)
	case strings.TrimSpace(id) != id:
		return invalid("Malformed parameter id (must not begin or end with whitespace): %q", id)
	case strings.ContainsFunc(id, unicode.IsControl):
		return invalid("Malformed parameter id (must not contain control characters): %q", id)
	}
	return nil
}

// placementSpec matches the extra spec keys placement reads, with Nova's optional group
// suffix (resources1:VCPU, trait_gpu:HW_GPU_API_VULKAN): 1 the kind, 2 the name.
var placementSpec = regexp.MustCompile(`^(resources|trait)(?:[1-9][0-9]*|_[A-Za-z0-9_-]+)?:(.*)$`)

// checkExtraSpecs bounds a flavor's extra specs and checks the ones placement reads.
func checkExtraSpecs(specs map[string]string) error {
	if len(specs) > MaxExtraSpecs {
		return invalid("Malformed parameter extra_specs (must have at most %d entries): %d", MaxExtraSpecs, len(specs))
	}
	// In key order, so the first bad one reported is the same every time.
	for _, k := range slices.Sorted(maps.Keys(specs)) {
		v := specs[k]
		if k == "" {
			return invalid("Malformed parameter extra_specs (keys must not be empty)")
		}
		if err := climate.CheckText("extra_specs key", k, climate.MaxNameLength); err != nil {
			return err
		}
		if err := climate.CheckText("extra_specs value of "+k, v, climate.MaxNameLength); err != nil {
			return err
		}
		sub := placementSpec.FindStringSubmatch(k)
		if sub == nil {
			continue
		}
		if sub[2] == "" {
			return invalid("Malformed parameter extra_specs (%q names no %s)", k, map[string]string{"trait": "trait", "resources": "resource class"}[sub[1]])
		}
		switch sub[1] {
		case "trait":
			if v != "required" && v != "forbidden" {
				return invalid(`Invalid trait value %q for %s: expected "required" or "forbidden"`, v, k)
			}
		case "resources":
			if _, err := strconv.ParseUint(v, 10, 31); err != nil { // no sign, at most MaxCount
				return invalid("Invalid resources value %q for %s: expected a non-negative integer", v, k)
			}
		}
	}
	return nil
}

// GetFlavor returns a flavor: readers (of any project) and admins may see them.
func (m *Manager) GetFlavor(ctx context.Context, who climate.Identity, id string) (*climate.Flavor, error) {
	if err := m.allow(who, "blazar:flavors:get", who.OwnTarget()); err != nil {
		return nil, err
	}
	if err := checkFlavorID(id); err != nil {
		return nil, err
	}
	var f *climate.Flavor
	err := m.store.View(ctx, func(tx climate.Tx) (err error) {
		f, err = tx.GetFlavor(ctx, id)
		return err
	})
	return f, err
}

// ListFlavors returns every flavor in registration order.
func (m *Manager) ListFlavors(ctx context.Context, who climate.Identity) ([]climate.Flavor, error) {
	if err := m.allow(who, "blazar:flavors:get", who.OwnTarget()); err != nil {
		return nil, err
	}
	var fs []climate.Flavor
	err := m.store.View(ctx, func(tx climate.Tx) (err error) {
		fs, err = tx.ListFlavors(ctx)
		return err
	})
	return fs, err
}

// DeleteFlavor removes a flavor. Reservations made with it keep the sizes they copied.
func (m *Manager) DeleteFlavor(ctx context.Context, who climate.Identity, id string) error {
	if err := m.allow(who, "blazar:flavors:delete", who.OwnTarget()); err != nil {
		return err
	}
	if err := checkFlavorID(id); err != nil {
		return err
	}
	return m.store.Update(ctx, func(tx climate.Tx) error {
		f, err := tx.GetFlavor(ctx, id)
		if err != nil {
			return err
		}
		if err := tx.DeleteFlavor(ctx, id); err != nil {
			return err
		}
		return m.audit(ctx, tx, climate.ByUser(who), "flavor.delete", climate.AuditTarget{Type: "flavor", ID: f.ID}, flavorSummary(f), nil)
	})
}

// checkFlavorID bounds an id (from a URL or a request) before a store sees it.
func checkFlavorID(id string) error {
	return climate.CheckText("id", id, climate.MaxNameLength)
}
