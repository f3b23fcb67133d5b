package plan_test

import (
	"fmt"
	"testing"
	"time"

	"climate"
	"climate/plan"
	"climate/query"
	"climate/workload"
)

var scales = []struct{ h, r int }{{100, 1000}, {1000, 10000}, {5000, 50000}}

// BenchmarkPlaceHosts times one planning request (10 hosts) per iteration on the
// blazar-90d book, cycling through the workload's request windows.
func BenchmarkPlaceHosts(b *testing.B) {
	for _, sc := range scales {
		book := workload.Generate(sc.h, sc.r)
		x := plan.NewIndex(book.Hosts, book.AllocationsByLease())
		windows := workload.Windows(1000)
		for _, kind := range []struct {
			name string
			q    *query.Query
		}{{"plain", nil}, {"filtered", filtered(b)}} {
			b.Run(fmt.Sprintf("H=%d/%s", sc.h, kind.name), func(b *testing.B) {
				reqs := make([]plan.HostRequest, len(windows))
				for i, w := range windows {
					reqs[i] = request(kind.q, w)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					_, _, _ = x.PlaceHosts(reqs[i%len(reqs)])
				}
			})
		}
	}
}

// BenchmarkEarliestSlots times an earliest-slot search for 10 hosts over the 90-day book.
func BenchmarkEarliestSlots(b *testing.B) {
	for _, sc := range scales {
		book := workload.Generate(sc.h, sc.r)
		x := plan.NewIndex(book.Hosts, book.AllocationsByLease())
		windows := workload.Windows(1000)
		b.Run(fmt.Sprintf("H=%d", sc.h), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				w := windows[i%len(windows)]
				x.EarliestSlots(plan.SlotRequest{Count: 10, Duration: w.End.Sub(w.Start), After: w.Start,
					Deadline: w.Start.Add(90 * 24 * time.Hour), Limit: 3})
			}
		})
	}
}

// BenchmarkNewIndex times building the index from a loaded book (what a replica does when
// another process moved the store on), with the allocations listed as a store lists them
// (by host) and lease by lease.
func BenchmarkNewIndex(b *testing.B) {
	book := workload.Generate(5000, 50000)
	for _, order := range []struct {
		name   string
		allocs []climate.Allocation
	}{{"store", book.AllocationsByHost()}, {"lease", book.AllocationsByLease()}} {
		b.Run("order="+order.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				plan.NewIndex(book.Hosts, order.allocs)
			}
		})
	}
}

// BenchmarkApply times applying one 10-host lease and removing it again (a commit's index
// update), with and without the plain filter's earliest-slot summary to keep current.
func BenchmarkApply(b *testing.B) {
	book := workload.Generate(5000, 50000)
	for _, summary := range []bool{false, true} {
		x := plan.NewIndex(book.Hosts, book.AllocationsByLease())
		w := workload.Windows(1)[0]
		if summary {
			x.EarliestSlots(plan.SlotRequest{Count: 10, Duration: time.Hour, After: w.Start, Deadline: w.Start.Add(24 * time.Hour), Limit: 1})
		}
		hosts, _, err := x.PlaceHosts(request(nil, w))
		if err != nil {
			b.Fatal(err)
		}
		var add []climate.Allocation
		for _, h := range hosts {
			add = append(add, climate.Allocation{LeaseID: "bench", ResourceID: h, Start: w.Start, End: w.End})
		}
		b.Run(fmt.Sprintf("summary=%v", summary), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				x.Apply(nil, add)
				x.Apply(add, nil)
			}
		})
	}
}
