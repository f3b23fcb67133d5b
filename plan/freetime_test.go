package plan_test

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/plan"
	"climate/workload"
)

// An earliest-slot search of a cached filter (plain, or a filter with a key) visits its
// events on the filter's free-time summary; one of a filter without a key sweeps every
// host. Both give the same slots, with the same free counts, for random searches between
// random changes (whole-host holds, preemptible ones, instance slots, deletions) applied
// to the index after the summaries exist (crowded, so that its rows split), with and
// without a cleaning time, and for
// searches that return more slots than the summary visits events (the sweep goes on).
func TestEarliestSlotsSummaryEqualsSweep(t *testing.T) {
	for _, clean := range []time.Duration{0, 17 * time.Minute, 5 * time.Hour} {
		t.Run(clean.String(), func(t *testing.T) { summaryEqualsSweep(t, clean) })
	}
}

func summaryEqualsSweep(t *testing.T, clean time.Duration) {
	rng := rand.New(rand.NewSource(int64(clean) + 7))
	book := workload.Generate(60, 600)
	allocs := book.AllocationsByLease()
	x := plan.NewIndex(book.Hosts, allocs, plan.WithCleaning(clean))
	filters := testFilters(t)
	hour := func(n int) time.Time { return workload.T0.Add(time.Duration(n) * time.Hour) }
	searches := 0
	for step := 0; step < 400; step++ {
		for k := 0; k < 3; k++ {
			f := filters[rng.Intn(len(filters))]
			after := hour(rng.Intn(2200)).Add(time.Duration(rng.Intn(3600)) * time.Second)
			r := plan.SlotRequest{Count: 1 + rng.Intn(15), Duration: time.Duration(1+rng.Intn(7200)) * time.Minute,
				After: after, Deadline: after.Add(time.Duration(1+rng.Intn(2000)) * time.Hour), Limit: 1 + rng.Intn(4),
				Match: f.match, FilterKey: f.key}
			if rng.Intn(4) == 0 {
				r.Limit = 60 + rng.Intn(100) // past maxJumps events
			}
			swept := r
			swept.FilterKey = ""
			swept.Match = func(h *climate.Host) bool { return f.match == nil || f.match(h) }
			got, want := x.EarliestSlots(r), x.EarliestSlots(swept)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("step %d, filter %q, %+v:\nsummary %v\nsweep   %v", step, f.key, r, got, want)
			}
			searches += len(want)
		}
		switch rng.Intn(3) {
		case 0: // delete a lease
			allocs = deleteRandomLease(rng, x, allocs)
		default: // a new lease on free hosts: whole, preemptible, or slots
			s := hour(rng.Intn(2200))
			e := s.Add(time.Duration(1+rng.Intn(200)) * time.Hour)
			if rng.Intn(2) == 0 { // short holds crowded into a few days: the summary's rows fill and split
				s = hour(1000 + rng.Intn(100))
				e = s.Add(time.Duration(1+rng.Intn(3)) * time.Hour)
			}
			allocs = addRandomLease(rng, x, book.Hosts, allocs, fmt.Sprintf("new-%d", step), s, e, 1+rng.Intn(4), 0)
		}
	}
	if searches < 1000 {
		t.Fatalf("only %d slots compared: the test exercises too little", searches)
	}
}

// Concurrent searches on a fresh index (as under the manager's read lock) share one summary
// per filter, built once, and each gets the sweep's slots.
func TestEarliestSlotsConcurrentSearchesShareSummary(t *testing.T) {
	book := workload.Generate(50, 300)
	x := plan.NewIndex(book.Hosts, book.AllocationsByLease(), plan.WithCleaning(time.Hour))
	reqs := make([]plan.SlotRequest, 40)
	for i := range reqs {
		after := workload.T0.Add(time.Duration(i*37) * time.Hour)
		reqs[i] = plan.SlotRequest{Count: 1 + i%12, Duration: time.Duration(1+i%50) * time.Hour, After: after,
			Deadline: after.Add(900 * time.Hour), Limit: 3}
	}
	want := make([]string, len(reqs))
	for i, r := range reqs {
		r.Match = func(*climate.Host) bool { return true } // no key: the sweep
		want[i] = fmt.Sprint(x.EarliestSlots(r))
	}
	errs := make(chan string, 4*len(reqs))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i, r := range reqs {
				if got := fmt.Sprint(x.EarliestSlots(r)); got != want[i] {
					errs <- fmt.Sprintf("search %d: summary %s, sweep %s", i, got, want[i])
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
