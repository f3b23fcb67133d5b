package openstack

import (
	"context"
	"fmt"
	"slices"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/attributestags"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"

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
