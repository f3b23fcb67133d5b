package plan

import (
	"container/heap"
	"sort"
	"time"

	"climate"
)

// FreeHosts returns the ids of reservable hosts matching r's filter that are free over
// r.Window (ignoring r.Lease's own allocations), in registration order.
func (x *Index) FreeHosts(r HostRequest) []string {
	s, e, skip, _ := x.terms(&r)
	var out []string
	for _, p := range x.candidates(&r) {
		if free, _, _, _ := x.neighbours(p, s, e, skip, noReclaim); free {
			out = append(out, x.hosts[p].ID)
		}
	}
	return out
}

// SlotRequest asks for the earliest windows of length Duration, starting at or after
// After and ending by Deadline, in which Count matching hosts are free.
type SlotRequest struct {
	Count     int
	Duration  time.Duration
	After     time.Time
	Deadline  time.Time
	Match     func(*climate.Host) bool
	FilterKey string
	// Limit is how many candidate windows to return (the earliest first).
	Limit int
}

// Slot is a window in which enough hosts are free.
type Slot struct {
	Start, End time.Time
	Free       int // matching hosts free over the whole window
}

// EarliestSlots returns up to r.Limit windows, earliest first, in which at least r.Count
// matching hosts are free for r.Duration. Candidate starts are r.After and the ends of
// existing bookings; each host contributes the starts from which it stays free for the
// duration, and a sweep over those intervals stops at the first starts where enough hosts
// overlap. With a cleaning time a host must stay free for it after the window too
// (bookings' ends are already padded), though the window itself, not its cleaning, must
// end by the deadline. A cached filter's search visits those events on the filter's
// free-time summary (freetime.go) instead of every host, for its first maxJumps events.
func (x *Index) EarliestSlots(r SlotRequest) []Slot {
	after, deadline := r.After.UnixMicro(), r.Deadline.UnixMicro()
	length := r.Duration.Microseconds()
	last := deadline - length // latest possible start
	if r.Count <= 0 || length <= 0 || last < after {
		return nil
	}
	length += x.clean
	hr := HostRequest{Match: r.Match, FilterKey: r.FilterKey}
	cands := x.candidates(&hr)
	if r.Count > len(cands) {
		return nil // never enough, whatever the window: no sweep over every booking
	}
	slot := func(t int64, free int) Slot {
		start := time.UnixMicro(t).UTC()
		return Slot{Start: start, End: start.Add(r.Duration), Free: free}
	}
	var out []Slot
	if f := x.freeTimeFor(hr.filterKey(), hr.cached(), cands); f != nil {
		out, after = f.earliest(r.Count, r.Limit, after, last, length, slot)
		if len(out) == r.Limit || after > last {
			return out
		}
	}
	// From an event of the search, the sweep sees the same events after it and the same
	// hosts free at it (those free from before open there).
	return append(out, sweepSlots(x, cands, r.Count, r.Limit-len(out), after, last, length, slot)...)
}

// sweepSlots is EarliestSlots host by host: each candidate's feasible starts, merged
// lazily across hosts with a heap.
func sweepSlots(x *Index, cands []int32, count, limit int, after, last, length int64, slot func(int64, int) Slot) []Slot {
	var h slotHeap
	for _, p := range cands {
		it := &goodStarts{busy: x.wholeBusy(p), length: length, last: last, cur: after}
		it.i = endsAfter(it.busy, after)
		if it.next() {
			h = append(h, it)
		}
	}
	heap.Init(&h)
	var out []Slot
	n := 0
	for len(h) > 0 && len(out) < limit {
		t := h[0].at()
		// Apply every event at t: ends (exclusive) and starts alike.
		for len(h) > 0 && h[0].at() == t {
			it := h[0]
			if it.open {
				n--
				if it.next() {
					heap.Fix(&h, 0)
				} else {
					heap.Pop(&h)
				}
			} else {
				n++
				it.open = true
				heap.Fix(&h, 0)
			}
		}
		if n >= count {
			out = append(out, slot(t, n))
		}
	}
	return out
}

// goodStarts walks one host's intervals of feasible start times [gs, ge] (inclusive),
// exposing them as two events: open at gs, close at ge+1µs.
type goodStarts struct {
	busy         []interval
	i            int
	length, last int64
	cur          int64 // the host is free from cur
	gs, ge       int64
	open         bool
}

// next advances to the host's next feasible start interval; false when none is left.
func (g *goodStarts) next() bool {
	g.open = false
	for g.cur <= g.last {
		limit := int64(maxTime)
		if g.i < len(g.busy) {
			limit = g.busy[g.i].start
		}
		if limit-g.cur >= g.length {
			g.gs, g.ge = g.cur, min(limit-g.length, g.last)
			if g.i < len(g.busy) {
				g.cur = max(g.cur, g.busy[g.i].end)
				g.i++
			} else {
				g.cur = maxTime
			}
			return true
		}
		if g.i >= len(g.busy) {
			return false
		}
		g.cur = max(g.cur, g.busy[g.i].end)
		g.i++
	}
	return false
}

func (g *goodStarts) at() int64 {
	if g.open {
		return g.ge + 1
	}
	return g.gs
}

type slotHeap []*goodStarts

func (h slotHeap) Len() int { return len(h) }
func (h slotHeap) Less(i, j int) bool {
	a, b := h[i].at(), h[j].at()
	if a != b {
		return a < b
	}
	return h[i].open && !h[j].open // closes before opens at one instant
}
func (h slotHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *slotHeap) Push(v any)   { *h = append(*h, v.(*goodStarts)) }
func (h *slotHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// Bucket is one step of an availability timeline.
type Bucket struct {
	Start, End time.Time
	Free       int // matching hosts free for the whole bucket
}

// maxTimelineBuckets is a backstop for callers that do not bound a timeline themselves.
const maxTimelineBuckets = 1 << 20

// Buckets returns how many buckets of width step cover [from, to): the last one may be
// shorter. It counts in Unix microseconds: to.Sub(from) saturates at 292 years, and a
// count derived from it let a 68,363-bucket range pass a 2,000-bucket limit.
func Buckets(from, to time.Time, step time.Duration) int64 {
	f, t, st := from.UnixMicro(), to.UnixMicro(), step.Microseconds()
	if st <= 0 || t <= f {
		return 0
	}
	span := t - f
	return span/st + min(span%st, 1)
}

// Timeline counts, for each bucket of width step in [from, to), the matching reservable
// hosts free for the whole bucket (a host is busy during the cleaning time after each of
// its holds). It also returns how many hosts match the filter.
func (x *Index) Timeline(match func(*climate.Host) bool, filterKey string, from, to time.Time, step time.Duration) ([]Bucket, int) {
	cands := x.candidates(&HostRequest{Match: match, FilterKey: filterKey})
	f, st := from.UnixMicro(), step.Microseconds()
	n64 := Buckets(from, to, step)
	if n64 <= 0 || n64 > maxTimelineBuckets {
		return nil, len(cands)
	}
	n := int(n64)
	diff := make([]int, n+1) // busy hosts per bucket, as a difference array
	for _, p := range cands {
		b := x.wholeBusy(p)
		i := endsAfter(b, f)
		marked := -1 // last bucket already counted busy for this host
		for ; i < len(b) && b[i].start < f+int64(n)*st; i++ {
			lo := int(max(b[i].start-f, 0) / st)
			hi := int((b[i].end - f + st - 1) / st) // exclusive
			lo, hi = max(lo, marked+1), min(hi, n)
			if lo < hi {
				diff[lo]++
				diff[hi]--
				marked = hi - 1
			}
		}
	}
	out := make([]Bucket, n)
	busy := 0
	for k := 0; k < n; k++ {
		busy += diff[k]
		start := from.Add(time.Duration(k) * step)
		end := start.Add(step)
		if end.After(to) {
			end = to
		}
		out[k] = Bucket{Start: start.UTC(), End: end.UTC(), Free: len(cands) - busy}
	}
	return out, len(cands)
}

// SlotTimeline counts, for each bucket of width step in [from, to), how many slots of size
// fit on the matching reservable hosts for the whole bucket: per host, the least room over
// the bucket beside its slots, none while it is held whole; every hold lasts the cleaning
// time longer.
func (x *Index) SlotTimeline(size climate.Size, match func(*climate.Host) bool, filterKey string, from, to time.Time, step time.Duration) []int {
	n64 := Buckets(from, to, step)
	if n64 <= 0 || n64 > maxTimelineBuckets {
		return nil
	}
	n, f, st := int(n64), from.UnixMicro(), step.Microseconds()
	end := to.UnixMicro() // the last bucket may be shorter
	total := make([]int, n)
	room := make([]int, n)
	constant := 0 // room on hosts with nothing in the range, the same in every bucket
	type change struct {
		at    int64
		load  climate.Size
		whole int
	}
	for _, p := range x.candidates(&HostRequest{Match: match, FilterKey: filterKey}) {
		h := &x.hosts[p]
		if !size.Within(h.Capacity()) {
			continue
		}
		base := fits(h.Capacity(), climate.Size{}, size)
		var changes []change
		for _, iv := range x.busy[p] {
			if iv.start < end && iv.end > f {
				changes = append(changes, change{max(iv.start, f), climate.Size{}, 1}, change{min(iv.end, end), climate.Size{}, -1})
			}
		}
		x.overlapping(p, f, end, -1, noReclaim, func(u *use) {
			changes = append(changes, change{max(u.start, f), u.size, 0}, change{min(u.end, end), u.size.Times(-1), 0})
		})
		if len(changes) == 0 {
			constant += base
			continue
		}
		sort.Slice(changes, func(i, j int) bool { return changes[i].at < changes[j].at })
		for k := range room {
			room[k] = base
		}
		var load climate.Size
		whole := 0
		for i, c := range changes {
			load, whole = load.Plus(c.load), whole+c.whole
			if i+1 < len(changes) && changes[i+1].at == c.at {
				continue
			}
			next := end
			if i+1 < len(changes) {
				next = changes[i+1].at
			}
			if next <= c.at {
				continue
			}
			r := max(fits(h.Capacity(), load, size), 0)
			if whole > 0 {
				r = 0
			}
			if r >= base {
				continue
			}
			for k := int((c.at - f) / st); k < n && f+int64(k)*st < next; k++ {
				room[k] = min(room[k], r)
			}
		}
		for k := range total {
			total[k] += room[k]
		}
	}
	for k := range total {
		total[k] += constant
	}
	return total
}
