// Package workload builds the deterministic "blazar-90d" benchmark book defined in
// shared/bench/WORKLOAD.md: hosts, existing leases placed greedily without conflicts, and
// request windows, all from splitmix64 streams, so that any implementation builds
// bit-identical data and results can be compared.
package workload

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"climate"
)

// SplitMix64 is the workload's random number generator.
type SplitMix64 struct{ state uint64 }

// NewSplitMix64 returns a generator with the given seed.
func NewSplitMix64(seed uint64) *SplitMix64 { return &SplitMix64{state: seed} }

// Next returns the next 64-bit value.
func (s *SplitMix64) Next() uint64 {
	s.state += 0x9E3779B97F4A7C15
	z := s.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// R returns Next() % n (modulo bias accepted by the workload's definition).
func (s *SplitMix64) R(n int) int { return int(s.Next() % uint64(n)) }

// Workload constants.
var T0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	HorizonHours  = 2160 // 90 days
	LongestLease  = 72   // hours
	HostsWanted   = 10   // per request
	seedHosts     = 1
	seedLeases    = 2
	seedRequests  = 3
	kindHost      = 0
	kindLease     = 1
	kindRes       = 2
	kindAlloc     = 3
	kindEvent     = 4
	createdOffset = -24 * time.Hour // books are "created" a day before T0
)

// UID is the workload's id format; string order equals numeric order.
func UID(kind, n int) string { return fmt.Sprintf("00000000-0000-0000-%04d-%012d", kind, n) }

// Book is the inventory and the existing leases.
type Book struct {
	Hosts  []climate.Host
	Leases []climate.Lease
}

// Allocations counts the book's host allocations.
func (b *Book) Allocations() int {
	n := 0
	for _, l := range b.Leases {
		for _, r := range l.Reservations {
			n += len(r.Allocations)
		}
	}
	return n
}

// AllocationsByLease returns the book's host allocations lease by lease, as the book holds
// them.
func (b *Book) AllocationsByLease() []climate.Allocation {
	out := make([]climate.Allocation, 0, b.Allocations())
	for _, l := range b.Leases {
		for _, r := range l.Reservations {
			out = append(out, r.Allocations...)
		}
	}
	return out
}

// AllocationsByHost returns the book's host allocations in the order a store lists them
// to a server building its availability index: by host id, then start, then id
// (sqlcore's AllocationOrder).
func (b *Book) AllocationsByHost() []climate.Allocation {
	hosts := make(map[string][]*climate.Allocation, len(b.Hosts))
	for i := range b.Leases {
		for j := range b.Leases[i].Reservations {
			for k := range b.Leases[i].Reservations[j].Allocations {
				a := &b.Leases[i].Reservations[j].Allocations[k]
				hosts[a.ResourceID] = append(hosts[a.ResourceID], a)
			}
		}
	}
	out := make([]climate.Allocation, 0, b.Allocations())
	for _, id := range slices.Sorted(maps.Keys(hosts)) {
		as := hosts[id]
		slices.SortFunc(as, func(x, y *climate.Allocation) int {
			return cmp.Or(x.Start.Compare(y.Start), cmp.Compare(x.ID, y.ID))
		})
		for _, a := range as {
			out = append(out, *a)
		}
	}
	return out
}

var (
	vcpuChoices   = []int{16, 32, 48, 64}
	memoryChoices = []int{65536, 131072, 262144, 524288}
	diskChoices   = []int{480, 960, 1920}
	nodeTypes     = []string{"compute_skylake", "compute_cascadelake", "compute_icelake", "gpu_v100"}
	suFactors     = []string{"1.0", "1.5", "2.0"}
)

// Hosts builds the h hosts of the workload (stream 1).
func Hosts(h int) []climate.Host {
	rng := NewSplitMix64(seedHosts)
	racks := h / 40
	if racks < 1 {
		racks = 1
	}
	created := T0.Add(createdOffset)
	hosts := make([]climate.Host, h)
	for i := range hosts {
		name := fmt.Sprintf("compute-%05d", i)
		host := climate.Host{
			ID: UID(kindHost, i), HypervisorHostname: name, ServiceName: name,
			CPUInfo: `{"arch": "x86_64"}`, HypervisorType: "QEMU", HypervisorVersion: 6002000,
			AvailabilityZone: "nova", Reservable: true, CreatedAt: created,
		}
		host.VCPUs = vcpuChoices[rng.R(4)]
		host.MemoryMB = memoryChoices[rng.R(4)]
		host.LocalGB = diskChoices[rng.R(3)]
		host.Extra = map[string]string{"node_type": nodeTypes[rng.R(4)]}
		host.Extra["rack"] = fmt.Sprintf("rack-%03d", rng.R(racks))
		gpu := "false"
		if rng.R(4) == 0 {
			gpu = "true"
		}
		host.Extra["gpu"] = gpu
		host.Extra["su_factor"] = suFactors[rng.R(3)]
		hosts[i] = host
	}
	return hosts
}

type span struct{ s, e int }

// Generate builds the book of h hosts and r leases (streams 1 and 2).
func Generate(h, r int) *Book {
	b := &Book{Hosts: Hosts(h), Leases: make([]climate.Lease, 0, r)}
	rng := NewSplitMix64(seedLeases)
	busy := make([][]span, h)
	created := T0.Add(createdOffset)
	alloc, event := 0, 0
	for j := 0; j < r; j++ {
		d := 1 + rng.R(LongestLease)
		s := rng.R(HorizonHours - d + 1)
		e := s + d
		k := 1 + rng.R(4)
		off := rng.R(h)
		var chosen []int
		for t := 0; t < h && len(chosen) < k; t++ {
			hi := (off + t) % h
			if free(busy[hi], s, e) {
				chosen = append(chosen, hi)
			}
		}
		for _, hi := range chosen {
			busy[hi] = append(busy[hi], span{s, e})
		}
		start, end := T0.Add(time.Duration(s)*time.Hour), T0.Add(time.Duration(e)*time.Hour)
		l := climate.Lease{
			ID: UID(kindLease, j), Name: fmt.Sprintf("lease-%d", j), UserID: "bench",
			ProjectID: fmt.Sprintf("proj-%d", j%10), Start: start, End: end,
			Status: climate.LeasePending, CreatedAt: created,
		}
		res := climate.Reservation{
			ID: UID(kindRes, j), LeaseID: l.ID, ResourceType: climate.ResourceTypeHost,
			Status: climate.ReservationPending, Min: k, Max: k, BeforeEnd: "default", CreatedAt: created,
		}
		for _, hi := range chosen {
			res.Allocations = append(res.Allocations, climate.Allocation{
				ID: UID(kindAlloc, alloc), ReservationID: res.ID, LeaseID: l.ID,
				ResourceID: b.Hosts[hi].ID, Start: start, End: end,
			})
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
	return b
}

func free(spans []span, s, e int) bool {
	for _, b := range spans {
		if b.s < e && s < b.e {
			return false
		}
	}
	return true
}

// Window is one request window.
type Window struct{ Start, End time.Time }

// Windows returns the first n request windows (stream 3).
func Windows(n int) []Window {
	rng := NewSplitMix64(seedRequests)
	out := make([]Window, n)
	for t := range out {
		d := 1 + rng.R(LongestLease)
		s := rng.R(HorizonHours - d + 1)
		out[t] = Window{T0.Add(time.Duration(s) * time.Hour), T0.Add(time.Duration(s+d) * time.Hour)}
	}
	return out
}

// Filtered request properties of the workload.
const (
	FilteredHypervisorProperties = `[">=", "$memory_mb", "131072"]`
	FilteredResourceProperties   = `["==", "$node_type", "compute_icelake"]`
)
