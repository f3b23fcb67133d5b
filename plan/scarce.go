package plan

import "slices"

// scarceAfter is how many candidates a placement visits, still short of its minimum,
// before it asks the filter's free-time summary whether enough hosts are free at all.
// Where they are not (a full cloud's window), the scan would otherwise visit every
// candidate to say no: 11.5–14.8 ms at 100,000 hosts, against 0.1 ms with the
// summary's count (bench plan). Placements that find their hosts early never ask. A
// lower bound asks more often (256: refusals at 5,000 hosts in 9 µs rather than 55 µs),
// but the first ask builds the filter's summary, which every commit then keeps current
// (about 17 µs a 10-host lease at 5,000 hosts): a cloud whose free hosts are merely few
// should not pay that.
var scarceAfter = 1024 // a variable for the tests' small books

// refusal answers a placement short of hosts from the free-time summary of its filter
// (freetime.go), when the summary's count is exact for it, without visiting every
// candidate: ok is false when it cannot tell, or when enough hosts are free and the scan
// must go on. Otherwise ex is the explanation the complete scan would have given, whose
// Free (the hosts it would have chosen) is below r.Min.
//
// The summary counts the candidates with no hold, whole or slots, over [s, e): exactly
// the hosts neighbours finds free, unless the request ignores some holds. So it answers
// only a new lease (its own holds are none: skip < 0) without hosts to prefer, and only
// when no hold can be taken back: none is preemptible, or the request starts before
// reclaim. Excluded hosts the summary counts are looked at one by one.
func (x *Index) refusal(r *HostRequest, cands []int32, s, e int64, skip int32, reclaim int64, ex Explanation) (_ Explanation, ok bool) {
	if skip >= 0 || len(r.Prefer) > 0 || (x.soft > 0 && s >= reclaim) {
		return ex, false
	}
	f := x.freeTimeFor(r.filterKey(), r.cached(), cands)
	if f == nil {
		return ex, false
	}
	free, _ := f.covering(s, e-s)
	ex.Excluded = 0
	for id := range r.Exclude {
		p, known := x.pos[id]
		if _, member := slices.BinarySearch(cands, p); !known || !member {
			continue
		}
		ex.Excluded++
		if ok, _, _, _ := x.neighbours(p, s, e, skip, reclaim); ok {
			free-- // counted free, but not the scan's to choose
		}
	}
	if free >= r.Min {
		return ex, false
	}
	ex.Free, ex.Busy = free, len(cands)-ex.Excluded-free
	ex.Unreservable = x.unreservable()
	ex.FilteredOut = len(x.hosts) - ex.Unreservable - len(cands)
	return ex, true
}
