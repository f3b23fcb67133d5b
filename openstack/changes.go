package openstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"climate"
)

// Changes carries lease changes that have no engine event to Nova. It is a notification
// destination (notify.Destination): the notification is written in the transaction that
// makes the change and delivered at least once, with retries.
//
//   - lease.create, and lease.update of a lease not started: the artefacts Blazar makes at
//     creation (reserve.go), made or brought to the reservation's new size. This is done
//     early, not trusted: the start makes whatever is missing and fails with OpenStack's
//     message, so a failure here is logged and not retried (it would hold up the
//     deliveries behind it).
//   - lease.delete: a deletion removes the lease's events with it, so a started lease that
//     is deleted is released here, as Blazar ends it: its hosts' servers deleted and waited
//     for, the hosts back in the freepool, the aggregate deleted; a lease that never
//     started loses what its creation made (empty aggregates, flavors, server groups).
//   - lease.update and lease.healed of an active lease: a host reservation's aggregate is
//     brought in step with the hosts the reservation holds now (an update that raised min
//     and max added some, as Blazar adds them to the aggregate; healing replaced a failed
//     host, as Blazar's healing moves the new one in; a host dropped is cleared and given
//     back); an instance reservation's aggregate and placement inventories with the slots
//     it holds now (an update that raised amount, as Blazar raises the inventory).
type Changes struct{ Driver *Driver }

// Name is the destination's delivery cursor.
func (Changes) Name() string { return "openstack" }

// Accepts takes lease creations, deletions, updates and healings (a host replaced by another).
func (Changes) Accepts(n *climate.Notification) bool {
	switch n.EventType {
	case climate.NotifyLeaseCreate, climate.NotifyLeaseDelete, climate.NotifyLeaseUpdate, climate.NotifyLeaseHealed:
		return true
	}
	return false
}

// Deliver acts on one change.
func (c Changes) Deliver(ctx context.Context, n *climate.Notification) error {
	if n.EventType != climate.NotifyLeaseDelete {
		return c.updated(ctx, n.LeaseID)
	}
	// The payload is the lease as the API shows it.
	var lease struct {
		Reservations []struct {
			ID           string `json:"id"`
			ResourceType string `json:"resource_type"`
		} `json:"reservations"`
	}
	if err := json.Unmarshal(n.Payload, &lease); err != nil {
		return fmt.Errorf("lease %s: reading its deletion: %w", n.LeaseID, err)
	}
	for _, r := range lease.Reservations {
		var err error
		switch r.ResourceType {
		case climate.ResourceTypeHost:
			err = c.Driver.release(ctx, r.ID, true)
		case InstanceType, FlavorType:
			err = c.Driver.endInstances(ctx, r.ID)
		case FloatingIPType:
			err = c.Driver.endFloatingIPs(ctx, r.ID)
		}
		if err != nil {
			return fmt.Errorf("lease %s deleted: reservation %s: %w", n.LeaseID, r.ID, err)
		}
	}
	return nil
}

// updated syncs the aggregates of an active lease with its hosts as they are now (read
// from the store: the notification may be older than the lease).
func (c Changes) updated(ctx context.Context, leaseID string) error {
	var l *climate.Lease
	err := c.Driver.cfg.Store.View(ctx, func(tx climate.Tx) error {
		var err error
		l, err = tx.GetLease(ctx, leaseID)
		return err
	})
	if climate.ErrorCode(err) == climate.CodeNotFound {
		return nil // deleted since: its deletion releases it
	}
	if err != nil {
		return err
	}
	switch l.Status {
	case climate.LeasePending:
		// Not started: its start moves the hosts; what Blazar makes at creation is made now.
		if err := c.Driver.Reserve(ctx, l); err != nil {
			c.Driver.cfg.Logger.Warn("openstack: making a lease's reservations in Nova failed; its start will try again", "lease", l.ID, "err", err)
		}
		return nil
	case climate.LeaseActive:
		return c.Driver.each(ctx, l, c.Driver.sync, c.Driver.syncInstances)
	}
	return nil // starting or ending: its start or end does the work
}

// current returns r with only the allocations it holds now.
func current(r *climate.Reservation) *climate.Reservation {
	now := time.Now()
	cur := *r
	cur.Allocations = nil
	for _, a := range r.Allocations {
		if a.Start.After(now) || !a.End.After(now) {
			continue // not yet, or taken back
		}
		cur.Allocations = append(cur.Allocations, a)
	}
	return &cur
}

// syncInstances brings an active instance reservation's aggregate and inventories in step
// with the slots it holds now (an update that raised amount, as Blazar raises the
// inventory; healing that moved slots): hosts gaining slots join the aggregate with an
// inventory of their count; a host left with none loses its inventory (unless servers
// still use it: they run to the end) and leaves the aggregate. A reservation with no
// aggregate has not started or has ended: nothing to do.
func (d *Driver) syncInstances(ctx context.Context, l *climate.Lease, r *climate.Reservation) error {
	agg, err := d.findAggregate(ctx, r.ID)
	if err != nil || agg == nil {
		return err
	}
	cur := current(r)
	if err := d.makeInstances(ctx, l, cur); err != nil {
		return err
	}
	hosts, err := d.hosts(ctx, cur)
	if err != nil {
		return err
	}
	if agg, err = d.findAggregate(ctx, r.ID); err != nil || agg == nil {
		return err
	}
	for _, name := range slices.Clone(agg.Hosts) {
		if slices.ContainsFunc(hosts, func(h host) bool { return h.name == name }) {
			continue
		}
		dropped, err := d.dropInventory(ctx, name, resourceClass(r.ID))
		if err != nil {
			return err
		}
		if !dropped {
			d.cfg.Logger.Warn("openstack: a host that lost its slots keeps them until the servers using them go", "reservation", r.ID, "host", name)
			continue
		}
		if err := d.hostAction(ctx, agg, name, false); err != nil {
			return err
		}
	}
	return nil
}

// sync makes r's aggregate hold the hosts r holds now: missing ones move in, others are
// cleared of servers and go back to the freepool. A reservation with no aggregate has
// not started or has ended: nothing to do.
func (d *Driver) sync(ctx context.Context, l *climate.Lease, r *climate.Reservation) error {
	agg, err := d.findAggregate(ctx, r.ID)
	if err != nil || agg == nil {
		return err
	}
	hosts, err := d.hosts(ctx, current(r))
	if err != nil {
		return err
	}
	var names []string
	for _, h := range hosts {
		names = append(names, h.name)
	}
	if err := d.moveIn(ctx, agg, hosts); err != nil {
		return err
	}
	for _, h := range slices.Clone(agg.Hosts) {
		if slices.Contains(names, h) {
			continue
		}
		if err := d.clearHosts(ctx, []string{h}); err != nil {
			return err
		}
		if _, err := d.freepoolMember(ctx, h, true); err != nil {
			return err
		}
		if err := d.hostAction(ctx, agg, h, false); err != nil {
			return err
		}
	}
	return nil
}

// dropInventory deletes rc's inventory from the reservation provider of the host Nova
// names service, and says whether it is gone (false: servers still use it).
func (d *Driver) dropInventory(ctx context.Context, service, rc string) (bool, error) {
	hypervisor := service
	err := d.cfg.Store.View(ctx, func(tx climate.Tx) error {
		all, err := tx.ListHosts(ctx)
		for _, h := range all {
			if h.ServiceName == service {
				hypervisor = h.HypervisorHostname
			}
		}
		return err
	})
	if err != nil {
		return false, err
	}
	found, err := d.providers(ctx, url.Values{"name": {"blazar_" + hypervisor}})
	if err != nil || len(found) == 0 {
		return err == nil, err
	}
	gone := true
	err = d.retry(ctx, "delete the inventory of "+rc+" on "+found[0].Name, func(ctx context.Context) error {
		_, err := d.cfg.Placement.Delete(ctx, d.cfg.Placement.ServiceURL("resource_providers", found[0].UUID, "inventories", rc), &gophercloud.RequestOpts{OkCodes: []int{204}})
		switch {
		case gophercloud.ResponseCodeIs(err, 404):
			return nil
		case gophercloud.ResponseCodeIs(err, 409):
			gone = false // in use
			return nil
		}
		return err
	})
	return gone && err == nil, err
}
