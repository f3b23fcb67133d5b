package workload

import (
	"fmt"
	"time"

	"climate"
)

// The instance-slot workload ("instances-21d"): H hosts of mixed capacities and R existing
// virtual:instance leases over 21 days, with a whole-host lease after every tenth, built
// like the blazar-90d book from splitmix64 streams (seeds 4, 5 and 6) so that runs and
// implementations compare. Times are whole hours from T0, so a per-hour check of capacity
// is a per-instant one.
//
// Hosts (i = 0 .. H-1, stream 4, draws in this order):
//
//	vcpus = [32, 48, 64, 96, 128][r(5)]
//	memory_mb = [131072, 262144, 393216, 524288][r(4)]
//	local_gb = [960, 1920, 3840][r(3)]
//	node_type = ["compute_skylake", "compute_cascadelake", "compute_icelake", "gpu_v100"][r(4)]
//	rack = sprintf("rack-%03d", r(max(1, H / 40)))
//
// with the fixed fields, ids and names of blazar-90d's hosts.
//
// Leases (j = 0 .. R-1, stream 5, greedy placement that never exceeds a host):
//
//	d = 1 + r(72); s = r(504 - d + 1); e = s + d            # hours
//	size = InstanceSizes[r(8)]; n = 1 + r(8)                # slots
//	m = min(n, 1 + r(3)); off = r(H)                        # hosts
//	chunk c (0 .. m-1) holds n/m slots, one more when c < n%m; each chunk goes to the next
//	  host h = (off + t) % H (t counting up from 0 over the whole lease, each host tried
//	  once) with no whole-host lease overlapping [s, e) and room for chunk × size beside
//	  the slots held at every hour of [s, e); chunks that find none are dropped
//	one virtual:instance reservation: amount = the slots placed, size, affinity true when
//	  m = 1 < n, false when m = n > 1, else null; no lease when no slot was placed (a
//	  request no host could take, e.g. 8 slots of 16 vCPUs on one host)
//	when j % 10 == 9, then a whole-host lease: d and s drawn as above, k = 1 + r(2),
//	  off = r(H), the first k hosts from off with nothing held over [s, e)
//
// Leases, reservations, allocations and events are numbered in creation order (UID kinds
// 1 to 4, as blazar-90d); an instance reservation with affinity has server group
// UID(6, j). H=5,000 and R=50,000 give 54,877 leases (123 instance requests found no
// host), 91,376 slot allocations holding 224,121 slots, and 7,447 whole-host allocations:
// about 35% of the vCPU-hours are booked.
const (
	InstanceHorizonHours = 504 // 21 days
	seedInstanceHosts    = 4
	seedInstanceLeases   = 5
	seedInstanceRequests = 6
	kindServerGroup      = 6
)

// InstanceSizes are the slot sizes (flavors) of the instance workload.
var InstanceSizes = []climate.Size{
	{VCPUs: 1, MemoryMB: 2048, DiskGB: 20},
	{VCPUs: 2, MemoryMB: 4096, DiskGB: 40},
	{VCPUs: 2, MemoryMB: 8192, DiskGB: 40},
	{VCPUs: 4, MemoryMB: 8192, DiskGB: 80},
	{VCPUs: 4, MemoryMB: 16384, DiskGB: 80},
	{VCPUs: 8, MemoryMB: 16384, DiskGB: 160},
	{VCPUs: 8, MemoryMB: 32768, DiskGB: 160},
	{VCPUs: 16, MemoryMB: 65536, DiskGB: 320},
}

var (
	instanceVCPUs  = []int{32, 48, 64, 96, 128}
	instanceMemory = []int{131072, 262144, 393216, 524288}
	instanceDisk   = []int{960, 1920, 3840}
)

// InstanceHosts builds the h hosts of the instance workload (stream 4).
func InstanceHosts(h int) []climate.Host {
	rng := NewSplitMix64(seedInstanceHosts)
	racks := max(h/40, 1)
	created := T0.Add(createdOffset)
	hosts := make([]climate.Host, h)
	for i := range hosts {
		name := fmt.Sprintf("compute-%05d", i)
		host := climate.Host{
			ID: UID(kindHost, i), HypervisorHostname: name, ServiceName: name,
			CPUInfo: `{"arch": "x86_64"}`, HypervisorType: "QEMU", HypervisorVersion: 6002000,
			AvailabilityZone: "nova", Reservable: true, CreatedAt: created,
		}
		host.VCPUs = instanceVCPUs[rng.R(len(instanceVCPUs))]
		host.MemoryMB = instanceMemory[rng.R(len(instanceMemory))]
		host.LocalGB = instanceDisk[rng.R(len(instanceDisk))]
		host.Extra = map[string]string{"node_type": nodeTypes[rng.R(len(nodeTypes))]}
		host.Extra["rack"] = fmt.Sprintf("rack-%03d", rng.R(racks))
		hosts[i] = host
	}
	return hosts
}

// hold is a hold on a host during [s, e) hours: size per hour, or the whole host.
type hold struct {
	s, e  int
	size  climate.Size
	whole bool
}

// instanceGen places the instance workload's leases on its hosts.
type instanceGen struct {
	hosts []climate.Host
	holds [][]hold
	load  [LongestLease]climate.Size // scratch: the load per hour of a window
}

// room reports whether need fits on host h beside its holds at every hour of [s, e).
func (g *instanceGen) room(h, s, e int, need climate.Size) bool {
	capacity := g.hosts[h].Capacity()
	if !need.Within(capacity) {
		return false
	}
	load := g.load[:e-s]
	clear(load)
	for _, u := range g.holds[h] {
		if u.s >= e || s >= u.e {
			continue
		}
		if u.whole {
			return false
		}
		for t := max(u.s, s); t < min(u.e, e); t++ {
			load[t-s] = load[t-s].Plus(u.size)
		}
	}
	for _, l := range load {
		if !l.Plus(need).Within(capacity) {
			return false
		}
	}
	return true
}

// idle reports whether nothing is held on host h during [s, e).
func (g *instanceGen) idle(h, s, e int) bool {
	for _, u := range g.holds[h] {
		if u.s < e && s < u.e {
			return false
		}
	}
	return true
}

// GenerateInstances builds the instance workload's book of h hosts, r instance leases and,
// after every tenth, a whole-host lease: r + r/10 leases (streams 4 and 5).
func GenerateInstances(h, r int) *Book {
	g := &instanceGen{hosts: InstanceHosts(h), holds: make([][]hold, h)}
	b := &Book{Hosts: g.hosts, Leases: make([]climate.Lease, 0, r+r/10)}
	rng := NewSplitMix64(seedInstanceLeases)
	created := T0.Add(createdOffset)
	alloc, event := 0, 0
	window := func() (s, e int) {
		d := 1 + rng.R(LongestLease)
		s = rng.R(InstanceHorizonHours - d + 1)
		return s, s + d
	}
	add := func(s, e int, res climate.Reservation) {
		n := len(b.Leases)
		start, end := T0.Add(time.Duration(s)*time.Hour), T0.Add(time.Duration(e)*time.Hour)
		l := climate.Lease{
			ID: UID(kindLease, n), UserID: "bench", ProjectID: fmt.Sprintf("proj-%d", n%10),
			Start: start, End: end, Status: climate.LeasePending, CreatedAt: created,
		}
		l.Name = fmt.Sprintf("lease-%d", n)
		res.ID, res.LeaseID, res.Status, res.CreatedAt = UID(kindRes, n), l.ID, climate.ReservationPending, created
		for i := range res.Allocations {
			a := &res.Allocations[i]
			a.ID, a.ReservationID, a.LeaseID, a.Start, a.End = UID(kindAlloc, alloc), res.ID, l.ID, start, end
			alloc++
		}
		l.Reservations = []climate.Reservation{res}
		for _, ev := range []struct {
			t  climate.EventType
			at time.Time
		}{{climate.EventStartLease, start}, {climate.EventEndLease, end}} {
			l.Events = append(l.Events, climate.Event{ID: UID(kindEvent, event), LeaseID: l.ID, Type: ev.t, Time: ev.at, Status: climate.EventUndone, CreatedAt: created})
			event++
		}
		b.Leases = append(b.Leases, l)
	}
	for j := 0; j < r; j++ {
		s, e := window()
		size := InstanceSizes[rng.R(len(InstanceSizes))]
		n := 1 + rng.R(8)
		m := min(n, 1+rng.R(3))
		off := rng.R(h)
		res := climate.Reservation{ResourceType: "virtual:instance", Size: size}
		t := 0
		for c := range m {
			k := n / m
			if c < n%m {
				k++
			}
			for ; t < h; t++ {
				hi := (off + t) % h
				if g.room(hi, s, e, size.Times(k)) {
					g.holds[hi] = append(g.holds[hi], hold{s: s, e: e, size: size.Times(k)})
					res.Allocations = append(res.Allocations, climate.Allocation{ResourceID: g.hosts[hi].ID, Slots: k, Size: size})
					res.Amount += k
					t++
					break
				}
			}
		}
		if n > 1 && (m == 1 || m == n) {
			v := m == 1
			res.Affinity, res.ServerGroupID = &v, UID(kindServerGroup, j)
		}
		if res.Amount > 0 {
			add(s, e, res)
		}

		if j%10 == 9 {
			s, e := window()
			k := 1 + rng.R(2)
			off := rng.R(h)
			res := climate.Reservation{ResourceType: climate.ResourceTypeHost, Min: k, Max: k, BeforeEnd: "default"}
			for t := 0; t < h && len(res.Allocations) < k; t++ {
				hi := (off + t) % h
				if g.idle(hi, s, e) {
					g.holds[hi] = append(g.holds[hi], hold{s: s, e: e, whole: true})
					res.Allocations = append(res.Allocations, climate.Allocation{ResourceID: g.hosts[hi].ID})
				}
			}
			add(s, e, res)
		}
	}
	return b
}

// InstanceRequest is one request of the instance workload: Amount slots of Size over
// Window with Affinity (nil: none).
type InstanceRequest struct {
	Window   Window
	Amount   int
	Size     climate.Size
	Affinity *bool
}

// InstanceRequests returns the instance workload's first n requests (stream 6):
//
//	d = 1 + r(72); s = r(504 - d + 1); window = [T0 + s hours, T0 + (s + d) hours)
//	size = InstanceSizes[r(8)]; amount = 1 + r(8)
//	affinity = [null, null, true, false][r(4)]
func InstanceRequests(n int) []InstanceRequest {
	rng := NewSplitMix64(seedInstanceRequests)
	yes, no := true, false
	out := make([]InstanceRequest, n)
	for t := range out {
		d := 1 + rng.R(LongestLease)
		s := rng.R(InstanceHorizonHours - d + 1)
		q := InstanceRequest{Window: Window{T0.Add(time.Duration(s) * time.Hour), T0.Add(time.Duration(s+d) * time.Hour)}}
		q.Size = InstanceSizes[rng.R(len(InstanceSizes))]
		q.Amount = 1 + rng.R(8)
		q.Affinity = [](*bool){nil, nil, &yes, &no}[rng.R(4)]
		out[t] = q
	}
	return out
}
