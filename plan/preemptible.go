package plan

import (
	"cmp"
	"slices"
	"time"

	"climate"
)

// Run is a host a preemptible request may hold from its window's start until End.
type Run struct {
	ID  string
	End time.Time
}

// PlacePreemptible chooses between r.Min and r.Max hosts for a preemptible lease: hosts
// free at the window's start for at least minRun, each held until the window's end or,
// when the host is booked before then, until that booking's start less the cleaning
// time. So a preemptible lease uses capacity reserved for later and gives it back in
// time. The longest runs go first (whole-window ones, which nothing takes back, before
// any other), then the preferred hosts (its own, on update), then registration order;
// with idleFirst, hosts reserved later in the window (reserved-but-idle capacity) go
// before the free ones, which are left to leases that need hosts now.
// Every hold counts as busy here, other preemptible ones included.
func (x *Index) PlacePreemptible(r HostRequest, minRun time.Duration, idleFirst bool) ([]Run, Explanation, error) {
	s, e := r.Window.Start.UnixMicro(), r.Window.End.UnixMicro()
	need := max(minRun.Microseconds(), 1)
	_, _, skip, _ := x.terms(&r)
	ex := Explanation{Requested: r.Min, Registered: len(x.hosts), Cleaning: x.Cleaning()}
	if r.Min > len(x.hosts) {
		return nil, ex, climate.Errorf(climate.CodeConflict, "Not enough hosts available: %d requested, only %d registered.", r.Min, len(x.hosts))
	}
	cands := x.candidates(&r)
	type run struct {
		pos       int32
		end       int64
		preferred bool
	}
	runs := make([]run, 0, min(len(cands), 4*r.Max))
	for _, p := range cands {
		id := x.hosts[p].ID
		if r.Exclude[id] {
			ex.Excluded++
			continue
		}
		end := x.runEnd(p, s, e, skip)
		if end-s < need {
			ex.Busy++
			continue
		}
		ex.Free++
		runs = append(runs, run{p, end, slices.Contains(r.Prefer, id)})
	}
	ex.Unreservable = x.unreservable()
	ex.FilteredOut = len(x.hosts) - ex.Unreservable - len(cands)
	if len(runs) < r.Min {
		return nil, ex, notEnough(ex)
	}
	slices.SortFunc(runs, func(a, b run) int {
		if aw, bw := a.end == e, b.end == e; idleFirst && aw != bw {
			if bw {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.end, a.end); c != 0 {
			return c
		}
		if a.preferred != b.preferred {
			if a.preferred {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.pos, b.pos)
	})
	out := make([]Run, 0, min(r.Max, len(runs)))
	for _, c := range runs[:min(r.Max, len(runs))] {
		out = append(out, Run{x.hosts[c.pos].ID, time.UnixMicro(c.end).UTC()})
	}
	return out, ex, nil
}

// Starts returns, in order and without repeats, when holds begin in (from, to), each
// less the cleaning time: the instants at which what is free from from may stop being.
func (x *Index) Starts(from, to time.Time) []time.Time {
	f, t := from.UnixMicro(), to.UnixMicro()
	var out []int64
	add := func(start int64) {
		if c := start - x.clean; c > f && c < t {
			out = append(out, c)
		}
	}
	for p := range x.busy {
		for _, iv := range x.busy[p] {
			add(iv.start)
		}
		for _, u := range x.shared[p] {
			add(u.start)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	times := make([]time.Time, len(out))
	for i, c := range out {
		times[i] = time.UnixMicro(c).UTC()
	}
	return times
}

// runEnd returns until when host p can be held whole from s (at most until e), ignoring
// lease skip's holds: the window's end, or the next hold's start less the cleaning time;
// s or earlier when a hold covers s.
func (x *Index) runEnd(p int32, s, e int64, skip int32) int64 {
	end := e
	b := x.busy[p]
	// Stored ends are moved on by the cleaning time: a hold ending within it of s is busy.
	for i := endsAfter(b, s); i < len(b); i++ {
		if b[i].lease != skip {
			end = min(end, b[i].start-x.clean)
			break
		}
	}
	for _, u := range x.shared[p] {
		if u.lease != skip && u.end > s {
			end = min(end, u.start-x.clean)
		}
	}
	return end
}
