package plan_test

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"climate/plan"
	"climate/workload"
)

// Placements skip the hosts that a hold over a whole hour proves busy (busyhours.go).
// Whatever they are asked (new leases and updates, preferred and excluded hosts,
// take-backs, windows and holds at any minute, any filter), they get the same hosts,
// explanation and error as the same request without the rows, between random changes
// to the index (deletions, whole-host, preemptible and slot holds), with and without a
// cleaning time; every host the rows mark is one the scan finds busy; and the rows mark
// many.
func TestBusyHoursPlaceAsTheScan(t *testing.T) {
	for _, clean := range []time.Duration{0, 90 * time.Minute} {
		t.Run(clean.String(), func(t *testing.T) { busyHoursPlaceAsTheScan(t, clean) })
	}
}

func busyHoursPlaceAsTheScan(t *testing.T, clean time.Duration) {
	rng := rand.New(rand.NewSource(int64(clean) + 5))
	book := workload.Generate(80, 800)
	allocs := book.AllocationsByLease()
	x := plan.NewIndex(book.Hosts, allocs, plan.WithCleaning(clean))
	filters := testFilters(t)
	// Any minute of the book's first 30 days, a third of the time in two crowded days.
	at := func() time.Time {
		if rng.Intn(3) == 0 {
			return workload.T0.Add(time.Duration(600*60+rng.Intn(48*60)) * time.Minute)
		}
		return workload.T0.Add(time.Duration(rng.Intn(30*24*60)) * time.Minute)
	}
	proved := 0
	for step := 0; step < 400; step++ {
		for k := 0; k < 4; k++ {
			f := filters[rng.Intn(len(filters))]
			s := at()
			w := plan.Window{Start: s, End: s.Add(time.Duration(1+rng.Intn(80*60)) * time.Minute)}
			r := randomHostRequest(rng, book.Hosts, allocs, f, w, 30)
			hosts, ex, err := x.PlaceHosts(r)
			restore := x.SetBusyHours(false)
			wantHosts, wantEx, wantErr := x.PlaceHosts(r)
			restore()
			if got, want := fmt.Sprint(hosts, ex, err), fmt.Sprint(wantHosts, wantEx, wantErr); got != want {
				t.Fatalf("step %d, %+v:\nwith the rows %s\nscan          %s", step, r, got, want)
			}
			for _, id := range x.ProvedBusy(r.Window) {
				proved++
				if x.FreeWhole(id, r.Window) {
					t.Fatalf("step %d: the rows mark host %s busy over %v, the scan finds it free", step, id, r.Window)
				}
			}
		}
		if rng.Intn(3) == 0 {
			allocs = deleteRandomLease(rng, x, allocs)
		} else {
			s := at()
			e := s.Add(time.Duration(1+rng.Intn(72*60)) * time.Minute)
			allocs = addRandomLease(rng, x, book.Hosts, allocs, fmt.Sprintf("new-%d", step), s, e, 1+rng.Intn(20), clean)
		}
	}
	t.Logf("the rows marked %d hosts busy", proved)
	if proved < 10000 {
		t.Fatalf("the rows marked %d hosts busy: the test exercises too little", proved)
	}
}
