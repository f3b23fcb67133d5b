package manager

import (
	"climate"
	"climate/resource"
)

// splitHosts separates allocs into those on hosts, which the commit's re-check keeps
// Config.Cleaning apart, and the rest (floating IPs), which get no cleaning time.
func splitHosts(v *resource.View, allocs []climate.Allocation) (hosts, others []climate.Allocation) {
	hosts = make([]climate.Allocation, 0, len(allocs)) // most are
	for _, a := range allocs {
		if v.Index.Host(a.ResourceID) != nil {
			hosts = append(hosts, a)
		} else {
			others = append(others, a)
		}
	}
	return hosts, others
}
