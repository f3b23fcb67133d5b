package manager

import (
	"context"

	"climate"
	"climate/resource"
)

// ResourceNames returns the names of the resources among ids that the inventory knows:
// hosts by their hypervisor hostname, floating IPs by their address. It checks no policy:
// the API names only the resources of leases and allocations the caller may already see.
// It reads the planner's view, so it costs no query beyond the view's revision check.
func (m *Manager) ResourceNames(ctx context.Context, ids []string) (hosts, addresses map[string]string, err error) {
	var names *climate.ResourceNames
	err = m.view(ctx, func(v *resource.View) error {
		names = namesIn(v, ids)
		return nil
	})
	if err != nil {
		return map[string]string{}, map[string]string{}, err
	}
	return names.Hosts, names.Addresses, nil
}

// namesIn names the resources among ids that v knows.
func namesIn(v *resource.View, ids []string) *climate.ResourceNames {
	n := &climate.ResourceNames{Hosts: map[string]string{}, Addresses: map[string]string{}}
	for _, id := range ids {
		if h := v.Index.Host(id); h != nil {
			n.Hosts[id] = h.HypervisorHostname
		} else if a := v.FloatingIPs.Host(id); a != nil {
			n.Addresses[id] = a.HypervisorHostname // an address's index entry is named by it
		}
	}
	return n
}
