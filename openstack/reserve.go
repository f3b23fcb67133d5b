package openstack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/aggregates"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"

	"climate"
)

// Blazar makes a reservation's Nova artefacts when the lease is created (its plugins'
// reserve_resource): a host reservation's aggregate (empty until the start); an instance
// reservation's resource class, server group (when it has an affinity), private flavor
// and aggregate. Climate makes them when it delivers the lease's lease.create
// notification (Changes), just after the creation commits, and again at the start, where
// each step finds what is made already: a lease starting at once, or whose delivery lags,
// starts all the same. A lease deleted before its start loses them with its deletion.

// Reserve makes the artefacts of l's reservations that Blazar makes at creation.
func (d *Driver) Reserve(ctx context.Context, l *climate.Lease) error {
	return d.each(ctx, l, func(ctx context.Context, l *climate.Lease, r *climate.Reservation) error {
		_, err := d.ensureAggregate(ctx, r.ID, l.ProjectID)
		return err
	}, func(ctx context.Context, l *climate.Lease, r *climate.Reservation) error {
		_, err := d.reserveInstances(ctx, l, r)
		return err
	})
}

// reserveInstances makes r's resource class, server group, flavor (without the project's
// access, given at the start) and aggregate (without hosts), each unless it exists.
func (d *Driver) reserveInstances(ctx context.Context, l *climate.Lease, r *climate.Reservation) (*aggregates.Aggregate, error) {
	if d.cfg.Placement == nil {
		return nil, fmt.Errorf("instance reservations need Placement, which Keystone's catalog does not list")
	}
	rc := resourceClass(r.ID)
	if err := d.retry(ctx, "create resource class "+rc, func(ctx context.Context) error {
		_, err := d.cfg.Placement.Put(ctx, d.cfg.Placement.ServiceURL("resource_classes", rc), nil, nil, &gophercloud.RequestOpts{OkCodes: []int{201, 204}})
		return err
	}); err != nil {
		return nil, err
	}
	group, err := d.ensureServerGroup(ctx, l, r)
	if err != nil {
		return nil, err
	}
	if err := d.ensureFlavor(ctx, r, rc, group); err != nil {
		return nil, err
	}
	meta := map[string]string{"reservation": r.ID, "filter_tenant_id": l.ProjectID, OwnerKey: l.ProjectID}
	if group != "" {
		meta["affinity_id"] = group
	}
	return d.ensureAggregateWith(ctx, r.ID, "", meta)
}

// groupName is the name of a reservation's server group, as Blazar names it.
func groupName(rid string) string { return "reservation:" + rid }

// errLeaseGone means the lease was deleted meanwhile: its deletion cleans up.
var errLeaseGone = errors.New("the lease was deleted")

// ensureServerGroup returns the id of r's Nova server group (policy affinity for an
// affinity of true, anti-affinity for false; none for null, or for flavor:instance, as
// Blazar), made unless the reservation records one that exists. The reservation's
// server_group_id is Nova's group id, set here: two makers at once (the creation's
// delivery and an early start) each make one, the store keeps the first recorded, and the
// other deletes its own. A group made by a maker that died before recording it is
// adopted here, or deleted with the reservation's others at the end (endServerGroups).
func (d *Driver) ensureServerGroup(ctx context.Context, l *climate.Lease, r *climate.Reservation) (string, error) {
	if r.ResourceType != InstanceType || r.Affinity == nil {
		return "", nil
	}
	seen, err := d.recordedGroup(ctx, l.ID, r.ID)
	if err != nil {
		return "", err
	}
	groups, err := d.serverGroups(ctx, r.ID)
	if err != nil {
		return "", err
	}
	if seen != "" && slices.ContainsFunc(groups, func(g servergroups.ServerGroup) bool { return g.ID == seen }) {
		return seen, nil
	}
	var mine string
	if len(groups) > 0 {
		mine = groups[0].ID // an interrupted maker's
	} else {
		policy := "anti-affinity"
		if *r.Affinity {
			policy = "affinity"
		}
		owner, err := d.groupClient(ctx, l)
		if err != nil {
			return "", err
		}
		err = d.retry(ctx, "create server group "+groupName(r.ID), func(ctx context.Context) error {
			g, err := servergroups.Create(ctx, owner, servergroups.CreateOpts{Name: groupName(r.ID), Policies: []string{policy}}).Extract()
			if err == nil {
				mine = g.ID
			}
			return err
		})
		if err != nil {
			return "", err
		}
		d.changed(ctx, "create server group "+groupName(r.ID))
	}
	won, err := d.recordGroup(ctx, l.ID, r.ID, seen, mine)
	if err != nil && !errors.Is(err, errLeaseGone) {
		return "", err
	}
	if won != mine {
		if derr := d.deleteServerGroup(ctx, mine); derr != nil {
			return "", derr
		}
	}
	return won, err
}

// groupClient returns the compute client that makes l's server group. Nova puts a group
// in the project of the token that makes it and lets only that project (and admins) boot
// into it, so it is made with a token of the lease's trust, acting as its owner, as
// Blazar makes it with the owner's; the service user's for a lease without a trust
// (noauth, where the lease's project is whatever the caller said).
func (d *Driver) groupClient(ctx context.Context, l *climate.Lease) (*gophercloud.ServiceClient, error) {
	token := climate.TrustToken(ctx) // the engine's, for this lease's events
	if token == "" && l.TrustID != "" && d.cfg.Trusts != nil {
		t, err := d.cfg.Trusts.Token(ctx, l.TrustID)
		if err != nil {
			return nil, fmt.Errorf("lease %s cannot act for its owner: its trust is gone or unusable: %w", l.ID, err)
		}
		token = t
	}
	c := d.cfg.Compute
	if token == "" {
		return c, nil
	}
	p := &gophercloud.ProviderClient{HTTPClient: c.HTTPClient, UserAgent: c.UserAgent}
	p.SetToken(token)
	return &gophercloud.ServiceClient{ProviderClient: p, Endpoint: c.Endpoint, ResourceBase: c.ResourceBase, Type: c.Type, Microversion: c.Microversion}, nil
}

// recordedGroup returns the server group id the store has for reservation rid.
func (d *Driver) recordedGroup(ctx context.Context, leaseID, rid string) (string, error) {
	var id string
	err := d.cfg.Store.View(ctx, func(tx climate.Tx) error {
		r, err := reservationOf(ctx, tx, leaseID, rid)
		if err == nil {
			id = r.ServerGroupID
		}
		return err
	})
	return id, err
}

// recordGroup sets reservation rid's server group to id unless it changed from seen
// meanwhile; it returns the group recorded (id, or the one recorded meanwhile).
func (d *Driver) recordGroup(ctx context.Context, leaseID, rid, seen, id string) (string, error) {
	won := id
	err := d.cfg.Store.Update(ctx, func(tx climate.Tx) error {
		l, err := tx.GetLease(ctx, leaseID)
		if err != nil {
			return err
		}
		for i := range l.Reservations {
			if r := &l.Reservations[i]; r.ID == rid {
				if r.ServerGroupID != seen {
					won = r.ServerGroupID
					return nil
				}
				r.ServerGroupID = id
				return tx.UpdateLease(ctx, l)
			}
		}
		return errLeaseGone
	})
	if climate.ErrorCode(err) == climate.CodeNotFound {
		return "", errLeaseGone
	}
	return won, err
}

// reservationOf reads reservation rid of lease leaseID.
func reservationOf(ctx context.Context, tx climate.Tx, leaseID, rid string) (*climate.Reservation, error) {
	l, err := tx.GetLease(ctx, leaseID)
	if climate.ErrorCode(err) == climate.CodeNotFound {
		return nil, errLeaseGone
	}
	if err != nil {
		return nil, err
	}
	for i := range l.Reservations {
		if l.Reservations[i].ID == rid {
			return &l.Reservations[i], nil
		}
	}
	return nil, errLeaseGone
}

// serverGroups lists the server groups named after reservation rid (of every project),
// sorted by id.
func (d *Driver) serverGroups(ctx context.Context, rid string) ([]servergroups.ServerGroup, error) {
	var out []servergroups.ServerGroup
	err := d.retry(ctx, "list server groups", func(ctx context.Context) error {
		pages, err := servergroups.List(d.cfg.Compute, servergroups.ListOpts{AllProjects: true}).AllPages(ctx)
		if err != nil {
			return err
		}
		all, err := servergroups.ExtractServerGroups(pages)
		out = slices.DeleteFunc(all, func(g servergroups.ServerGroup) bool { return g.Name != groupName(rid) })
		return err
	})
	slices.SortFunc(out, func(a, b servergroups.ServerGroup) int { return strings.Compare(a.ID, b.ID) })
	return out, err
}

func (d *Driver) deleteServerGroup(ctx context.Context, id string) error {
	return d.retry(ctx, "delete server group "+id, func(ctx context.Context) error {
		err := servergroups.Delete(ctx, d.cfg.Compute, id).ExtractErr()
		if gophercloud.ResponseCodeIs(err, 404) {
			return nil
		}
		return err
	})
}

// endServerGroups deletes every server group named after reservation rid.
func (d *Driver) endServerGroups(ctx context.Context, rid string) error {
	groups, err := d.serverGroups(ctx, rid)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if err := d.deleteServerGroup(ctx, g.ID); err != nil {
			return err
		}
	}
	return nil
}
