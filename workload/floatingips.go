package workload

import (
	"fmt"
	"time"

	"climate"
)

// The floating-IP workload: n addresses on a few external networks, existing allocations
// spread over blazar-90d's 90 days (stream 7) and requests (stream 8).
const (
	seedFloatingIPAllocations = 7
	seedFloatingIPRequests    = 8
	kindFloatingIP            = 7
)

// FloatingIPNetwork names external network k.
func FloatingIPNetwork(k int) string { return fmt.Sprintf("net-%d", k) }

// FloatingIPs returns n addresses spread round-robin over networks external networks:
// address i, id UID(7, i), is the q-th (q = i / networks) of network i % networks,
// 10.<network>.<q / 256>.<q % 256>.
func FloatingIPs(n, networks int) []climate.FloatingIP {
	out := make([]climate.FloatingIP, n)
	created := T0.Add(createdOffset)
	for i := range out {
		k, q := i%networks, i/networks
		out[i] = climate.FloatingIP{ID: UID(kindFloatingIP, i), FloatingNetworkID: FloatingIPNetwork(k),
			Address: fmt.Sprintf("10.%d.%d.%d", k%256, q/256%256, q%256), Reservable: true, CreatedAt: created}
	}
	return out
}

// FloatingIPAllocations books r allocations of one address each on fips (stream 7),
// greedily without conflicts, as blazar-90d books hosts:
//
//	d = 1 + r(72); s = r(2160 - d + 1); off = r(len(fips))
//	the first address from off on (wrapping) with nothing held over [s, s + d), if any
//
// Allocation j is lease UID(1, j)'s, its id UID(3, j). 50,000 allocations of 10,000
// addresses hold about 14% of the address-hours.
func FloatingIPAllocations(fips []climate.FloatingIP, r int) []climate.Allocation {
	rng := NewSplitMix64(seedFloatingIPAllocations)
	busy := make([][]span, len(fips))
	out := make([]climate.Allocation, 0, r)
	for j := 0; j < r; j++ {
		d := 1 + rng.R(LongestLease)
		s := rng.R(HorizonHours - d + 1)
		e := s + d
		off := rng.R(len(fips))
		for t := range fips {
			p := (off + t) % len(fips)
			if free(busy[p], s, e) {
				busy[p] = append(busy[p], span{s, e})
				out = append(out, climate.Allocation{ID: UID(kindAlloc, j), ReservationID: UID(kindRes, j), LeaseID: UID(kindLease, j),
					ResourceID: fips[p].ID, Start: T0.Add(time.Duration(s) * time.Hour), End: T0.Add(time.Duration(e) * time.Hour)})
				break
			}
		}
	}
	return out
}

// FloatingIPRequest asks for Amount addresses of Network over Window, Required among
// them (an address, or "" for none).
type FloatingIPRequest struct {
	Window   Window
	Network  string
	Amount   int
	Required string
}

// FloatingIPRequests returns the first n requests on fips spread over networks networks
// (stream 8):
//
//	d = 1 + r(72); s = r(2160 - d + 1); k = r(networks); amount = 1 + r(4)
//	q = r(len(fips) / networks); required = fips[k + networks × q].Address when r(2) = 0
func FloatingIPRequests(n int, fips []climate.FloatingIP, networks int) []FloatingIPRequest {
	rng := NewSplitMix64(seedFloatingIPRequests)
	out := make([]FloatingIPRequest, n)
	for t := range out {
		d := 1 + rng.R(LongestLease)
		s := rng.R(HorizonHours - d + 1)
		k := rng.R(networks)
		q := FloatingIPRequest{Window: Window{T0.Add(time.Duration(s) * time.Hour), T0.Add(time.Duration(s+d) * time.Hour)},
			Network: FloatingIPNetwork(k), Amount: 1 + rng.R(4)}
		if idx := k + networks*rng.R(max(len(fips)/networks, 1)); rng.R(2) == 0 && idx < len(fips) {
			q.Required = fips[idx].Address
		}
		out[t] = q
	}
	return out
}
