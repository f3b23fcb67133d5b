package plan

import (
	"cmp"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"climate"
)

// Index is the planner's in-memory view of availability: every host with its busy
// intervals sorted by start. Because the store never lets two allocations of one host
// overlap, a host's intervals are disjoint and sorted by end as well, so "is this host free
// over [s, e)?" is one binary search. The index is immutable for readers except through
// Apply, which the caller serializes against reads (the manager holds a RWMutex).
//
// With a cleaning time (WithCleaning; Blazar's cleaning_time), every hold keeps its host
// for that long after it ends: the index stores each interval's end moved on by the
// cleaning time, and pads every request's end the same way, so a request [s, e) conflicts
// with a hold [a, b) exactly when s < b+cleaning and a < e+cleaning. Moving every end by
// the same amount keeps ends sorted, even where old holds that were back to back now
// overlap.
type Index struct {
	// Revisions of the store the index reflects (see climate.Tx).
	InventoryRevision, AllocationRevision int64

	clean  int64 // cleaning time, microseconds
	hosts  []climate.Host
	pos    map[string]int32 // host id → position
	busy   [][]interval     // per host, sorted by start
	shared [][]use          // per host, its instance slots' holds (shared.go)
	leases map[string]int32 // lease id → small integer used in intervals
	nextID int32
	// leaseIDs[n] is the lease numbered n (Holds names the leases it returns).
	leaseIDs []string

	mu      sync.Mutex // guards filters, matches and demand
	filters map[string][]int32
	// matches are the property filters requests used, by key, and demand how many of
	// them each host matches (sparing.go); noSparing turns that off.
	matches   map[string]func(*climate.Host) bool
	demand    []int32
	noSparing bool
	// free holds the free-time summaries earliest-slot searches use, by filter key
	// (freetime.go), which a placement short of hosts also asks (scarce.go).
	free map[string]*freeTime
	// soft counts the preemptible holds, whole and slots: while there are none, no
	// request can take a host back, and the summaries' free hosts are exactly those a
	// placement would find.
	soft int
	// unreservableHosts counts the hosts marked not reservable (for explanations).
	unreservableHosts int
	// hours marks the hosts busy over whole hours, which placements skip (busyhours.go).
	hours busyHours
}

type interval struct {
	start, end int64 // microseconds since the epoch
	lease      int32
	// soft marks a preemptible lease's hold: a request that starts at or after its
	// ReclaimFrom may take the host back (see bookings).
	soft bool
}

// Best fit weighs at most fitScan free hosts per host wanted, and at least minFitScan.
const (
	fitScan    = 8
	minFitScan = 64
)

// maxCachedFilters bounds the filter cache; it is simply reset when full.
const maxCachedFilters = 256

// Option configures an Index.
type Option func(*Index)

// WithCleaning keeps every resource of the index free for d after each of its holds
// (Blazar's [physical:host] cleaning_time): see Index.
func WithCleaning(d time.Duration) Option {
	return func(x *Index) { x.clean = max(d.Microseconds(), 0) }
}

// Cleaning returns the index's cleaning time.
func (x *Index) Cleaning() time.Duration { return time.Duration(x.clean) * time.Microsecond }

// NewIndex builds an index from the inventory and the allocations that may still matter.
// It is a bulk build, which a fresh server's first request waits for: the allocations'
// hosts are resolved in parallel; every host's intervals get one slice of a shared backing
// array (capped, so Apply's inserts reallocate rather than spill into the next host's);
// and while one goroutine numbers the leases (one map), the intervals, holding their
// allocation's position meanwhile, are sorted per host in parallel (only when out of
// order).
func NewIndex(hosts []climate.Host, allocs []climate.Allocation, opts ...Option) *Index {
	x := &Index{
		hosts: hosts, pos: make(map[string]int32, len(hosts)), busy: make([][]interval, len(hosts)),
		shared: make([][]use, len(hosts)), filters: map[string][]int32{}, matches: map[string]func(*climate.Host) bool{},
	}
	for _, o := range opts {
		o(x)
	}
	for i := range hosts {
		x.pos[hosts[i].ID] = int32(i)
		if !hosts[i].Reservable {
			x.unreservableHosts++
		}
	}
	where := make([]int32, len(allocs)) // host position, or -1 for another resource's
	inParallel(len(allocs), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if p, ok := x.pos[allocs[i].ResourceID]; ok {
				where[i] = p
			} else {
				where[i] = -1
			}
		}
	})
	counts := make([]int32, len(hosts))
	ours, whole := 0, 0
	for i, p := range where {
		if p >= 0 {
			ours++
			if allocs[i].Preemptible {
				x.soft++
			}
			if !allocs[i].Shared() {
				counts[p]++
				whole++
			}
		}
	}
	x.leases = make(map[string]int32, ours/2) // a guess that spares most rehashing
	x.leaseIDs = make([]string, 1, ours/2+1)
	nums := make([]int32, len(allocs))
	var numbered sync.WaitGroup
	numbered.Go(func() {
		last, n := "", int32(0) // a lease's allocations mostly come together
		for i, p := range where {
			if id := allocs[i].LeaseID; p >= 0 && (id != last || n == 0) {
				last, n = id, x.leaseNum(id)
			}
			nums[i] = n
		}
	})
	backing := make([]interval, whole)
	off := 0
	for p, n := range counts {
		x.busy[p] = backing[off : off : off+int(n)]
		off += int(n)
	}
	for i, p := range where {
		if p < 0 {
			continue
		}
		a := &allocs[i]
		if a.Shared() {
			x.shared[p] = append(x.shared[p], use{start: a.Start.UnixMicro(), end: x.end(a.End), lease: int32(i), size: a.Size.Times(a.Slots), soft: a.Preemptible})
		} else {
			x.busy[p] = append(x.busy[p], interval{a.Start.UnixMicro(), x.end(a.End), int32(i), a.Preemptible})
		}
	}
	byStart := func(a, b interval) int { return cmp.Compare(a.start, b.start) }
	inParallel(len(hosts), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			if b := x.busy[p]; !slices.IsSortedFunc(b, byStart) {
				slices.SortFunc(b, byStart)
			}
			if b := x.shared[p]; len(b) > 0 {
				slices.SortFunc(b, func(a, b use) int { return cmp.Compare(a.start, b.start) })
				fixMaxEnd(b, 0)
			}
		}
	})
	numbered.Wait()
	inParallel(len(hosts), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			for k := range x.busy[p] {
				x.busy[p][k].lease = nums[x.busy[p][k].lease]
			}
			for k := range x.shared[p] {
				x.shared[p][k].lease = nums[x.shared[p][k].lease]
			}
		}
	})
	return x
}

// inParallel runs f over [0, n) in about GOMAXPROCS parts: a build's passes over every
// allocation or host, which a fresh server's first request waits for.
func inParallel(n int, f func(lo, hi int)) {
	parts := max(min(runtime.GOMAXPROCS(0), n/(1<<14)), 1)
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() { f(n*k/parts, n*(k+1)/parts) })
	}
	wg.Wait()
}

// end is how the index stores a hold's or a request's end: moved on by the cleaning time.
func (x *Index) end(t time.Time) int64 { return t.UnixMicro() + x.clean }

// window returns a request's window as the index compares it: its end padded.
func (x *Index) window(w Window) (s, e int64) { return w.Start.UnixMicro(), x.end(w.End) }

func (x *Index) leaseNum(id string) int32 {
	n, ok := x.leases[id]
	if !ok {
		x.nextID++
		n = x.nextID
		x.leases[id] = n
		x.leaseIDs = append(x.leaseIDs, id)
	}
	return n
}

// Allocations returns how many intervals the index holds.
func (x *Index) Allocations() int {
	n := 0
	for p, b := range x.busy {
		n += len(b) + len(x.shared[p])
	}
	return n
}

// Holds returns what the index holds on the resources ids over [from, to), leaving lease
// skip's out: the allocations a store's ListAllocations returns for the same filter, as
// of the index's AllocationRevision, with only what plan.Fits and a reclaim read (no id
// or reservation; slots of a shared resource as one slot of their whole size).
func (x *Index) Holds(ids []string, from, to time.Time, skip string) []climate.Allocation {
	s, e := from.UnixMicro(), to.UnixMicro()
	var out []climate.Allocation
	hold := func(id string, start, end int64, lease int32, soft bool, size climate.Size, slots int) {
		end -= x.clean // stored moved on by the cleaning time
		if end > s && start < e && x.leaseIDs[lease] != skip {
			out = append(out, climate.Allocation{LeaseID: x.leaseIDs[lease], ResourceID: id,
				Start: time.UnixMicro(start).UTC(), End: time.UnixMicro(end).UTC(), Slots: slots, Size: size, Preemptible: soft})
		}
	}
	for _, id := range ids {
		p, ok := x.pos[id]
		if !ok {
			continue
		}
		for _, iv := range x.busy[p] {
			hold(id, iv.start, iv.end, iv.lease, iv.soft, climate.Size{}, 0)
		}
		for _, u := range x.shared[p] {
			hold(id, u.start, u.end, u.lease, u.soft, u.size, 1)
		}
	}
	return out
}

// Apply updates the index with a committed change: remove are allocations that no longer
// exist (or changed), add are the new ones. Callers must exclude concurrent readers.
func (x *Index) Apply(remove, add []climate.Allocation) {
	var touched []int32
	for _, list := range [][]climate.Allocation{remove, add} {
		for i := range list {
			if p, ok := x.pos[list[i].ResourceID]; ok {
				touched = append(touched, p)
			}
		}
	}
	defer x.updateFreeTimes(x.freeGaps(touched))
	for _, a := range remove {
		p, ok := x.pos[a.ResourceID]
		if !ok {
			continue
		}
		if a.Shared() {
			if x.removeUse(p, a) && a.Preemptible {
				x.soft--
			}
			continue
		}
		lease, s := x.leases[a.LeaseID], a.Start.UnixMicro()
		b := x.busy[p]
		i := sort.Search(len(b), func(i int) bool { return b[i].start >= s })
		for ; i < len(b) && b[i].start == s; i++ {
			if b[i].lease == lease && b[i].end == x.end(a.End) {
				if b[i].soft {
					x.soft--
				}
				gone := b[i]
				x.busy[p] = append(b[:i], b[i+1:]...)
				x.refreshHours(p, gone, false)
				break
			}
		}
	}
	for _, a := range add {
		p, ok := x.pos[a.ResourceID]
		if !ok {
			continue
		}
		if a.Preemptible {
			x.soft++
		}
		if a.Shared() {
			x.addUse(p, a)
			continue
		}
		iv := interval{a.Start.UnixMicro(), x.end(a.End), x.leaseNum(a.LeaseID), a.Preemptible}
		b := x.busy[p]
		i := sort.Search(len(b), func(i int) bool { return b[i].start >= iv.start })
		b = append(b, interval{})
		copy(b[i+1:], b[i:])
		b[i] = iv
		x.busy[p] = b
		x.refreshHours(p, iv, true)
	}
}

// neighbours returns, for host p and window [s, e), whether it is free to be given whole
// (ignoring lease skip's holds: no booking and no slots held in the window) and the free
// time around the window: from the previous booking's end to the next one's start
// (math.MinInt64/MaxInt64 when none). reclaims says a preemptible hold in the window
// would be taken back (only when s >= reclaim; see bookings).
func (x *Index) neighbours(p int32, s, e int64, skip int32, reclaim int64) (free, reclaims bool, prevEnd, nextStart int64) {
	free, reclaims, prevEnd, nextStart = x.bookings(p, s, e, skip, reclaim)
	if !free || x.sharedBusy(p, s, e, skip, reclaim) {
		return false, false, 0, 0
	}
	return true, reclaims, prevEnd, nextStart
}

// bookings is neighbours for whole-host bookings only (slots aside). A preemptible hold
// [a, b) does not count when the request starts at or after reclaim (a notice ahead of
// now: noReclaim for never) and the hold starts before the request's start less the
// cleaning time, so it can be cut to end then and keep what it has run.
func (x *Index) bookings(p int32, s, e int64, skip int32, reclaim int64) (free, reclaims bool, prevEnd, nextStart int64) {
	b := x.busy[p]
	prevEnd, nextStart = minTime, maxTime
	i := endsAfter(b, s)
	for j := i - 1; j >= 0; j-- {
		if b[j].lease != skip {
			prevEnd = b[j].end
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i].lease == skip {
			continue
		}
		if b[i].start < e {
			if x.reclaimable(b[i].soft, b[i].start, s, reclaim) {
				reclaims = true
				continue
			}
			return false, false, 0, 0
		}
		nextStart = b[i].start
		break
	}
	return true, reclaims, prevEnd, nextStart
}

// endsAfter returns the index of the first interval of b (sorted, disjoint, so sorted by
// end too) that ends after t, len(b) when none does. A loop rather than sort.Search: a
// placement runs it for every host it scans (425 a request on average in bench api's
// 16-client run at H=1,000), and the closure's call per step cost 7% of
// BenchmarkPlaceHosts.
func endsAfter(b []interval, t int64) int {
	lo, hi := 0, len(b)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if b[m].end > t {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// noReclaim is the reclaim horizon of a request that never takes a preemptible hold.
const noReclaim = maxTime

const (
	minTime = -1 << 62
	maxTime = 1 << 62
	// openGap is how a missing neighbour counts in best fit: a host free "forever" on a
	// side scores as if a year were free there.
	openGap = int64(365 * 24 * time.Hour / time.Microsecond)
	// reclaimCost is added to the fit of a host that a preemptible lease must give back:
	// more than any free host's fit (at most two open gaps).
	reclaimCost = 4 * openGap
)

// candidates returns the positions of reservable hosts matching the request's filter,
// evaluating the filter once per host per inventory revision and caching by FilterKey.
func (x *Index) candidates(r *HostRequest) []int32 {
	key := r.filterKey()
	if r.cached() { // a filter without a key must not find the unfiltered hosts under ""
		x.mu.Lock()
		c, ok := x.filters[key]
		x.mu.Unlock()
		if ok {
			return c
		}
	}
	c := make([]int32, 0, len(x.hosts))
	for i := range x.hosts {
		h := &x.hosts[i]
		if h.Reservable && (r.Match == nil || r.Match(h)) {
			c = append(c, int32(i))
		}
	}
	if r.cached() {
		x.mu.Lock()
		if len(x.filters) >= maxCachedFilters {
			x.filters = map[string][]int32{}
		}
		x.filters[key] = c
		x.remember(key, r.Match)
		x.mu.Unlock()
	}
	return c
}

// filterKey is the key r's candidates are cached under: none for no filter.
func (r *HostRequest) filterKey() string {
	if r.Match == nil {
		return ""
	}
	return r.FilterKey
}

// cached reports whether r's candidates are cached: a filter without a key is not.
func (r *HostRequest) cached() bool { return r.Match == nil || r.FilterKey != "" }

// unreservable counts hosts marked not reservable (for explanations only).
func (x *Index) unreservable() int { return x.unreservableHosts }

// choice is a free candidate and how well it fits.
type choice struct {
	pos    int32
	demand int32 // how many filters of other requests it matches (sparing.go); fewer first
	fit    int64 // free time left around the window; smaller is tighter
}

// better reports whether c goes before o: less demanded, then tighter.
func (c choice) better(o choice) bool {
	if c.demand != o.demand {
		return c.demand < o.demand
	}
	return c.fit < o.fit
}

// PlaceHosts chooses between r.Min and r.Max hosts free over r.Window.
//
// Policy, best fit: preferred hosts first (a reservation keeps its hosts on update); then
// the hosts other requests' filters ask for least (sparing.go: an unfiltered request does
// not take the GPU host while a plain one is free); among those, the hosts where the
// window fits most tightly between existing bookings, i.e. the least free time left
// around it, ties broken by registration order. This packs leases into gaps
// and keeps long free blocks (and untouched hosts) for long or large requests, where
// Blazar's "never used first" spreads short leases over every host. The scan stops early
// once Max hosts that fit exactly (no time left on either side) are found, or once it has
// weighed fitScan × the hosts still wanted (at least minFitScan) free hosts: the best fit
// among those, so a request's cost does not grow with the size of the inventory.
func (x *Index) PlaceHosts(r HostRequest) ([]string, Explanation, error) {
	s, e, skip, reclaim := x.terms(&r)
	ex := Explanation{Requested: r.Min, Registered: len(x.hosts), Cleaning: x.Cleaning()}
	if r.Min > len(x.hosts) {
		// Answered before any work: a client's number must not size the search.
		return nil, ex, climate.Errorf(climate.CodeConflict, "Not enough hosts available: %d requested, only %d registered.", r.Min, len(x.hosts))
	}
	r.Max = min(r.Max, len(x.hosts)) // no more can be chosen; bounds what is allocated below
	cands := x.candidates(&r)

	chosen := make([]string, 0, r.Max)
	taken := len(r.Prefer) > 0
	for _, id := range r.Prefer {
		p, ok := x.pos[id]
		if !ok || len(chosen) == r.Max || r.Exclude[id] || !x.hosts[p].Reservable || (r.Match != nil && !r.Match(&x.hosts[p])) {
			continue
		}
		if free, _, _, _ := x.neighbours(p, s, e, skip, reclaim); free {
			chosen = append(chosen, id)
		}
	}
	isChosen := func(id string) bool {
		for _, c := range chosen {
			if c == id {
				return true
			}
		}
		return false
	}

	want := r.Max - len(chosen)
	demand := x.demandOf()
	best := make([]choice, 0, want) // kept sorted by (demand, fit, pos), at most want long
	exact, scanned, weighed := 0, 0, 0
	enough := max(fitScan*want, minFitScan)
	var proved hourMask // empty unless a new lease, for which every hold counts
	read := 0           // busy hosts whose holds were read
	if skip < 0 {
		x.busyHours(&proved, s, e)
		defer func() { x.scanned(&proved, read) }()
	}
	off := 0
	if len(cands) > 0 {
		off = r.Rotate % len(cands)
		if off < 0 {
			off += len(cands)
		}
	}
	for k := range cands {
		if want == 0 || exact >= want || weighed >= enough {
			break
		}
		if scanned == scarceAfter && len(chosen)+len(best) < r.Min {
			if refused, ok := x.refusal(&r, cands, s, e, skip, reclaim, ex); ok {
				return nil, refused, notEnough(refused)
			}
		}
		p := cands[(k+off)%len(cands)]
		scanned++
		if len(r.Exclude) > 0 || taken { // a host's id is a cache miss of its own
			id := x.hosts[p].ID
			if r.Exclude[id] {
				ex.Excluded++
				continue
			}
			if taken && isChosen(id) {
				ex.Free++
				continue
			}
		}
		if proved.busy(p) {
			ex.Busy++
			continue
		}
		free, reclaims, prevEnd, nextStart := x.neighbours(p, s, e, skip, reclaim)
		if !free {
			ex.Busy++
			read++
			continue
		}
		ex.Free++
		weighed++
		c := choice{pos: p, fit: gap(prevEnd, s) + gap(e, nextStart)}
		if reclaims {
			c.fit += reclaimCost // any host that is simply free goes first
		}
		if demand != nil {
			c.demand = demand[p]
		}
		if c.fit == 0 && c.demand == 0 {
			exact++
		}
		if len(best) == want && !c.better(best[want-1]) {
			continue
		}
		i := sort.Search(len(best), func(i int) bool { return c.better(best[i]) })
		if len(best) < want {
			best = append(best, choice{})
		}
		copy(best[i+1:], best[i:len(best)-1])
		best[i] = c
	}
	for _, c := range best {
		chosen = append(chosen, x.hosts[c.pos].ID)
	}
	if len(chosen) < r.Min {
		ex.Unreservable = x.unreservable()
		ex.FilteredOut = len(x.hosts) - ex.Unreservable - len(cands)
		ex.Free = len(chosen) // the scan was complete: every free host is chosen
		return nil, ex, notEnough(ex)
	}
	if scanned == len(cands) {
		ex.Unreservable = x.unreservable()
		ex.FilteredOut = len(x.hosts) - ex.Unreservable - len(cands)
	}
	return chosen, ex, nil
}

// terms returns r as a placement compares it: its window, the lease whose holds it
// ignores (-1 for none) and from when it may take hosts back.
func (x *Index) terms(r *HostRequest) (s, e int64, skip int32, reclaim int64) {
	s, e = x.window(r.Window)
	skip = -1
	if n, ok := x.leases[r.Lease]; ok && r.Lease != "" {
		skip = n
	}
	reclaim = noReclaim
	if !r.ReclaimFrom.IsZero() {
		reclaim = r.ReclaimFrom.UnixMicro()
	}
	return s, e, skip, reclaim
}

// notEnough is a placement's refusal.
func notEnough(ex Explanation) error {
	return climate.Errorf(climate.CodeConflict, "Not enough hosts available: %s.", ex)
}

func gap(from, to int64) int64 {
	if from == minTime || to == maxTime {
		return openGap
	}
	return to - from
}
