package manager

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"climate"
	"climate/plan"
	"climate/query"
)

// maxCapabilityKey is Blazar's limit on extra capability names.
const maxCapabilityKey = 64

// CreateHost registers a host. fields holds the request's keys: "name" (required), the
// built-in host fields, and any other key as an extra capability.
func (m *Manager) CreateHost(ctx context.Context, who climate.Identity, fields map[string]string) (*climate.Host, error) {
	if err := m.allow(who, "blazar:oshosts:post", who.OwnTarget()); err != nil {
		return nil, err
	}
	name := fields["name"]
	if name == "" {
		name = fields["hypervisor_hostname"]
	}
	if name == "" {
		return nil, invalid("Missing parameter name")
	}
	if err := climate.CheckText("name", name, climate.MaxNameLength); err != nil {
		return nil, err
	}
	now := m.now()
	h := &climate.Host{HypervisorHostname: name, ServiceName: name, Reservable: true, Extra: map[string]string{}, CreatedAt: now}
	rest := make(map[string]string, len(fields))
	for k, v := range fields {
		if k != "name" {
			rest[k] = v
		}
	}
	if err := applyHostFields(h, rest); err != nil {
		return nil, err
	}
	err := m.store.Update(ctx, func(tx climate.Tx) error {
		if err := tx.InsertHost(ctx, h); err != nil {
			return err
		}
		return m.audit(ctx, tx, climate.ByUser(who), "host.create", hostAuditTarget(h), nil, hostSummary(h))
	})
	if err != nil {
		return nil, err
	}
	m.WakeRetries() // more capacity, maybe: waiting leases may fit
	return h, nil
}

// applyHostFields sets built-in fields from their string form and everything else as
// extra capabilities.
func applyHostFields(h *climate.Host, fields map[string]string) error {
	for k, v := range fields {
		if err := checkHostField(k, v); err != nil {
			return err
		}
		var err error
		switch k {
		case "vcpus":
			h.VCPUs, err = nonNegativeInt(k, v)
		case "memory_mb":
			h.MemoryMB, err = nonNegativeInt(k, v)
		case "local_gb":
			h.LocalGB, err = nonNegativeInt(k, v)
		case "hypervisor_version":
			h.HypervisorVersion, err = nonNegativeInt(k, v)
		case "hypervisor_hostname":
			if v == "" {
				return invalid("Malformed parameter hypervisor_hostname: must not be empty")
			}
			h.HypervisorHostname = v
		case "service_name":
			h.ServiceName = v
		case "cpu_info":
			h.CPUInfo = v
		case "hypervisor_type":
			h.HypervisorType = v
		case "availability_zone":
			h.AvailabilityZone = v
		case "reservable":
			h.Reservable, err = strconv.ParseBool(v)
			if err != nil {
				err = invalid("Malformed parameter reservable: %q is not a boolean", v)
			}
		case "id", "trust_id", "status", "created_at", "updated_at", "name",
			"power_state", "power_state_changed_at", "powered_off_hours":
			return invalid("Malformed parameter %s: it cannot be set", k)
		default:
			if len(k) > maxCapabilityKey {
				return invalid("Extra capability key too long")
			}
			if !validCapabilityName(k) {
				return invalid("Malformed parameter %q: an extra capability name must be non-empty, printable, without spaces, quotes or $", k)
			}
			h.Extra[k] = v
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkHostField bounds a host field's text: names are indexed or shown in tables, the
// rest is free text.
func checkHostField(k, v string) error {
	switch k {
	case "name", "hypervisor_hostname", "service_name", "availability_zone":
		return climate.CheckText(k, v, climate.MaxNameLength)
	}
	return climate.CheckText(k, v, climate.MaxTextLength)
}

func validCapabilityName(k string) bool {
	if k == "" || !utf8.ValidString(k) {
		return false
	}
	for _, r := range k {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' || r == '$' {
			return false
		}
	}
	return true
}

func nonNegativeInt(name, v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > climate.MaxCount {
		return 0, invalid("Malformed parameter %s: %q is not an integer from 0 to %d", name, v, climate.MaxCount)
	}
	return n, nil
}

// GetHost returns a host (admins only).
func (m *Manager) GetHost(ctx context.Context, who climate.Identity, id string) (*climate.Host, error) {
	if err := m.allow(who, "blazar:oshosts:get", who.OwnTarget()); err != nil {
		return nil, err
	}
	var h *climate.Host
	err := m.store.View(ctx, func(tx climate.Tx) error {
		var err error
		h, err = tx.GetHost(ctx, id)
		return err
	})
	return h, err
}

// ListHosts returns every host (admins only).
func (m *Manager) ListHosts(ctx context.Context, who climate.Identity) ([]climate.Host, error) {
	if err := m.allow(who, "blazar:oshosts:get", who.OwnTarget()); err != nil {
		return nil, err
	}
	var hosts []climate.Host
	err := m.store.View(ctx, func(tx climate.Tx) error {
		var err error
		hosts, err = tx.ListHosts(ctx)
		return err
	})
	return hosts, err
}

// UpdateHost changes built-in fields and extra capabilities of a host. A capability that a
// current or future reservation on the host filters on cannot change (Blazar's rule): the
// reservation was granted the host because of its value.
func (m *Manager) UpdateHost(ctx context.Context, who climate.Identity, id string, fields map[string]string) (*climate.Host, error) {
	if err := m.allow(who, "blazar:oshosts:put", who.OwnTarget()); err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return nil, invalid("No data to update")
	}
	onHost := climate.AllocationFilter{ResourceIDs: []string{id}, From: m.now()} // current and future
	held, err := m.holdsOn(ctx, onHost)
	if err != nil {
		return nil, err
	}
	var h *climate.Host
	err = m.store.Update(ctx, func(tx climate.Tx) error {
		cur, err := tx.GetHost(ctx, id)
		if err != nil {
			return err
		}
		h = cur
		before := *cur
		before.Extra = make(map[string]string, len(cur.Extra))
		for k, v := range cur.Extra {
			before.Extra[k] = v
		}
		if err := applyHostFields(h, fields); err != nil {
			return err
		}
		var changed []string
		for k := range fields {
			old, had := before.Property(k)
			now, _ := h.Property(k)
			if !had || old != now {
				changed = append(changed, k)
			}
		}
		if len(changed) > 0 || h.Capacity() != before.Capacity() {
			allocs, err := allocationsOn(ctx, tx, held, onHost)
			if err != nil {
				return err
			}
			if err := checkPropertiesUnused(ctx, tx, id, changed, allocs); err != nil {
				return err
			}
			if err := checkSlotsFit(h, allocs); err != nil {
				return err
			}
		}
		h.UpdatedAt = m.now()
		if err := tx.UpdateHost(ctx, h); err != nil {
			return err
		}
		return m.audit(ctx, tx, climate.ByUser(who), "host.update", hostAuditTarget(h), hostSummary(&before), hostSummary(h))
	})
	if err != nil {
		return nil, err
	}
	m.WakeRetries() // more capacity, maybe: waiting leases may fit
	return h, nil
}

// checkSlotsFit refuses a capacity below what the instance slots held on the host now or
// later (allocs), need at once.
func checkSlotsFit(h *climate.Host, allocs []climate.Allocation) error {
	if peak := plan.Peak(allocs); !peak.Within(h.Capacity()) {
		return climate.Errorf(climate.CodeConflict, "Host %s holds instance slots needing %d vCPUs, %d MB of memory and %d GB of disk at once; its vcpus, memory_mb and local_gb cannot go below that",
			h.HypervisorHostname, peak.VCPUs, peak.MemoryMB, peak.DiskGB)
	}
	return nil
}

// checkPropertiesUnused refuses changing properties that a current or future reservation
// holding the host (allocs: its allocations now and later) filters on.
func checkPropertiesUnused(ctx context.Context, tx climate.Tx, hostID string, props []string, allocs []climate.Allocation) error {
	if len(props) == 0 {
		return nil
	}
	seen := map[string]bool{}
	for _, a := range allocs {
		if seen[a.LeaseID] {
			continue
		}
		seen[a.LeaseID] = true
		l, err := tx.GetLease(ctx, a.LeaseID)
		if err != nil {
			return err
		}
		for _, r := range l.Reservations {
			if r.ID != a.ReservationID {
				continue
			}
			for _, text := range []string{r.HypervisorProperties, r.ResourceProperties} {
				q, err := query.Parse(text)
				if err != nil {
					continue
				}
				for _, used := range q.Properties() {
					for _, p := range props {
						if used == p {
							return climate.Errorf(climate.CodeConflict, "Can't update property %s of host %s: reservation %s of lease %s filters on it", p, hostID, r.ID, l.ID)
						}
					}
				}
			}
		}
	}
	return nil
}

// DeleteHost removes a host that no current or future allocation holds.
func (m *Manager) DeleteHost(ctx context.Context, who climate.Identity, id string) error {
	if err := m.allow(who, "blazar:oshosts:delete", who.OwnTarget()); err != nil {
		return err
	}
	onHost := climate.AllocationFilter{ResourceIDs: []string{id}, From: m.now()} // current and future
	held, err := m.holdsOn(ctx, onHost)
	if err != nil {
		return err
	}
	return m.store.Update(ctx, func(tx climate.Tx) error {
		h, err := tx.GetHost(ctx, id)
		if err != nil {
			return err
		}
		allocs, err := allocationsOn(ctx, tx, held, onHost)
		if err != nil {
			return err
		}
		if len(allocs) > 0 {
			return climate.Errorf(climate.CodeConflict, "Can't delete host %s. The host is reserved.", id)
		}
		if err := tx.DeleteHost(ctx, id); err != nil {
			return err
		}
		return m.audit(ctx, tx, climate.ByUser(who), "host.delete", hostAuditTarget(h), hostSummary(h), nil)
	})
}

// ListHostProperties returns the extra-capability names known for hosts. Private ones
// are listed only when all is set (admins see them; everyone else never does).
func (m *Manager) ListHostProperties(ctx context.Context, who climate.Identity, all bool) ([]climate.PropertyInfo, error) {
	if err := m.allow(who, "blazar:oshosts:get_resource_properties", who.OwnTarget()); err != nil {
		return nil, err
	}
	var out []climate.PropertyInfo
	err := m.store.View(ctx, func(tx climate.Tx) error {
		props, err := tx.ListResourceProperties(ctx, climate.ResourceTypeHost)
		if err != nil {
			return err
		}
		hosts, err := tx.ListHosts(ctx)
		if err != nil {
			return err
		}
		for _, p := range props {
			if p.Private && !(all && who.IsAdmin()) {
				continue
			}
			set := map[string]bool{}
			for _, h := range hosts {
				if v, ok := h.Extra[p.Name]; ok {
					set[v] = true
				}
			}
			values := make([]string, 0, len(set))
			for v := range set {
				values = append(values, v)
			}
			sort.Strings(values)
			out = append(out, climate.PropertyInfo{ResourceProperty: p, Values: values})
		}
		return nil
	})
	return out, err
}

// SetHostPropertyPrivate marks a host property private or public.
func (m *Manager) SetHostPropertyPrivate(ctx context.Context, who climate.Identity, name string, private bool) (*climate.ResourceProperty, error) {
	if err := m.allow(who, "blazar:oshosts:update_resource_properties", who.OwnTarget()); err != nil {
		return nil, err
	}
	p := &climate.ResourceProperty{ResourceType: climate.ResourceTypeHost, Name: name, Private: private, UpdatedAt: m.now()}
	err := m.store.Update(ctx, func(tx climate.Tx) error {
		props, err := tx.ListResourceProperties(ctx, climate.ResourceTypeHost)
		if err != nil {
			return err
		}
		var before map[string]any
		for _, q := range props {
			if q.Name == name {
				before = map[string]any{"private": q.Private}
			}
		}
		if err := tx.UpdateResourceProperty(ctx, p); err != nil {
			return err
		}
		if props, err = tx.ListResourceProperties(ctx, climate.ResourceTypeHost); err != nil {
			return err
		}
		for _, q := range props {
			if q.Name == name {
				*p = q
			}
		}
		target := climate.AuditTarget{Type: "resource_property", ID: climate.ResourceTypeHost + ":" + name}
		return m.audit(ctx, tx, climate.ByUser(who), "resource_property.update", target, before, map[string]any{"private": p.Private})
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}
