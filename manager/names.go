package manager

import (
	"context"

	"climate/resource"
)

// ResourceNames returns the names of the resources among ids that the inventory knows:
// hosts by their hypervisor hostname, floating IPs by their address. It checks no policy:
// the API names only the resources of leases and allocations the caller may already see.
// It reads the planner's view, so it costs no query beyond the view's revision check.
func (m *Manager) ResourceNames(ctx context.Context, ids []string) (hosts, addresses map[string]string, err error) {
	hosts, addresses = map[string]string{}, map[string]string{}
	err = m.view(ctx, func(v *resource.View) error {
		for _, id := range ids {
			if h := v.Index.Host(id); h != nil {
				hosts[id] = h.HypervisorHostname
			} else if a := v.FloatingIPs.Host(id); a != nil {
				addresses[id] = a.HypervisorHostname // an address's index entry is named by it
			}
		}
		return nil
	})
	return hosts, addresses, err
}
