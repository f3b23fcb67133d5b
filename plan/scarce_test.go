package plan_test

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"climate"
	"climate/plan"
	"climate/workload"
)

// A placement short of hosts may be refused from its filter's free-time summary instead
// of a scan of every candidate (scarce.go). Whatever it is asked (a new lease or an
// update of one, preferred and excluded hosts, take-backs from preemptible holds before
// or after its start, any filter), it gets the same hosts, explanation and error as the
// same request without a filter key (never cached, so never summarised: the complete
// scan), between random changes to the index (deletions, whole-host, preemptible and slot
// holds, days crowded full), with and without a cleaning time. Every refusal the summary
// gives is the scan's; the test checks it gave many.
func TestScarcePlacementEqualsScan(t *testing.T) {
	defer plan.SetScarceAfter(4)()
	for _, clean := range []time.Duration{0, 3 * time.Hour} {
		t.Run(clean.String(), func(t *testing.T) { scarceEqualsScan(t, clean) })
	}
}

func scarceEqualsScan(t *testing.T, clean time.Duration) {
	rng := rand.New(rand.NewSource(int64(clean) + 11))
	book := workload.Generate(80, 800)
	allocs := book.AllocationsByLease()
	x := plan.NewIndex(book.Hosts, allocs, plan.WithCleaning(clean))
	filters := testFilters(t)
	hour := func(n int) time.Time { return workload.T0.Add(time.Duration(n) * time.Hour) }
	crowded := func() time.Time { return hour(1000 + rng.Intn(72)) }
	summarised, declined, refused := 0, 0, 0
	for step := 0; step < 300; step++ {
		for k := 0; k < 4; k++ {
			f := filters[rng.Intn(len(filters))]
			s := hour(rng.Intn(2200))
			if rng.Intn(2) == 0 {
				s = crowded()
			}
			w := plan.Window{Start: s, End: s.Add(time.Duration(1+rng.Intn(48)) * time.Hour)}
			r := randomHostRequest(rng, book.Hosts, allocs, f, w, 40)
			scan := r
			scan.FilterKey = ""
			scan.Match = func(h *climate.Host) bool { return f.match == nil || f.match(h) }
			hosts, ex, err := x.PlaceHosts(r)
			wantHosts, wantEx, wantErr := x.PlaceHosts(scan)
			if got, want := fmt.Sprint(hosts, ex, err), fmt.Sprint(wantHosts, wantEx, wantErr); got != want {
				t.Fatalf("step %d, filter %q, %+v:\nsummary %s\nscan    %s", step, f.key, r, got, want)
			}
			if wantErr != nil {
				refused++
			}
			if sum, ok := x.Refusal(r); ok {
				summarised++
				if wantErr == nil || fmt.Sprint(sum) != fmt.Sprint(wantEx) {
					t.Fatalf("step %d, %+v: the summary refuses (%s), the scan says %v (%s)", step, r, sum, wantErr, wantEx)
				}
			} else if wantErr != nil {
				declined++
			}
		}
		switch rng.Intn(4) {
		case 0: // delete a lease
			allocs = deleteRandomLease(rng, x, allocs)
		default: // a new lease on free hosts, many of them in the crowded days: whole, preemptible, or slots
			s := hour(rng.Intn(2200))
			n := 1 + rng.Intn(4)
			if rng.Intn(2) == 0 {
				s, n = crowded(), 5+rng.Intn(40)
			}
			e := s.Add(time.Duration(1+rng.Intn(60)) * time.Hour)
			allocs = addRandomLease(rng, x, book.Hosts, allocs, fmt.Sprintf("new-%d", step), s, e, n, clean)
		}
	}
	t.Logf("%d refusals: %d given by the summary, %d it left to the scan", refused, summarised, declined)
	if summarised < 100 || declined < 20 {
		t.Fatalf("the summary refused %d placements and left %d refusals to the scan: the test exercises too little", summarised, declined)
	}
}
