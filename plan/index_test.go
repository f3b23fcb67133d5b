package plan_test

import (
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/plan"
	"climate/query"
	"climate/workload"
)

// bruteFree is the obvious definition: a reservable matching host with no allocation
// overlapping the window.
func bruteFree(book *workload.Book, allocs []climate.Allocation, q *query.Query, w workload.Window, skipLease string) []string {
	busy := map[string]bool{}
	for _, a := range allocs {
		if a.LeaseID != skipLease && climate.Overlaps(a.Start, a.End, w.Start, w.End) {
			busy[a.ResourceID] = true
		}
	}
	var out []string
	for i := range book.Hosts {
		h := &book.Hosts[i]
		if h.Reservable && q.Match(h.Property) && !busy[h.ID] {
			out = append(out, h.ID)
		}
	}
	return out
}

// padAllocs returns copies of allocs each ending clean later: with a cleaning time, the
// brute force checks a request's window, its end padded too, against these.
func padAllocs(allocs []climate.Allocation, clean time.Duration) []climate.Allocation {
	out := make([]climate.Allocation, len(allocs))
	for i, a := range allocs {
		a.End = a.End.Add(clean)
		out[i] = a
	}
	return out
}

// cleanings are the cleaning times the brute-force tests try: none, on the hour grid of
// the bookings, and off it.
var cleanings = []time.Duration{0, 17 * time.Minute, time.Hour, 90 * time.Minute, 5 * time.Hour}

func padWindow(w workload.Window, clean time.Duration) workload.Window {
	return workload.Window{Start: w.Start, End: w.End.Add(clean)}
}

func filtered(t testing.TB) *query.Query {
	a, err := query.Parse(workload.FilteredHypervisorProperties)
	if err != nil {
		t.Fatal(err)
	}
	b, err := query.Parse(workload.FilteredResourceProperties)
	if err != nil {
		t.Fatal(err)
	}
	return query.And(a, b)
}

// testFilter is a host filter the randomised tests ask with: the plain one (no key, no
// match), the workload's filtered query, and "odd" hosts.
type testFilter struct {
	key   string
	match func(*climate.Host) bool
}

func testFilters(t testing.TB) []testFilter {
	q := filtered(t)
	odd := func(h *climate.Host) bool { return h.ID[len(h.ID)-1]%2 == 1 }
	return []testFilter{{"", nil}, {q.String(), func(h *climate.Host) bool { return q.Match(h.Property) }}, {"odd", odd}}
}

// randomHostRequest returns a random placement over w for filter f, of at least 1 and
// at most maxMin hosts: a new lease, or a fifth of the time an update of one of allocs'
// leases (its own holds do not count; half the time it prefers its host); a third of the
// time with hosts excluded; and taking preemptible holds back from before its start, or
// from after it, or never.
func randomHostRequest(rng *rand.Rand, hosts []climate.Host, allocs []climate.Allocation, f testFilter, w plan.Window, maxMin int) plan.HostRequest {
	r := plan.HostRequest{Window: w, Min: 1 + rng.Intn(maxMin), Match: f.match, FilterKey: f.key, Rotate: rng.Intn(100), Lease: "new"}
	r.Max = r.Min + rng.Intn(6)
	if rng.Intn(3) == 0 {
		r.Exclude = map[string]bool{}
		for n := rng.Intn(6); n > 0; n-- {
			r.Exclude[hosts[rng.Intn(len(hosts))].ID] = true
		}
	}
	switch rng.Intn(3) {
	case 0:
		r.ReclaimFrom = w.Start.Add(-time.Duration(rng.Intn(100)) * time.Hour) // may take back
	case 1:
		r.ReclaimFrom = w.Start.Add(time.Duration(1+rng.Intn(100)) * time.Hour) // may not
	}
	if rng.Intn(5) == 0 {
		a := allocs[rng.Intn(len(allocs))]
		r.Lease = a.LeaseID
		if rng.Intn(2) == 0 {
			r.Prefer = []string{a.ResourceID}
		}
	}
	return r
}

// deleteRandomLease removes a random lease's allocations from x and returns the others.
func deleteRandomLease(rng *rand.Rand, x *plan.Index, allocs []climate.Allocation) []climate.Allocation {
	victim := allocs[rng.Intn(len(allocs))].LeaseID
	var gone, kept []climate.Allocation
	for _, a := range allocs {
		if a.LeaseID == victim {
			gone = append(gone, a)
		} else {
			kept = append(kept, a)
		}
	}
	x.Apply(gone, nil)
	return kept
}

// addRandomLease books lease on up to n random hosts over [s, e), those where no
// allocation of allocs overlaps it (both padded by clean), each hold a quarter of the
// time preemptible and a quarter of the time instance slots, applies it to x and returns
// allocs with it.
func addRandomLease(rng *rand.Rand, x *plan.Index, hosts []climate.Host, allocs []climate.Allocation, lease string, s, e time.Time, n int,
	clean time.Duration) []climate.Allocation {
	busy := func(host string) bool {
		for _, a := range allocs {
			if a.ResourceID == host && climate.Overlaps(a.Start, a.End.Add(clean), s, e.Add(clean)) {
				return true
			}
		}
		return false
	}
	var add []climate.Allocation
	for ; n > 0; n-- {
		h := hosts[rng.Intn(len(hosts))].ID
		if busy(h) {
			continue
		}
		a := climate.Allocation{LeaseID: lease, ResourceID: h, Start: s, End: e, Preemptible: rng.Intn(4) == 0}
		if rng.Intn(4) == 0 {
			a.Slots, a.Size = 1+rng.Intn(2), climate.Size{VCPUs: 1, MemoryMB: 1024, DiskGB: 1}
		}
		add = append(add, a)
		allocs = append(allocs, a)
	}
	x.Apply(nil, add)
	return allocs
}

func request(q *query.Query, w workload.Window) plan.HostRequest {
	r := plan.HostRequest{Window: plan.Window{Start: w.Start, End: w.End}, Min: 10, Max: 10, FilterKey: q.String()}
	if !q.MatchAll() {
		r.Match = func(h *climate.Host) bool { return q.Match(h.Property) }
	}
	return r
}

// For every request window, the index's free hosts equal a brute-force scan of the book,
// with and without a cleaning time (a host is free when no allocation, padded by the
// cleaning time, overlaps the window padded by it too).
func TestFreeHostsEqualBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for _, scale := range []struct{ h, r, windows int }{{100, 1000, 300}, {1000, 10000, 100}} {
		book := workload.Generate(scale.h, scale.r)
		for _, clean := range []time.Duration{0, cleanings[1+rng.Intn(len(cleanings)-1)]} {
			allocs := padAllocs(book.AllocationsByLease(), clean)
			x := plan.NewIndex(book.Hosts, book.AllocationsByLease(), plan.WithCleaning(clean))
			for _, q := range []*query.Query{nil, filtered(t)} {
				for i, w := range workload.Windows(scale.windows) {
					got := x.FreeHosts(request(q, w))
					want := bruteFree(book, allocs, q, padWindow(w, clean), "")
					if strings.Join(got, ",") != strings.Join(want, ",") {
						t.Fatalf("H=%d cleaning %s window %d (%s): index says %d free, brute force %d", scale.h, clean, i, q, len(got), len(want))
					}
					chosen, _, err := x.PlaceHosts(request(q, w))
					if len(want) >= 10 && (err != nil || len(chosen) != 10) {
						t.Fatalf("window %d: %d free but PlaceHosts gave %v, %v", i, len(want), chosen, err)
					}
					if len(want) < 10 && climate.ErrorCode(err) != climate.CodeConflict {
						t.Fatalf("window %d: %d free but PlaceHosts did not refuse: %v", i, len(want), err)
					}
					free := map[string]bool{}
					for _, id := range want {
						free[id] = true
					}
					for _, id := range chosen {
						if !free[id] {
							t.Fatalf("window %d: chose busy host %s", i, id)
						}
					}
				}
			}
		}
	}
}

// Random requests booked one after another, each applied to the index as the manager does
// after a commit: no plan may ever come within the cleaning time of an existing allocation
// (overlap, without one), and deletes (Apply with removals) free hosts again.
func TestRandomBookingsNeverOverlap(t *testing.T) {
	for _, clean := range []time.Duration{0, 90 * time.Minute} {
		t.Run(clean.String(), func(t *testing.T) { randomBookingsNeverOverlap(t, clean) })
	}
}

func randomBookingsNeverOverlap(t *testing.T, clean time.Duration) {
	rng := rand.New(rand.NewSource(42))
	book := workload.Generate(40, 200)
	allocs := book.AllocationsByLease()
	x := plan.NewIndex(book.Hosts, allocs, plan.WithCleaning(clean))
	booked := 0
	for i := 0; i < 3000; i++ {
		if i%7 == 6 && len(allocs) > 0 {
			allocs = deleteRandomLease(rng, x, allocs)
			continue
		}
		s := workload.T0.Add(time.Duration(rng.Intn(2000)) * time.Hour)
		w := plan.Window{Start: s, End: s.Add(time.Duration(1+rng.Intn(100)) * time.Hour)}
		min := 1 + rng.Intn(5)
		hosts, _, err := x.PlaceHosts(plan.HostRequest{Window: w, Min: min, Max: min + rng.Intn(3)})
		if err != nil {
			continue
		}
		lease := "new-" + string(rune('A'+i%26)) + time.Duration(i).String()
		var add []climate.Allocation
		for _, h := range hosts {
			for _, a := range allocs {
				if a.ResourceID == h && climate.Overlaps(a.Start, a.End.Add(clean), w.Start, w.End.Add(clean)) {
					t.Fatalf("request %d [%s, %s): host %s is booked [%s, %s), cleaning %s", i, w.Start, w.End, h, a.Start, a.End, clean)
				}
			}
			add = append(add, climate.Allocation{LeaseID: lease, ResourceID: h, Start: w.Start, End: w.End})
		}
		x.Apply(nil, add)
		allocs = append(allocs, add...)
		booked++
	}
	if booked < 500 {
		t.Fatalf("only %d bookings: the test exercises too little", booked)
	}
	if x.Allocations() != len(allocs) {
		t.Fatalf("index holds %d allocations, the book %d", x.Allocations(), len(allocs))
	}
}

// The earliest slot is feasible, and no earlier candidate start (the search start or any
// booking's end, plus the cleaning time) is; with a cleaning time a host must be free for
// it after the window too.
func TestEarliestSlotsEqualBruteForce(t *testing.T) {
	book := workload.Generate(100, 1000)
	q := filtered(t)
	rng := rand.New(rand.NewSource(3))
	indexes := map[time.Duration]*plan.Index{}
	for trial := 0; trial < 120; trial++ {
		clean := time.Duration(0)
		if trial%3 > 0 {
			clean = cleanings[rng.Intn(len(cleanings))]
		}
		x := indexes[clean]
		if x == nil {
			x = plan.NewIndex(book.Hosts, book.AllocationsByLease(), plan.WithCleaning(clean))
			indexes[clean] = x
		}
		allocs := padAllocs(book.AllocationsByLease(), clean)
		var ends []time.Time
		for _, a := range allocs {
			ends = append(ends, a.End)
		}
		sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
		count := 1 + rng.Intn(12)
		dur := time.Duration(1+rng.Intn(96)) * time.Hour
		after := workload.T0.Add(time.Duration(rng.Intn(1500)) * time.Hour).Add(17 * time.Minute)
		deadline := after.Add(time.Duration(24+rng.Intn(1000)) * time.Hour)
		var qq *query.Query
		if trial%2 == 1 {
			qq = q
		}
		req := plan.SlotRequest{Count: count, Duration: dur, After: after, Deadline: deadline, Limit: 3, FilterKey: qq.String()}
		if qq != nil {
			req.Match = func(h *climate.Host) bool { return qq.Match(h.Property) }
		}
		slots := x.EarliestSlots(req)
		feasible := func(s time.Time) int {
			return len(bruteFree(book, allocs, qq, workload.Window{Start: s, End: s.Add(dur + clean)}, ""))
		}
		var want time.Time
		candidates := append([]time.Time{after}, ends...)
		for _, c := range candidates {
			if c.Before(after) || c.Add(dur).After(deadline) {
				continue
			}
			if feasible(c) >= count && (want.IsZero() || c.Before(want)) {
				want = c
			}
		}
		if want.IsZero() {
			if len(slots) != 0 {
				t.Fatalf("trial %d: brute force finds no slot, index found %v", trial, slots[0])
			}
			continue
		}
		if len(slots) == 0 || !slots[0].Start.Equal(want) {
			t.Fatalf("trial %d (count %d, %s, cleaning %s): earliest %v, brute force %s", trial, count, dur, clean, slots, want)
		}
		for _, s := range slots {
			if n := feasible(s.Start); n < count || n != s.Free || s.End.After(deadline) {
				t.Fatalf("trial %d: slot %+v has %d free hosts", trial, s, n)
			}
		}
	}
}

// Each bucket counts the hosts free for the whole of it, a host being busy during the
// cleaning time after each allocation.
func TestTimelineEqualsBruteForce(t *testing.T) {
	for _, clean := range cleanings {
		t.Run(clean.String(), func(t *testing.T) { timelineEqualsBruteForce(t, clean) })
	}
}

func timelineEqualsBruteForce(t *testing.T, clean time.Duration) {
	book := workload.Generate(100, 1000)
	allocs := padAllocs(book.AllocationsByLease(), clean)
	x := plan.NewIndex(book.Hosts, book.AllocationsByLease(), plan.WithCleaning(clean))
	q := filtered(t)
	from := workload.T0.Add(100*time.Hour + 30*time.Minute)
	to := from.Add(10*24*time.Hour + 5*time.Hour)
	step := 6 * time.Hour
	buckets, total := x.Timeline(func(h *climate.Host) bool { return q.Match(h.Property) }, q.String(), from, to, step)
	if want := len(bruteFree(book, nil, q, workload.Window{Start: from, End: to}, "")); total != want {
		t.Fatalf("total %d, want %d", total, want)
	}
	if len(buckets) != 41 || !buckets[40].End.Equal(to) { // 245h in 6h steps: 40 whole, 1 cut short
		t.Fatalf("%d buckets, last ends %s", len(buckets), buckets[len(buckets)-1].End)
	}
	for _, b := range buckets {
		if want := len(bruteFree(book, allocs, q, workload.Window{Start: b.Start, End: b.End}, "")); b.Free != want {
			t.Fatalf("bucket %s: %d free, brute force %d", b.Start, b.Free, want)
		}
	}
}

// A filter without a key is evaluated afresh, not answered from the unfiltered hosts,
// which the cache keeps under the empty key.
func TestFilterWithoutKeyIsNotTheUnfilteredCache(t *testing.T) {
	book := workload.Generate(100, 1000)
	x := plan.NewIndex(book.Hosts, book.AllocationsByLease())
	w := workload.Windows(1)[0]
	all := x.FreeHosts(plan.HostRequest{Window: plan.Window{Start: w.Start, End: w.End}})
	q := filtered(t)
	r := plan.HostRequest{Window: plan.Window{Start: w.Start, End: w.End}, Match: func(h *climate.Host) bool { return q.Match(h.Property) }}
	got := x.FreeHosts(r)
	want := bruteFree(book, book.AllocationsByLease(), q, w, "")
	if strings.Join(got, ",") != strings.Join(want, ",") || len(got) == len(all) {
		t.Fatalf("filter without a key: %d free hosts, want %d (of %d unfiltered)", len(got), len(want), len(all))
	}
}
