package manager

import (
	"context"
	"net/netip"
	"strings"

	"climate"
)

// The floating IP inventory (Blazar's virtual:floatingip plugin, standalone: no Neutron).
// Blazar checks the network and the address against Neutron; in standalone mode the
// operator's word is taken for the network and subnet, and only the address's form is
// checked.

// CreateFloatingIP registers a floating IP: both floating_network_id and
// floating_ip_address are required; the address is stored in canonical form, so
// "2001:DB8::1" and "2001:db8::1" are one address, and "::ffff:172.24.4.1" is 172.24.4.1.
func (m *Manager) CreateFloatingIP(ctx context.Context, who climate.Identity, req climate.FloatingIPRequest) (*climate.FloatingIP, error) {
	if err := m.allow(who, "blazar:floatingips:post", who.OwnTarget()); err != nil {
		return nil, err
	}
	if req.FloatingNetworkID == "" {
		return nil, invalid("Missing parameter floating_network_id")
	}
	if req.Address == "" {
		return nil, invalid("Missing parameter floating_ip_address")
	}
	for _, f := range []struct{ name, value string }{
		{"floating_network_id", req.FloatingNetworkID},
		{"subnet_id", req.SubnetID},
		{"floating_ip_address", req.Address},
	} {
		if err := climate.CheckText(f.name, f.value, climate.MaxNameLength); err != nil {
			return nil, err
		}
	}
	addr, err := parseFloatingIP(req.Address)
	if err != nil {
		return nil, err
	}
	f := &climate.FloatingIP{
		ID: climate.NewID(), FloatingNetworkID: req.FloatingNetworkID, SubnetID: req.SubnetID,
		Address: addr.String(), Reservable: true, CreatedAt: m.now(),
	}
	if err := m.store.Update(ctx, func(tx climate.Tx) error {
		if err := tx.InsertFloatingIP(ctx, f); err != nil {
			return err
		}
		return m.audit(ctx, tx, climate.ByUser(who), "floatingip.create", climate.AuditTarget{Type: "floatingip", ID: f.ID}, nil, floatingIPSummary(f))
	}); err != nil {
		return nil, err
	}
	return f, nil
}

// parseFloatingIP reads an IPv4 or IPv6 address (no zone, no prefix length).
func parseFloatingIP(s string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(s)
	if err != nil || addr.Zone() != "" || strings.TrimSpace(s) != s {
		return netip.Addr{}, invalid("Malformed parameter floating_ip_address: %q is not an IPv4 or IPv6 address", s)
	}
	// An IPv4-mapped IPv6 address (::ffff:172.24.4.1) is its IPv4 address.
	return addr.Unmap(), nil
}

// GetFloatingIP returns a floating IP: readers (of any project) and admins may see the
// inventory, as in Blazar.
func (m *Manager) GetFloatingIP(ctx context.Context, who climate.Identity, id string) (*climate.FloatingIP, error) {
	if err := m.allow(who, "blazar:floatingips:get", who.OwnTarget()); err != nil {
		return nil, err
	}
	if err := checkFloatingIPID(id); err != nil {
		return nil, err
	}
	var f *climate.FloatingIP
	err := m.store.View(ctx, func(tx climate.Tx) (err error) {
		f, err = tx.GetFloatingIP(ctx, id)
		return err
	})
	return f, err
}

// ListFloatingIPs returns every floating IP in registration order.
func (m *Manager) ListFloatingIPs(ctx context.Context, who climate.Identity) ([]climate.FloatingIP, error) {
	if err := m.allow(who, "blazar:floatingips:get", who.OwnTarget()); err != nil {
		return nil, err
	}
	var fs []climate.FloatingIP
	err := m.store.View(ctx, func(tx climate.Tx) (err error) {
		fs, err = tx.ListFloatingIPs(ctx)
		return err
	})
	return fs, err
}

// DeleteFloatingIP removes a floating IP from the inventory.
func (m *Manager) DeleteFloatingIP(ctx context.Context, who climate.Identity, id string) error {
	if err := m.allow(who, "blazar:floatingips:delete", who.OwnTarget()); err != nil {
		return err
	}
	if err := checkFloatingIPID(id); err != nil {
		return err
	}
	// Unlike Blazar, an address whose leases have ended can go: only a current or future
	// lease holds it.
	onAddress := climate.AllocationFilter{ResourceIDs: []string{id}, From: m.now()}
	holds, err := m.holdsOn(ctx, onAddress)
	if err != nil {
		return err
	}
	return m.store.Update(ctx, func(tx climate.Tx) error {
		f, err := tx.GetFloatingIP(ctx, id)
		if err != nil {
			return err
		}
		held, err := allocationsOn(ctx, tx, holds, onAddress)
		if err != nil {
			return err
		}
		if len(held) > 0 {
			return climate.Errorf(climate.CodeConflict, "Floating IP %s is reserved by lease %s until %s and cannot be deleted",
				f.Address, held[0].LeaseID, held[len(held)-1].End.UTC().Format("2006-01-02 15:04"))
		}
		if err := tx.DeleteFloatingIP(ctx, id); err != nil {
			return err
		}
		return m.audit(ctx, tx, climate.ByUser(who), "floatingip.delete", climate.AuditTarget{Type: "floatingip", ID: f.ID}, floatingIPSummary(f), nil)
	})
}

// checkFloatingIPID bounds an id from a URL before a store sees it.
func checkFloatingIPID(id string) error {
	return climate.CheckText("floating IP id", id, climate.MaxNameLength)
}
