package plan

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"sync"
)

// freeTime summarises the free time of one filter's candidate hosts, so that an earliest-
// slot search need not visit every host. Each host's free time is a list of disjoint gaps
// [from, to) between its holds (padded by the cleaning time; slots count as held, as in
// wholeBusy), the first from minTime and the last to maxTime. A host is free over
// [t, t+L) exactly when one of its gaps has from ≤ t and to ≥ t+L, and at most one can, so
// the number of hosts free over a window is the number of such gaps: a 2-d dominance
// count. The gaps are kept in rows by from (row i holds froms in [rows[i].lo,
// rows[i+1].lo]) and sorted by to within a row, so the count is a binary search in each
// row wholly at or before t plus a scan of the row holding t: O(rows × log + row size),
// about √gaps, instead of one binary search per host. It is built on a filter's first
// search and kept current by Apply.
type freeTime struct {
	once    sync.Once
	ready   bool    // built (Apply skips a summary still being built by its first search)
	members []int32 // the candidate hosts' positions, ascending
	rows    []gapRow
	rowSize int // rows are split when they hold twice as many gaps
}

type freeGap struct{ from, to int64 }

type gapRow struct {
	lo     int64
	gaps   []freeGap // sorted by to
	maxLen int64     // the longest gap's length: rows with none long enough are skipped
}

// maxFreeTimes bounds how many filters keep a summary (each holds 16 bytes per hold of its
// hosts: 42 MB for every host at 2.5 M allocations); the cache is reset when full, like
// the filter cache.
const maxFreeTimes = 8

// maxJumps bounds the events a search visits on the summary (each costs about √gaps):
// a search whose slots lie past more events than that goes on with the host-by-host
// sweep from there, whose cost does not grow with the events it passes.
const maxJumps = 64

// length is a gap's length, the leading gap of a host (from minTime) counting as endless.
func (g freeGap) length() int64 {
	if g.from == minTime {
		return maxTime
	}
	return g.to - g.from
}

// gapsOf appends host p's free gaps to out, in order (a new slice for a nil out).
func (x *Index) gapsOf(p int32, out []freeGap) []freeGap {
	if out == nil {
		out = make([]freeGap, 0, len(x.busy[p])+len(x.shared[p])+1)
	}
	from := int64(minTime)
	for _, iv := range x.wholeBusy(p) {
		if iv.start > from {
			out = append(out, freeGap{from, iv.start})
		}
		from = max(from, iv.end)
	}
	return append(out, freeGap{from, maxTime})
}

// freeTimeFor returns the summary of the hosts cands (those of the filter key), built on
// first use; nil for a filter that is not cached (no key).
func (x *Index) freeTimeFor(key string, cached bool, cands []int32) *freeTime {
	if !cached {
		return nil
	}
	x.mu.Lock()
	f := x.free[key]
	if f == nil {
		if len(x.free) >= maxFreeTimes || x.free == nil {
			x.free = map[string]*freeTime{}
		}
		f = &freeTime{members: cands}
		x.free[key] = f
	}
	x.mu.Unlock()
	f.once.Do(func() { f.build(x) })
	return f
}

func (f *freeTime) build(x *Index) {
	n := 0
	for _, p := range f.members {
		n += len(x.busy[p]) + len(x.shared[p]) + 1
	}
	all := make([]freeGap, 0, n)
	for _, p := range f.members {
		all = x.gapsOf(p, all)
	}
	slices.SortFunc(all, func(a, b freeGap) int { return cmp.Compare(a.from, b.from) })
	f.rowSize = max(16, 2*int(math.Sqrt(float64(len(all)))))
	f.rows = make([]gapRow, max((len(all)+f.rowSize-1)/f.rowSize, 1))
	inParallel(len(all), func(lo, hi int) { // each part sorts the rows that start in it
		for i := (lo + f.rowSize - 1) / f.rowSize * f.rowSize; i < hi; i += f.rowSize {
			j := min(i+f.rowSize, len(all))
			f.rows[i/f.rowSize] = newRow(all[i:j:j]) // capped: a row that grows moves out
		}
	})
	f.rows[0].lo = minTime
	f.ready = true
}

// newRow makes a row of gaps, sorting them by to; lo is the least from.
func newRow(gaps []freeGap) gapRow {
	r := gapRow{lo: maxTime, gaps: gaps}
	for _, g := range r.gaps {
		r.lo, r.maxLen = min(r.lo, g.from), max(r.maxLen, g.length())
	}
	slices.SortFunc(r.gaps, func(a, b freeGap) int { return cmp.Compare(a.to, b.to) })
	return r
}

// row returns the last row whose lo is at or before t.
func (f *freeTime) row(t int64) int {
	return sort.Search(len(f.rows), func(i int) bool { return f.rows[i].lo > t }) - 1
}

// covering returns how many gaps cover [t, t+length) (the hosts free over it) and the
// least to among them (maxTime when none).
func (f *freeTime) covering(t, length int64) (n int, minTo int64) {
	end := t + length
	minTo = maxTime
	k := f.row(t)
	for i := 0; i < k; i++ {
		g := f.rows[i].gaps
		j := sort.Search(len(g), func(j int) bool { return g[j].to >= end })
		if j < len(g) {
			n += len(g) - j
			minTo = min(minTo, g[j].to)
		}
	}
	for _, g := range f.rows[k].gaps {
		if g.from <= t && g.to >= end {
			n++
			minTo = min(minTo, g.to)
		}
	}
	return n, minTo
}

// nextOpen returns the least from after t of a gap at least length long: the next
// instant a host becomes free for that long (maxTime when none).
func (f *freeTime) nextOpen(t, length int64) int64 {
	for i := f.row(t); i < len(f.rows); i++ {
		if f.rows[i].maxLen < length {
			continue
		}
		best := int64(maxTime)
		for _, g := range f.rows[i].gaps {
			if g.from > t && g.from < best && g.length() >= length {
				best = g.from
			}
		}
		if best != maxTime { // later rows' froms are no less than this row's
			return best
		}
	}
	return maxTime
}

// earliest visits the search's events from t on, as the sweep does (starts at which some
// host becomes free for length, and the first starts at which one no longer is), and
// returns the slots among them, up to limit. It stops after maxJumps events and returns
// the event it stopped at (past last when the search is done).
func (f *freeTime) earliest(count, limit int, t, last, length int64, slot func(int64, int) Slot) ([]Slot, int64) {
	var out []Slot
	for jumps := 0; len(out) < limit && t <= last; jumps++ {
		if jumps == maxJumps {
			return out, t
		}
		n, minTo := f.covering(t, length)
		if n >= count {
			out = append(out, slot(t, n))
		}
		t = min(minTo-length+1, f.nextOpen(t, length))
	}
	return out, t
}

func (f *freeTime) add(g freeGap) {
	k := f.row(g.from)
	r := &f.rows[k]
	i := sort.Search(len(r.gaps), func(i int) bool { return r.gaps[i].to >= g.to })
	r.gaps = slices.Insert(r.gaps, i, g)
	r.maxLen = max(r.maxLen, g.length())
	if len(r.gaps) >= 2*f.rowSize {
		f.split(k)
	}
}

// split cuts row k in two halves by from.
func (f *freeTime) split(k int) {
	g := f.rows[k].gaps
	slices.SortFunc(g, func(a, b freeGap) int { return cmp.Compare(a.from, b.from) })
	lo, h := f.rows[k].lo, len(g)/2
	a, b := newRow(g[:h:h]), newRow(slices.Clone(g[h:]))
	a.lo = lo // the row keeps its place: froms before its first still go to it
	f.rows = slices.Insert(f.rows, k+1, b)
	f.rows[k] = a
}

// remove deletes one gap equal to g. Gaps of equal from may sit in earlier rows (a row's
// froms reach the next row's lo).
func (f *freeTime) remove(g freeGap) {
	for k := f.row(g.from); k >= 0; k-- {
		r := &f.rows[k]
		for i := sort.Search(len(r.gaps), func(i int) bool { return r.gaps[i].to >= g.to }); i < len(r.gaps) && r.gaps[i].to == g.to; i++ {
			if r.gaps[i].from == g.from {
				r.gaps = slices.Delete(r.gaps, i, i+1)
				if g.length() == r.maxLen {
					r.maxLen = 0
					for _, o := range r.gaps {
						r.maxLen = max(r.maxLen, o.length())
					}
				}
				return
			}
		}
		if r.lo < g.from {
			return
		}
	}
}

// freeGaps returns the gaps of the hosts of remove and add, before a change, when any
// summary is kept; Apply passes them to updateFreeTimes once the change is made.
func (x *Index) freeGaps(hosts []int32) map[int32][]freeGap {
	x.mu.Lock()
	kept := len(x.free) > 0
	x.mu.Unlock()
	if !kept {
		return nil
	}
	old := make(map[int32][]freeGap, len(hosts))
	for _, p := range hosts {
		if _, ok := old[p]; !ok {
			old[p] = x.gapsOf(p, nil)
		}
	}
	return old
}

// updateFreeTimes moves every summary holding a changed host from its old gaps to its
// current ones (only those that differ: a hold added or removed changes one or two).
func (x *Index) updateFreeTimes(old map[int32][]freeGap) {
	if old == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for p, before := range old {
		now := x.gapsOf(p, nil)
		var gone, came []freeGap
		i, j := 0, 0
		for i < len(before) || j < len(now) {
			switch {
			case j == len(now) || i < len(before) && before[i].from < now[j].from:
				gone = append(gone, before[i])
				i++
			case i == len(before) || now[j].from < before[i].from:
				came = append(came, now[j])
				j++
			default:
				if before[i] != now[j] {
					gone, came = append(gone, before[i]), append(came, now[j])
				}
				i, j = i+1, j+1
			}
		}
		for _, f := range x.free {
			if _, member := slices.BinarySearch(f.members, p); !member || !f.ready {
				continue
			}
			for _, g := range gone {
				f.remove(g)
			}
			for _, g := range came {
				f.add(g)
			}
		}
	}
}
