package openstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/aggregates"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"climate"
)

// Instance reservations (virtual:instance), as Blazar's plugin: a private flavor with id
// <reservation id> and name reservation:<id>, whose extra specs send its servers to the
// reservation's aggregate (aggregate_instance_extra_specs:reservation) and make each use
// one unit of the placement resource class CUSTOM_RESERVATION_<ID>; the aggregate
// <reservation id> (no zone, metadata reservation, filter_tenant_id and blazar:owner)
// holds the hosts of the slots, which stay in the freepool; on each host's placement
// provider blazar_<hypervisor> (a child of its compute node) an inventory of that class
// counts the host's slots, so Nova's scheduler places at most amount servers, on the hosts
// Climate planned. A reservation with an affinity also gets the server group
// reservation:<id> (policy affinity or anti-affinity; its id is the reservation's
// server_group_id and the flavor's and aggregate's affinity_id), for boots with the hint
// group=<id>. The class, group, flavor and aggregate are made at the lease's creation
// (reserve.go), the access for the project, hosts and inventories at the start. At the
// end the access goes, every server of the flavor is deleted and waited for, then the
// inventories, class, server group, flavor and aggregate.

// InstanceType and FlavorType are the resource_types of instance reservations: slots of
// a size, or of a flavor (whose copy, extra specs included, the reservation keeps as JSON
// in resource_properties, as Blazar's flavor:instance).
const (
	InstanceType = "virtual:instance"
	FlavorType   = "flavor:instance"
)

// sourceFlavor is what a flavor:instance reservation keeps of its flavor.
type sourceFlavor struct {
	VCPUs      int               `json:"vcpus"`
	RAM        int               `json:"ram"`
	Disk       int               `json:"disk"`
	Ephemeral  int               `json:"OS-FLV-EXT-DATA:ephemeral"`
	ExtraSpecs map[string]string `json:"extra_specs"`
}

// flavorOf returns the reservation flavor's size and the extra specs it copies: the
// source flavor's for flavor:instance (Blazar copies them, then adds its own).
func flavorOf(r *climate.Reservation) (sourceFlavor, error) {
	if r.ResourceType != FlavorType {
		return sourceFlavor{VCPUs: r.Size.VCPUs, RAM: r.Size.MemoryMB, Disk: r.Size.DiskGB}, nil
	}
	var src sourceFlavor
	if err := json.Unmarshal([]byte(r.ResourceProperties), &src); err != nil {
		return src, fmt.Errorf("reading the reservation's flavor: %w", err)
	}
	return src, nil
}

// resourceClass is a reservation's placement resource class, as Blazar names it.
func resourceClass(rid string) string {
	return "CUSTOM_RESERVATION_" + strings.ToUpper(strings.ReplaceAll(rid, "-", "_"))
}

// startInstances makes r's flavor, aggregate and inventories (each only if missing); on
// failure it removes them again, as Blazar cleans up.
func (d *Driver) startInstances(ctx context.Context, l *climate.Lease, r *climate.Reservation) error {
	err := d.makeInstances(ctx, l, r)
	if err != nil {
		if rerr := d.endInstances(context.WithoutCancel(ctx), r.ID); rerr != nil {
			d.cfg.Logger.Error("openstack: undoing a failed instance reservation start failed", "reservation", r.ID, "err", rerr)
		}
	}
	return err
}

func (d *Driver) makeInstances(ctx context.Context, l *climate.Lease, r *climate.Reservation) error {
	agg, err := d.reserveInstances(ctx, l, r)
	if err != nil {
		return err
	}
	if err := d.giveAccess(ctx, r.ID, l.ProjectID); err != nil {
		return err
	}
	hosts, err := d.hosts(ctx, r)
	if err != nil {
		return err
	}
	slots := map[string]int{} // by Climate host id
	for _, a := range r.Allocations {
		slots[a.ResourceID] += max(a.Slots, 1)
	}
	for _, h := range hosts {
		if !slices.Contains(agg.Hosts, h.name) {
			if err := d.hostAction(ctx, agg, h.name, true); err != nil { // it stays in the freepool
				return err
			}
		}
		if err := d.setInventory(ctx, h.hypervisor, resourceClass(r.ID), slots[h.id]); err != nil {
			return err
		}
	}
	return nil
}

// ensureFlavor makes r's private flavor with its extra specs (affinity_id names its
// server group, if any). A flavor of another size (the reservation was resized before
// its start) is made again, as Blazar does.
func (d *Driver) ensureFlavor(ctx context.Context, r *climate.Reservation, rc, group string) error {
	c := d.cfg.Compute
	src, err := flavorOf(r)
	if err != nil {
		return err
	}
	made := false
	err = d.retry(ctx, "create flavor "+r.ID, func(ctx context.Context) error {
		cur, err := flavors.Get(ctx, c, r.ID).Extract()
		switch {
		case err == nil && cur.VCPUs == src.VCPUs && cur.RAM == src.RAM && cur.Disk == src.Disk && cur.Ephemeral == src.Ephemeral:
			return nil
		case err == nil: // resized: made again
			if err := flavors.Delete(ctx, c, r.ID).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, 404) {
				return err
			}
		case !gophercloud.ResponseCodeIs(err, 404):
			return err
		}
		private := false
		_, err = flavors.Create(ctx, c, flavors.CreateOpts{ID: r.ID, Name: "reservation:" + r.ID, VCPUs: src.VCPUs, RAM: src.RAM,
			Disk: &src.Disk, Ephemeral: &src.Ephemeral, IsPublic: &private}).Extract()
		if gophercloud.ResponseCodeIs(err, 409) {
			return nil // made by an attempt whose answer was lost
		}
		made = err == nil
		return err
	})
	if err != nil {
		return err
	}
	if made {
		d.changed(ctx, "create flavor "+r.ID)
	}
	specs := flavors.ExtraSpecsOpts{}
	for k, v := range src.ExtraSpecs {
		specs[k] = v
	}
	specs["aggregate_instance_extra_specs:reservation"] = r.ID
	specs["resources:"+rc] = "1"
	if group != "" {
		specs["affinity_id"] = group
	}
	return d.retry(ctx, "set the extra specs of flavor "+r.ID, func(ctx context.Context) error {
		_, err := flavors.CreateExtraSpecs(ctx, c, r.ID, specs).Extract()
		return err
	})
}

// giveAccess lets project boot with the private flavor rid (at the start, as Blazar).
func (d *Driver) giveAccess(ctx context.Context, rid, project string) error {
	return d.retry(ctx, "give project "+project+" access to flavor "+rid, func(ctx context.Context) error {
		_, err := flavors.AddAccess(ctx, d.cfg.Compute, rid, flavors.AddAccessOpts{Tenant: project}).Extract()
		if gophercloud.ResponseCodeIs(err, 409) {
			return nil // it has it already
		}
		return err
	})
}

// ensureAggregateWith is ensureAggregate with a zone ("" for none) and metadata.
func (d *Driver) ensureAggregateWith(ctx context.Context, name, zone string, meta map[string]string) (*aggregates.Aggregate, error) {
	agg, err := d.findAggregate(ctx, name)
	if err != nil {
		return nil, err
	}
	if agg == nil {
		err = d.retry(ctx, "create aggregate "+name, func(ctx context.Context) error {
			a, err := aggregates.Create(ctx, d.cfg.Compute, aggregates.CreateOpts{Name: name, AvailabilityZone: zone}).Extract()
			if gophercloud.ResponseCodeIs(err, 409) {
				if a, err = d.findAggregate(ctx, name); err == nil && a == nil {
					err = fmt.Errorf("Nova says aggregate %s exists but does not list it", name)
				}
			}
			agg = a
			return err
		})
		if err != nil {
			return nil, err
		}
		d.changed(ctx, "create aggregate "+name)
	}
	missing := map[string]any{}
	for k, v := range meta {
		if agg.Metadata[k] != v {
			missing[k] = v
		}
	}
	if len(missing) > 0 {
		err = d.retry(ctx, "set the metadata of aggregate "+name, func(ctx context.Context) error {
			a, err := aggregates.SetMetadata(ctx, d.cfg.Compute, agg.ID, aggregates.SetMetadataOpts{Metadata: missing}).Extract()
			if err == nil {
				agg = a
			}
			return err
		})
	}
	return agg, err
}

// provider is a placement resource provider.
type provider struct {
	UUID       string `json:"uuid"`
	Name       string `json:"name"`
	Generation int    `json:"generation"`
}

// providers lists the resource providers matching query (placement's list filters).
func (d *Driver) providers(ctx context.Context, query url.Values) ([]provider, error) {
	var body struct {
		Providers []provider `json:"resource_providers"`
	}
	err := d.retry(ctx, "list resource providers", func(ctx context.Context) error {
		_, err := d.cfg.Placement.Get(ctx, d.cfg.Placement.ServiceURL("resource_providers")+"?"+query.Encode(), &body, nil)
		return err
	})
	return body.Providers, err
}

// reservationProvider returns the provider blazar_<hypervisor>, made as a child of the
// hypervisor's compute node provider unless it exists (Blazar makes it at registration).
func (d *Driver) reservationProvider(ctx context.Context, hypervisor string) (*provider, error) {
	name := "blazar_" + hypervisor
	for {
		found, err := d.providers(ctx, url.Values{"name": {name}})
		if err != nil || len(found) > 0 {
			if len(found) > 0 {
				return &found[0], nil
			}
			return nil, err
		}
		roots, err := d.providers(ctx, url.Values{"name": {hypervisor}})
		if err != nil {
			return nil, err
		}
		if len(roots) == 0 {
			return nil, fmt.Errorf("placement has no resource provider for hypervisor %s", hypervisor)
		}
		err = d.retry(ctx, "create resource provider "+name, func(ctx context.Context) error {
			_, err := d.cfg.Placement.Post(ctx, d.cfg.Placement.ServiceURL("resource_providers"),
				map[string]any{"name": name, "parent_provider_uuid": roots[0].UUID}, nil, &gophercloud.RequestOpts{OkCodes: []int{200, 201}})
			if gophercloud.ResponseCodeIs(err, 409) {
				return nil // made meanwhile: found on the next look
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
}

// setInventory makes rc's inventory on hypervisor's reservation provider total (one unit
// per server), retrying placement's generation conflicts.
func (d *Driver) setInventory(ctx context.Context, hypervisor, rc string, total int) error {
	for range 5 {
		p, err := d.reservationProvider(ctx, hypervisor)
		if err != nil {
			return err
		}
		err = d.retry(ctx, "set the inventory of "+rc+" on "+p.Name, func(ctx context.Context) error {
			inv := map[string]any{"resource_provider_generation": p.Generation, "total": total, "max_unit": 1, "allocation_ratio": 1.0}
			u := d.cfg.Placement.ServiceURL("resource_providers", p.UUID, "inventories")
			var cur struct {
				Total int `json:"total"`
			}
			_, err := d.cfg.Placement.Get(ctx, u+"/"+rc, &cur, nil)
			switch {
			case gophercloud.ResponseCodeIs(err, 404): // a new class on the provider: added by POST
				inv["resource_class"] = rc
				_, err = d.cfg.Placement.Post(ctx, u, inv, nil, &gophercloud.RequestOpts{OkCodes: []int{201}})
			case err == nil:
				if cur.Total == total {
					return nil
				}
				_, err = d.cfg.Placement.Put(ctx, u+"/"+rc, inv, nil, &gophercloud.RequestOpts{OkCodes: []int{200}})
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "answered 409") {
			return err
		}
		// Another writer moved the provider's generation: read it again.
	}
	return fmt.Errorf("the inventory of %s on blazar_%s: placement kept answering 409", rc, hypervisor)
}

// endInstances removes the project's access, deletes every server of r's flavor and waits
// for them to go, then the inventories, the resource class, the flavor and the aggregate.
// Each step finds nothing to do if it was done.
func (d *Driver) endInstances(ctx context.Context, rid string) error {
	c := d.cfg.Compute
	fl, err := flavors.Get(ctx, c, rid).Extract()
	if err != nil && !gophercloud.ResponseCodeIs(err, 404) {
		return fmt.Errorf("read flavor %s: %s", rid, Message(err))
	}
	if fl != nil {
		var access []flavors.FlavorAccess
		err := d.retry(ctx, "list the access to flavor "+rid, func(ctx context.Context) error {
			pages, err := flavors.ListAccesses(c, rid).AllPages(ctx)
			if err == nil {
				access, err = flavors.ExtractAccesses(pages)
			}
			return err
		})
		if err != nil {
			return err
		}
		for _, a := range access {
			err := d.retry(ctx, "remove access to flavor "+rid, func(ctx context.Context) error {
				_, err := flavors.RemoveAccess(ctx, c, rid, flavors.RemoveAccessOpts{Tenant: a.TenantID}).Extract()
				if gophercloud.ResponseCodeIs(err, 404) {
					return nil
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		if err := d.clearServers(ctx, "of flavor "+rid, servers.ListOpts{Flavor: rid, AllTenants: true}); err != nil {
			return err
		}
	}
	rc := resourceClass(rid)
	exists := false
	if d.cfg.Placement != nil {
		err := d.retry(ctx, "read resource class "+rc, func(ctx context.Context) error {
			_, err := d.cfg.Placement.Get(ctx, d.cfg.Placement.ServiceURL("resource_classes", rc), nil, nil)
			exists = err == nil
			if gophercloud.ResponseCodeIs(err, 404) {
				return nil // gone already (placement refuses to filter by an unknown class)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	if exists {
		holders, err := d.providers(ctx, url.Values{"resources": {rc + ":1"}})
		if err != nil {
			return err
		}
		for _, p := range holders {
			err := d.retry(ctx, "delete the inventory of "+rc+" on "+p.Name, func(ctx context.Context) error {
				_, err := d.cfg.Placement.Delete(ctx, d.cfg.Placement.ServiceURL("resource_providers", p.UUID, "inventories", rc), &gophercloud.RequestOpts{OkCodes: []int{204}})
				switch {
				case gophercloud.ResponseCodeIs(err, 404):
					return nil
				case gophercloud.ResponseCodeIs(err, 409):
					return retryLater{err} // in use until Nova has removed the deleted servers' allocations
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		err = d.retry(ctx, "delete resource class "+rc, func(ctx context.Context) error {
			_, err := d.cfg.Placement.Delete(ctx, d.cfg.Placement.ServiceURL("resource_classes", rc), &gophercloud.RequestOpts{OkCodes: []int{204}})
			if gophercloud.ResponseCodeIs(err, 404) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	if fl != nil {
		err := d.retry(ctx, "delete flavor "+rid, func(ctx context.Context) error {
			err := flavors.Delete(ctx, c, rid).ExtractErr()
			if gophercloud.ResponseCodeIs(err, 404) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	if err := d.endServerGroups(ctx, rid); err != nil {
		return err
	}
	// The hosts never left the freepool: they only leave this aggregate.
	agg, err := d.findAggregate(ctx, rid)
	if err != nil || agg == nil {
		return err
	}
	for _, h := range slices.Clone(agg.Hosts) {
		if err := d.hostAction(ctx, agg, h, false); err != nil {
			return err
		}
	}
	return d.retry(ctx, "delete aggregate "+rid, func(ctx context.Context) error {
		err := aggregates.Delete(ctx, c, agg.ID).ExtractErr()
		if gophercloud.ResponseCodeIs(err, 404) {
			return nil
		}
		return err
	})
}

// clearServers deletes the servers opts lists and waits until none is left, for at most
// DeleteTimeout.
func (d *Driver) clearServers(ctx context.Context, what string, opts servers.ListOpts) error {
	list := func(ctx context.Context) ([]servers.Server, error) {
		var out []servers.Server
		err := d.retry(ctx, "list the servers "+what, func(ctx context.Context) error {
			pages, err := servers.List(d.cfg.Compute, opts).AllPages(ctx)
			if err == nil {
				out, err = servers.ExtractServers(pages)
			}
			return err
		})
		return out, err
	}
	return d.waitGone(ctx, what, list)
}

// Flavor reads Nova's flavor id with its extra specs (what flavor:instance reserves, as
// Blazar reads it); climate.CodeNotFound when Nova has none.
func (d *Driver) Flavor(ctx context.Context, id string) (*climate.Flavor, error) {
	var f *flavors.Flavor
	err := d.retry(ctx, "read flavor "+id, func(ctx context.Context) error {
		var err error
		f, err = flavors.Get(ctx, d.cfg.Compute, id).Extract()
		if gophercloud.ResponseCodeIs(err, 404) {
			f = nil
			return nil
		}
		return err
	})
	if err != nil {
		return nil, climate.Errorf(climate.CodeUnavailable, "Nova: %s", err)
	}
	if f == nil {
		return nil, climate.Errorf(climate.CodeNotFound, "Flavor %s not found", id)
	}
	var specs map[string]string
	err = d.retry(ctx, "read the extra specs of flavor "+id, func(ctx context.Context) error {
		var err error
		specs, err = flavors.ListExtraSpecs(ctx, d.cfg.Compute, id).Extract()
		return err
	})
	if err != nil {
		return nil, climate.Errorf(climate.CodeUnavailable, "Nova: %s", err)
	}
	if len(specs) == 0 {
		specs = nil
	}
	return &climate.Flavor{ID: f.ID, Name: f.Name, VCPUs: f.VCPUs, RAM: f.RAM, Disk: f.Disk, Ephemeral: f.Ephemeral, ExtraSpecs: specs}, nil
}
