package openstack

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/attributestags"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"climate"
)

// Floating IP reservations (virtual:floatingip), as Blazar's plugin: at the start each
// reserved address becomes a Neutron floating IP of its network (and subnet, when Climate
// knows it), owned by the lease's project, tagged "blazar" and "reservation:<id>"; at the
// end it is disassociated from its port and deleted.

// FloatingIPType is the resource_type of floating IP reservations.
const FloatingIPType = "virtual:floatingip"

// reservationTag marks the Neutron floating IPs of a reservation.
func reservationTag(rid string) string { return "reservation:" + rid }

// addresses returns r's floating IPs as Climate knows them.
func (d *Driver) addresses(ctx context.Context, r *climate.Reservation) ([]climate.FloatingIP, error) {
	var out []climate.FloatingIP
	err := d.cfg.Store.View(ctx, func(tx climate.Tx) error {
		out = out[:0]
		seen := map[string]bool{}
		for _, a := range r.Allocations {
			if seen[a.ResourceID] {
				continue
			}
			seen[a.ResourceID] = true
			f, err := tx.GetFloatingIP(ctx, a.ResourceID)
			if err != nil {
				return fmt.Errorf("floating IP %s: %w", a.ResourceID, err)
			}
			out = append(out, *f)
		}
		return nil
	})
	return out, err
}

// neutronFIPs lists Neutron's floating IPs matching opts.
func (d *Driver) neutronFIPs(ctx context.Context, opts floatingips.ListOpts) ([]floatingips.FloatingIP, error) {
	var out []floatingips.FloatingIP
	err := d.retry(ctx, "list floating IPs", func(ctx context.Context) error {
		pages, err := floatingips.List(d.cfg.Network, opts).AllPages(ctx)
		if err == nil {
			out, err = floatingips.ExtractFloatingIPs(pages)
		}
		return err
	})
	return out, err
}

// startFloatingIPs creates each reserved address in Neutron for the project, unless the
// reservation's exists; an address another holds is an error.
func (d *Driver) startFloatingIPs(ctx context.Context, l *climate.Lease, r *climate.Reservation) error {
	if d.cfg.Network == nil {
		return fmt.Errorf("floating IP reservations need Neutron, which Keystone's catalog does not list")
	}
	addrs, err := d.addresses(ctx, r)
	if err != nil {
		return err
	}
	tags := []string{"blazar", reservationTag(r.ID)}
	for _, f := range addrs {
		found, err := d.neutronFIPs(ctx, floatingips.ListOpts{FloatingNetworkID: f.FloatingNetworkID, FloatingIP: f.Address})
		if err != nil {
			return err
		}
		var fip *floatingips.FloatingIP
		switch {
		case len(found) == 0:
			err = d.retry(ctx, "create floating IP "+f.Address, func(ctx context.Context) error {
				created, err := floatingips.Create(ctx, d.cfg.Network, floatingips.CreateOpts{FloatingNetworkID: f.FloatingNetworkID,
					FloatingIP: f.Address, SubnetID: f.SubnetID, ProjectID: l.ProjectID, Description: "reservation " + r.ID}).Extract()
				if gophercloud.ResponseCodeIs(err, 409) {
					// Made by an attempt whose answer was lost, or someone else's: look.
					again, lerr := d.neutronFIPs(ctx, floatingips.ListOpts{FloatingNetworkID: f.FloatingNetworkID, FloatingIP: f.Address})
					if lerr == nil && len(again) == 1 && again[0].ProjectID == l.ProjectID {
						created, err = &again[0], nil
					}
				}
				fip = created
				return err
			})
			if err != nil {
				return err
			}
			d.changed(ctx, "create floating IP "+f.Address)
		case found[0].ProjectID == l.ProjectID:
			fip = &found[0] // an earlier run's
		default:
			return fmt.Errorf("floating IP %s exists in Neutron for project %s", f.Address, found[0].ProjectID)
		}
		if !slices.Contains(fip.Tags, reservationTag(r.ID)) {
			err := d.retry(ctx, "tag floating IP "+f.Address, func(ctx context.Context) error {
				_, err := attributestags.ReplaceAll(ctx, d.cfg.Network, "floatingips", fip.ID, attributestags.ReplaceAllOpts{Tags: tags}).Extract()
				return err
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// endFloatingIPs disassociates and deletes the reservation's Neutron floating IPs (found
// by its tag, so a deleted lease's are found without Climate's records).
func (d *Driver) endFloatingIPs(ctx context.Context, rid string) error {
	if d.cfg.Network == nil {
		return nil
	}
	found, err := d.neutronFIPs(ctx, floatingips.ListOpts{Tags: reservationTag(rid)})
	if err != nil {
		return err
	}
	for _, fip := range found {
		if fip.PortID != "" {
			err := d.retry(ctx, "disassociate floating IP "+fip.FloatingIP, func(ctx context.Context) error {
				_, err := floatingips.Update(ctx, d.cfg.Network, fip.ID, floatingips.UpdateOpts{PortID: new(string)}).Extract()
				return err
			})
			if err != nil {
				return err
			}
		}
		err := d.retry(ctx, "delete floating IP "+fip.FloatingIP, func(ctx context.Context) error {
			err := floatingips.Delete(ctx, d.cfg.Network, fip.ID).ExtractErr()
			if gophercloud.ResponseCodeIs(err, 404) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// FloatingIPs is the floating IP service with Blazar's Neutron side (climate.FloatingIPService
// around the manager's): registering an address checks, as Blazar's FloatingIPPool, that its
// network exists in Neutron and that one of the network's subnets holds the address outside
// its allocation pools and gateway (else Neutron could hand it out), and records that
// subnet. Policy is checked first, so callers who may not register addresses never make
// Climate call Neutron.
type FloatingIPs struct {
	climate.FloatingIPService
	Driver *Driver
	Policy climate.Policy
}

// CreateFloatingIP registers an address of Neutron's, as Blazar does.
func (f FloatingIPs) CreateFloatingIP(ctx context.Context, who climate.Identity, req climate.FloatingIPRequest) (*climate.FloatingIP, error) {
	if err := f.Policy.Check(who, "blazar:floatingips:post", who.OwnTarget()); err != nil {
		return nil, err
	}
	addr, err := netip.ParseAddr(req.Address)
	if req.FloatingNetworkID == "" || err != nil || f.Driver.cfg.Network == nil {
		return f.FloatingIPService.CreateFloatingIP(ctx, who, req) // its messages for bad input
	}
	subnet, err := f.Driver.subnetFor(ctx, req.FloatingNetworkID, addr)
	if err != nil {
		return nil, err
	}
	if req.SubnetID != "" && req.SubnetID != subnet {
		return nil, climate.Errorf(climate.CodeInvalid, "The floating IP %s is in subnet %s, not %s", addr, subnet, req.SubnetID)
	}
	req.SubnetID = subnet
	return f.FloatingIPService.CreateFloatingIP(ctx, who, req)
}

// subnetFor returns the subnet of network that may hold addr as a reserved floating IP.
func (d *Driver) subnetFor(ctx context.Context, network string, addr netip.Addr) (string, error) {
	var net *networks.Network
	err := d.retry(ctx, "read network "+network, func(ctx context.Context) error {
		n, err := networks.Get(ctx, d.cfg.Network, network).Extract()
		if gophercloud.ResponseCodeIs(err, 404) {
			return nil
		}
		net = n
		return err
	})
	if err != nil {
		return "", climate.Errorf(climate.CodeUnavailable, "Neutron: %s", err)
	}
	if net == nil {
		return "", climate.Errorf(climate.CodeInvalid, "Failed to find network %s", network)
	}
	for _, id := range net.Subnets {
		var s *subnets.Subnet
		err := d.retry(ctx, "read subnet "+id, func(ctx context.Context) error {
			var err error
			s, err = subnets.Get(ctx, d.cfg.Network, id).Extract()
			return err
		})
		if err != nil {
			return "", climate.Errorf(climate.CodeUnavailable, "Neutron: %s", err)
		}
		cidr, err := netip.ParsePrefix(s.CIDR)
		if err != nil || !cidr.Contains(addr) {
			continue
		}
		used := s.GatewayIP != "" && s.GatewayIP == addr.String()
		for _, p := range s.AllocationPools {
			lo, lerr := netip.ParseAddr(p.Start)
			hi, herr := netip.ParseAddr(p.End)
			used = used || (lerr == nil && herr == nil && lo.Compare(addr) <= 0 && addr.Compare(hi) <= 0)
		}
		if used {
			return "", climate.Errorf(climate.CodeInvalid, "The floating IP %s is used in allocation_pools or gateway_ip in subnet %s .", addr, s.ID)
		}
		return s.ID, nil
	}
	return "", climate.Errorf(climate.CodeNotFound, "Valid subnet for the floating IP %s is not found.", addr)
}
