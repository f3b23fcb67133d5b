package plan

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"climate"
)

// use is one shared allocation's hold on a host: size (its slots × the slot size) over
// [start, end). A host's uses may overlap one another, so they are sorted by start and
// carry the running maximum of their ends, which answers "does any use overlap [s, e)?"
// with one binary search.
type use struct {
	start, end int64
	lease      int32
	size       climate.Size
	maxEnd     int64 // the latest end among this use and those before it
	soft       bool  // a preemptible lease's (see Index.bookings)
}

func (x *Index) addUse(p int32, a climate.Allocation) {
	u := use{start: a.Start.UnixMicro(), end: x.end(a.End), lease: x.leaseNum(a.LeaseID), size: a.Size.Times(a.Slots), soft: a.Preemptible}
	b := x.shared[p]
	i := sort.Search(len(b), func(i int) bool { return b[i].start > u.start })
	x.shared[p] = slices.Insert(b, i, u)
	fixMaxEnd(x.shared[p], i)
}

// removeUse removes a's slots from host p and reports whether they were there.
func (x *Index) removeUse(p int32, a climate.Allocation) bool {
	lease, ok := x.leases[a.LeaseID]
	if !ok {
		return false
	}
	s, e, size := a.Start.UnixMicro(), x.end(a.End), a.Size.Times(a.Slots)
	b := x.shared[p]
	for i := sort.Search(len(b), func(i int) bool { return b[i].start >= s }); i < len(b) && b[i].start == s; i++ {
		if b[i].lease == lease && b[i].end == e && b[i].size == size {
			x.shared[p] = slices.Delete(b, i, i+1)
			fixMaxEnd(x.shared[p], i)
			return true
		}
	}
	return false
}

// fixMaxEnd recomputes the running maximum of ends from position i on.
func fixMaxEnd(b []use, i int) {
	m := int64(minTime)
	if i > 0 {
		m = b[i-1].maxEnd
	}
	for ; i < len(b); i++ {
		m = max(m, b[i].end)
		b[i].maxEnd = m
	}
}

// overlapping calls f for each use of host p overlapping [s, e), except lease skip's and
// the preemptible ones a request starting at s may take back (as in bookings).
func (x *Index) overlapping(p int32, s, e int64, skip int32, reclaim int64, f func(*use)) {
	b := x.shared[p]
	// Uses starting before e are b[:k]; walk back while some of them may still end after s.
	k := sort.Search(len(b), func(i int) bool { return b[i].start >= e })
	for i := k - 1; i >= 0 && b[i].maxEnd > s; i-- {
		if b[i].end > s && b[i].lease != skip && !x.reclaimable(b[i].soft, b[i].start, s, reclaim) {
			f(&b[i])
		}
	}
}

// reclaimable reports whether a hold starting at start, preemptible if soft, can be cut
// for a request starting at s with reclaim horizon reclaim: it is preemptible, the request
// starts at or after the horizon, and the hold started before s less the cleaning time,
// so it keeps what it ran.
func (x *Index) reclaimable(soft bool, start, s, reclaim int64) bool {
	return soft && s >= reclaim && start < s-x.clean
}

// sharedBusy reports whether any slots are held on host p during [s, e) (lease skip's
// and reclaimable ones aside): such a host cannot be given whole.
func (x *Index) sharedBusy(p int32, s, e int64, skip int32, reclaim int64) bool {
	busy := false
	x.overlapping(p, s, e, skip, reclaim, func(*use) { busy = true })
	return busy
}

// loadStep is a change of a host's load at an instant: a hold starting (+) or ending (−).
type loadStep struct {
	at    int64
	delta climate.Size
}

// sortSteps orders steps by instant, ends before starts at one instant (windows are
// half-open, so a hold ending when another starts never overlaps it).
func sortSteps(steps []loadStep) {
	slices.SortFunc(steps, func(a, b loadStep) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return cmp.Compare(a.delta.VCPUs, b.delta.VCPUs)
	})
}

// freeSlots returns how many more slots of size fit on host p at every instant of
// [s, e), on top of its uses there (lease skip's aside) and extra (held over the whole
// window by the request's own lease), and whether any use overlaps the window. scratch is
// a buffer the caller reuses across hosts.
func (x *Index) freeSlots(p int32, s, e int64, skip int32, reclaim int64, size, extra climate.Size, scratch *[]loadStep) (free int, used bool) {
	capacity := x.hosts[p].Capacity()
	steps := (*scratch)[:0]
	x.overlapping(p, s, e, skip, reclaim, func(u *use) {
		steps = append(steps, loadStep{max(u.start, s), u.size}, loadStep{min(u.end, e), u.size.Times(-1)})
	})
	*scratch = steps
	used = len(steps) > 0 || extra != (climate.Size{})
	load := extra
	free = fits(capacity, load, size)
	if len(steps) == 0 {
		return free, used
	}
	sortSteps(steps)
	for i, st := range steps {
		load = load.Plus(st.delta)
		if i+1 < len(steps) && steps[i+1].at == st.at {
			continue // the load between instants is what must fit
		}
		if st.at < e {
			free = min(free, fits(capacity, load, size))
		}
	}
	return max(free, 0), used
}

// fits returns how many slots of size fit in capacity above load (negative when the
// load alone exceeds it). Dimensions the size does not use do not limit it.
func fits(capacity, load, size climate.Size) int {
	n := int(^uint(0) >> 1)
	for _, d := range [][3]int{
		{capacity.VCPUs, load.VCPUs, size.VCPUs},
		{capacity.MemoryMB, load.MemoryMB, size.MemoryMB},
		{capacity.DiskGB, load.DiskGB, size.DiskGB},
	} {
		if d[2] > 0 {
			left := d[0] - d[1]
			if left < 0 {
				return -1
			}
			n = min(n, left/d[2])
		}
	}
	return n
}

// wholeBusy returns host p's intervals during which it is not free to be given whole:
// its whole-host bookings and, merged in, the spans its slots are held. It is the busy
// list itself for a host without slots.
func (x *Index) wholeBusy(p int32) []interval {
	if len(x.shared[p]) == 0 {
		return x.busy[p]
	}
	all := slices.Clone(x.busy[p])
	for _, u := range x.shared[p] {
		all = append(all, interval{start: u.start, end: u.end, lease: u.lease})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].start < all[j].start })
	merged := all[:1]
	for _, iv := range all[1:] {
		last := &merged[len(merged)-1]
		if iv.start <= last.end {
			last.end = max(last.end, iv.end)
			continue
		}
		merged = append(merged, iv)
	}
	return merged
}

// SlotsRequest asks for Amount instance slots of Size over Window.
type SlotsRequest struct {
	Window Window
	Amount int
	Size   climate.Size
	// Affinity true puts every slot on one host, false each on a distinct host, nil
	// anywhere.
	Affinity *bool
	// Match and FilterKey filter hosts as in HostRequest.
	Match     func(*climate.Host) bool
	FilterKey string
	// Prefer holds the slots the reservation had per host (on update): kept first.
	Prefer map[string]int
	// Exclude lists hosts the lease holds whole; Extra the slots its earlier reservations
	// were given, per host (held over the same window).
	Exclude map[string]bool
	Extra   map[string]climate.Size
	// Lease, Rotate and ReclaimFrom are as in HostRequest.
	Lease       string
	Rotate      int
	ReclaimFrom time.Time
}

// HostSlots is a number of slots on one host.
type HostSlots struct {
	HostID string
	Slots  int
}

// slotHost is a host with room for slots, as weighed by PlaceSlots.
type slotHost struct {
	pos  int32
	free int
	used bool // holds slots in the window already
}

// PlaceSlots chooses hosts for r.Amount slots of r.Size, free at every instant of
// r.Window on top of the slots already held there.
//
// Policy, packing: the hosts the reservation had first (it keeps its slots on update),
// then hosts already partly used in the window, fullest first, then unused hosts; so
// empty hosts stay whole for host reservations and large slots. The scan weighs at most
// fitScan × the slots wanted (at least minFitScan) hosts with room once the request can
// be met, so a request's cost does not grow with the inventory; a refusal has weighed
// every matching host.
func (x *Index) PlaceSlots(r SlotsRequest) ([]HostSlots, error) {
	s, e := x.window(r.Window)
	skip := int32(-1)
	if n, ok := x.leases[r.Lease]; ok && r.Lease != "" {
		skip = n
	}
	if r.Amount <= 0 {
		return nil, nil
	}
	reclaim := int64(noReclaim)
	if !r.ReclaimFrom.IsZero() {
		reclaim = r.ReclaimFrom.UnixMicro()
	}
	// With affinity every slot goes on one host: one too small for them all is out
	// before any sweep (most hosts, for a large request).
	need := r.Size
	if r.Affinity != nil && *r.Affinity {
		need = r.Size.Times(r.Amount)
	}
	var scratch []loadStep
	weigh := func(p int32) (slotHost, bool) {
		h := &x.hosts[p]
		if !h.Reservable || r.Exclude[h.ID] || !need.Within(h.Capacity()) {
			return slotHost{}, false
		}
		if free, _, _, _ := x.bookings(p, s, e, skip, reclaim); !free {
			return slotHost{}, false
		}
		free, used := x.freeSlots(p, s, e, skip, reclaim, r.Size, r.Extra[h.ID], &scratch)
		return slotHost{p, free, used}, free > 0
	}

	var preferred []slotHost
	for _, id := range sortedKeys(r.Prefer) {
		if p, ok := x.pos[id]; ok && (r.Match == nil || r.Match(&x.hosts[p])) {
			if sh, ok := weigh(p); ok {
				preferred = append(preferred, sh)
			}
		}
	}
	cands := x.candidates(&HostRequest{Match: r.Match, FilterKey: r.FilterKey})
	enough := max(fitScan*min(r.Amount, len(cands)), minFitScan)
	var found []slotHost
	room, hosts, largest := 0, 0, 0
	for _, sh := range preferred {
		room, hosts, largest = room+sh.free, hosts+1, max(largest, sh.free)
	}
	met := func() bool {
		switch {
		case r.Affinity == nil:
			return room >= r.Amount
		case *r.Affinity:
			return largest >= r.Amount
		default:
			return hosts >= r.Amount
		}
	}
	off := 0
	if len(cands) > 0 {
		off = ((r.Rotate % len(cands)) + len(cands)) % len(cands)
	}
	for k := range cands {
		if len(found) >= enough && met() {
			break
		}
		p := cands[(k+off)%len(cands)]
		if _, ok := r.Prefer[x.hosts[p].ID]; ok {
			continue
		}
		if sh, ok := weigh(p); ok {
			found = append(found, sh)
			room, hosts, largest = room+sh.free, hosts+1, max(largest, sh.free)
		}
	}
	if !met() {
		return nil, climate.Errorf(climate.CodeConflict, "Not enough hosts available: %s", x.slotShortage(r, room, hosts, largest, len(cands)))
	}
	// Partly used hosts, fullest (least room) first, then the rest in scan order.
	sort.SliceStable(found, func(i, j int) bool {
		a, b := found[i], found[j]
		if a.used != b.used {
			return a.used
		}
		return a.used && a.free < b.free
	})
	order := append(preferred, found...)
	var out []HostSlots
	switch {
	case r.Affinity != nil && *r.Affinity:
		for _, sh := range order {
			if sh.free >= r.Amount {
				return []HostSlots{{x.hosts[sh.pos].ID, r.Amount}}, nil
			}
		}
	case r.Affinity != nil:
		for _, sh := range order[:r.Amount] {
			out = append(out, HostSlots{x.hosts[sh.pos].ID, 1})
		}
	default:
		left := r.Amount
		for _, sh := range order {
			if left == 0 {
				break
			}
			n := min(sh.free, left)
			out = append(out, HostSlots{x.hosts[sh.pos].ID, n})
			left -= n
		}
	}
	return out, nil
}

// slotShortage explains a refused slot request with the counts it was refused on.
func (x *Index) slotShortage(r SlotsRequest, room, hosts, largest, matching int) string {
	size := r.Size
	what := fmt.Sprintf("%d slots of %d vCPUs, %d MB memory and %d GB disk requested", r.Amount, size.VCPUs, size.MemoryMB, size.DiskGB)
	switch {
	case r.Affinity == nil:
		return fmt.Sprintf("%s, %d fit in the window on the %d matching hosts", what, room, matching)
	case *r.Affinity:
		return fmt.Sprintf("%s on one host (affinity), at most %d fit on one of the %d matching hosts in the window", what, largest, matching)
	default:
		return fmt.Sprintf("%s on distinct hosts (anti-affinity), %d of the %d matching hosts have room in the window", what, hosts, matching)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Host returns the registered host with id, or nil.
func (x *Index) Host(id string) *climate.Host {
	if p, ok := x.pos[id]; ok {
		return &x.hosts[p]
	}
	return nil
}

// Fits reports whether the allocations mine (one lease's, over its window) can join
// others (the allocations of other leases on the same resources, as the store has them
// when committing): a resource held whole by one is in no other overlapping allocation,
// and on each host the slots of both fit its capacity (capacity[host]) at every instant
// of mine. With a cleaning time every allocation, mine and the others, holds its resource
// that much longer (as in Index): whole holds must be cleaning apart, and slots count on
// their host until cleaning after their end. Give the cleaning time for hosts only; the
// caller checks other resources (floating IPs) in a call of their own.
func Fits(mine, others []climate.Allocation, capacity map[string]climate.Size, cleaning time.Duration) bool {
	if cleaning > 0 {
		mine, others = padded(mine, cleaning), padded(others, cleaning)
	}
	byResource := map[string][]climate.Allocation{}
	for _, a := range others {
		byResource[a.ResourceID] = append(byResource[a.ResourceID], a)
	}
	checked := map[string]bool{}
	for _, a := range mine {
		var load []climate.Allocation // on a's host during a's window
		for _, o := range byResource[a.ResourceID] {
			if !climate.Overlaps(a.Start, a.End, o.Start, o.End) {
				continue
			}
			if !a.Shared() || !o.Shared() {
				return false
			}
			o.Start, o.End = climate.Later(o.Start, a.Start), climate.Earlier(o.End, a.End)
			load = append(load, o)
		}
		if len(load) == 0 || checked[a.ResourceID] {
			continue
		}
		checked[a.ResourceID] = true
		for _, m := range mine { // all of mine on this host load it together
			if m.ResourceID == a.ResourceID {
				load = append(load, m)
			}
		}
		if !Peak(load).Within(capacity[a.ResourceID]) {
			return false
		}
	}
	return true
}

// padded returns copies of allocs each ending d later.
func padded(allocs []climate.Allocation, d time.Duration) []climate.Allocation {
	out := make([]climate.Allocation, len(allocs))
	for i, a := range allocs {
		a.End = a.End.Add(d)
		out[i] = a
	}
	return out
}

// Ends returns the distinct ends of every hold on the index's resources (whole or slots),
// each moved on by the cleaning time, in (after, last], in order: the instants at which
// something becomes free, so the only starts after `after` at which a request that did not
// fit before may fit.
func (x *Index) Ends(after, last time.Time) []time.Time {
	a, l := after.UnixMicro(), last.UnixMicro()
	var ends []int64
	for p := range x.busy {
		for _, iv := range x.busy[p] {
			if iv.end > a && iv.end <= l {
				ends = append(ends, iv.end)
			}
		}
		for _, u := range x.shared[p] {
			if u.end > a && u.end <= l {
				ends = append(ends, u.end)
			}
		}
	}
	slices.Sort(ends)
	ends = slices.Compact(ends)
	out := make([]time.Time, len(ends))
	for i, e := range ends {
		out[i] = time.UnixMicro(e).UTC()
	}
	return out
}

// Peak returns, per dimension, the most the slot allocations among allocs (of one host)
// hold at any one instant. Slots fit a capacity at every instant exactly when Peak is
// within it: an instant over capacity is over on some dimension.
func Peak(allocs []climate.Allocation) climate.Size {
	var steps []loadStep
	for _, a := range allocs {
		if a.Shared() {
			load := a.Size.Times(a.Slots)
			steps = append(steps, loadStep{a.Start.UnixMicro(), load}, loadStep{a.End.UnixMicro(), load.Times(-1)})
		}
	}
	sortSteps(steps)
	var load, peak climate.Size
	for _, st := range steps {
		load = load.Plus(st.delta)
		peak = climate.Size{VCPUs: max(peak.VCPUs, load.VCPUs), MemoryMB: max(peak.MemoryMB, load.MemoryMB), DiskGB: max(peak.DiskGB, load.DiskGB)}
	}
	return peak
}
