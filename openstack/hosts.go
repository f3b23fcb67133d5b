package openstack

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/availabilityzones"

	"climate"
)

// Hosts is the host service with Blazar's Nova side (climate.HostService around the
// manager's): registering a host looks its hypervisor up in Nova by name (or id), refuses
// one with servers, takes vcpus, memory, disk, the hypervisor's details, its service name
// and availability zone from Nova (dropping what the request says of them, as Blazar), and
// each placement trait T of its compute node as the extra capability T = "true" (what
// flavor:instance's trait:T filters on), and adds it to the freepool; deleting a host refuses one with servers and takes it out of
// the freepool. Policy is checked first, so callers who may not manage hosts never make
// Climate call Nova.
type Hosts struct {
	climate.HostService
	Driver *Driver
	Policy climate.Policy
}

// novaFields are the host fields Nova decides; a request's values for them are dropped.
var novaFields = []string{"id", "availability_zone", "hypervisor_hostname", "service_name", "vcpus", "cpu_info",
	"hypervisor_type", "hypervisor_version", "memory_mb", "local_gb"}

// CreateHost registers a host of Nova's, as Blazar does.
func (h Hosts) CreateHost(ctx context.Context, who climate.Identity, fields map[string]string) (*climate.Host, error) {
	if err := h.Policy.Check(who, "blazar:oshosts:post", who.OwnTarget()); err != nil {
		return nil, err
	}
	name := fields["name"]
	if name == "" {
		name = fields["hypervisor_hostname"]
	}
	if name == "" {
		return h.HostService.CreateHost(ctx, who, fields) // its message for a missing name
	}
	hv, err := h.Driver.hypervisor(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := h.Driver.refuseServers(ctx, hv.Service.Host, name); err != nil {
		return nil, err
	}
	zone, err := h.Driver.zoneOf(ctx, hv.Service.Host)
	if err != nil {
		return nil, err
	}
	traits, err := h.Driver.traits(ctx, hv.HypervisorHostname)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(fields)+len(novaFields)+len(traits))
	for k, v := range fields {
		if !slices.Contains(novaFields, k) {
			out[k] = v
		}
	}
	for _, t := range traits {
		out[t] = "true" // how flavor:instance's trait:T=required finds its hosts
	}
	out["name"] = hv.HypervisorHostname
	out["service_name"] = hv.Service.Host
	out["vcpus"] = strconv.Itoa(hv.VCPUs)
	out["memory_mb"] = strconv.Itoa(hv.MemoryMB)
	out["local_gb"] = strconv.Itoa(hv.LocalGB)
	out["cpu_info"] = hv.cpuInfo()
	out["hypervisor_type"] = hv.HypervisorType
	out["hypervisor_version"] = strconv.Itoa(hv.HypervisorVersion)
	if zone != "" {
		out["availability_zone"] = zone
	}
	added, err := h.Driver.freepoolMember(ctx, hv.Service.Host, true)
	if err != nil {
		return nil, err
	}
	host, err := h.HostService.CreateHost(ctx, who, out)
	if err != nil && added {
		if _, rerr := h.Driver.freepoolMember(context.WithoutCancel(ctx), hv.Service.Host, false); rerr != nil {
			h.Driver.cfg.Logger.Error("openstack: a host that could not be registered stays in the freepool", "host", hv.Service.Host, "err", rerr)
		}
	}
	return host, err
}

// DeleteHost refuses a host with servers, takes it out of the freepool, and deletes it
// (putting it back if the deletion is refused).
func (h Hosts) DeleteHost(ctx context.Context, who climate.Identity, id string) error {
	if err := h.Policy.Check(who, "blazar:oshosts:delete", who.OwnTarget()); err != nil {
		return err
	}
	host, err := h.HostService.GetHost(ctx, who, id)
	if err != nil {
		return err
	}
	service := host.ServiceName
	if service == "" {
		service = host.HypervisorHostname
	}
	if err := h.Driver.refuseServers(ctx, service, id); err != nil {
		return err
	}
	removed, err := h.Driver.freepoolMember(ctx, service, false)
	if err != nil {
		return err
	}
	err = h.HostService.DeleteHost(ctx, who, id)
	if err != nil && removed {
		if _, rerr := h.Driver.freepoolMember(context.WithoutCancel(ctx), service, true); rerr != nil {
			h.Driver.cfg.Logger.Error("openstack: a host whose deletion was refused is out of the freepool", "host", service, "err", rerr)
		}
	}
	return err
}

// hypervisor is what Nova's os-hypervisors/detail says of one (microversion 2.1, which
// still has the resources).
type hypervisor struct {
	ID                 json.RawMessage `json:"id"` // an integer, or a UUID from 2.53
	HypervisorHostname string          `json:"hypervisor_hostname"`
	VCPUs              int             `json:"vcpus"`
	MemoryMB           int             `json:"memory_mb"`
	LocalGB            int             `json:"local_gb"`
	CPUInfo            json.RawMessage `json:"cpu_info"`
	HypervisorType     string          `json:"hypervisor_type"`
	HypervisorVersion  int             `json:"hypervisor_version"`
	Service            struct {
		Host string `json:"host"`
	} `json:"service"`
}

// cpuInfo is cpu_info as text: Nova gives a JSON document in a string.
func (hv *hypervisor) cpuInfo() string {
	var s string
	if json.Unmarshal(hv.CPUInfo, &s) == nil {
		return s
	}
	return string(hv.CPUInfo)
}

func (hv *hypervisor) id() string {
	var s string
	if json.Unmarshal(hv.ID, &s) == nil {
		return s
	}
	return string(hv.ID)
}

// hypervisor finds the hypervisor named name (or with that id), as Blazar: none is a
// 404, several a 409.
func (d *Driver) hypervisor(ctx context.Context, name string) (*hypervisor, error) {
	var body struct {
		Hypervisors []hypervisor `json:"hypervisors"`
	}
	err := d.retry(ctx, "list hypervisors", func(ctx context.Context) error {
		_, err := d.cfg.Compute.Get(ctx, d.cfg.Compute.ServiceURL("os-hypervisors", "detail"), &body,
			&gophercloud.RequestOpts{MoreHeaders: map[string]string{"X-OpenStack-Nova-API-Version": "2.1"}})
		return err
	})
	if err != nil {
		return nil, err
	}
	var found []hypervisor
	for _, hv := range body.Hypervisors {
		if hv.HypervisorHostname == name || hv.id() == name {
			found = append(found, hv)
		}
	}
	switch len(found) {
	case 0:
		return nil, climate.Errorf(climate.CodeNotFound, "Host '%s' not found!", name)
	case 1:
		return &found[0], nil
	}
	return nil, climate.Errorf(climate.CodeConflict, "There are %d hypervisors named %s in Nova", len(found), name)
}

// traits returns the placement traits of hypervisor's compute node provider (none without
// Placement), but those too long for an extra capability's name (64 characters).
func (d *Driver) traits(ctx context.Context, hypervisor string) ([]string, error) {
	if d.cfg.Placement == nil {
		return nil, nil
	}
	found, err := d.providers(ctx, url.Values{"name": {hypervisor}})
	if err != nil || len(found) == 0 {
		return nil, err
	}
	var body struct {
		Traits []string `json:"traits"`
	}
	err = d.retry(ctx, "list the traits of "+hypervisor, func(ctx context.Context) error {
		_, err := d.cfg.Placement.Get(ctx, d.cfg.Placement.ServiceURL("resource_providers", found[0].UUID, "traits"), &body, nil)
		return err
	})
	return slices.DeleteFunc(body.Traits, func(t string) bool { return len(t) > 64 }), err
}

// refuseServers is Blazar's HostHavingServers: a conflict when Nova has servers on host.
func (d *Driver) refuseServers(ctx context.Context, host, name string) error {
	list, err := d.servers(ctx, []string{host})
	if err != nil {
		return err
	}
	if len(list) > 0 {
		return climate.Errorf(climate.CodeConflict, "Servers [%s] found for host %s", serverIDs(list), name)
	}
	return nil
}

// zoneOf returns the availability zone Nova puts host in ("" when it names none).
func (d *Driver) zoneOf(ctx context.Context, host string) (string, error) {
	var zone string
	err := d.retry(ctx, "list availability zones", func(ctx context.Context) error {
		pages, err := availabilityzones.ListDetail(d.cfg.Compute).AllPages(ctx)
		if err != nil {
			return err
		}
		zones, err := availabilityzones.ExtractAvailabilityZones(pages)
		for _, z := range zones {
			if _, ok := z.Hosts[host]; ok && !strings.HasPrefix(z.ZoneName, "internal") {
				zone = z.ZoneName
			}
		}
		return err
	})
	return zone, err
}

// freepoolMember adds host to the freepool (in) or takes it out, and says whether it did
// anything (it was not so already).
func (d *Driver) freepoolMember(ctx context.Context, host string, in bool) (bool, error) {
	free, err := d.freepool(ctx)
	if err != nil {
		return false, err
	}
	if slices.Contains(free.Hosts, host) == in {
		return false, nil
	}
	return true, d.hostAction(ctx, free, host, in)
}
