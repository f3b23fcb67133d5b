package plan_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"climate"
	"climate/plan"
	"climate/workload"
)

// BenchmarkPlaceSlots times one instance-slot planning request per iteration on the
// instance workload (workload.GenerateInstances: H hosts of 32–128 vCPUs and 128–512 GB,
// 10 × H instance leases of 1–8 slots of 8 sizes over 1–3 hosts, a whole-host lease after
// every tenth, over 21 days, ≈ 35% of the vCPU-hours booked), cycling through the
// workload's first 1,000 requests (1–8 slots, 1–72 h windows): "mixed" with the
// requests' own affinities (half none, a quarter each affinity and anti-affinity), the
// others with every request's affinity set to one kind. Reports the median and p99 time
// per request and the share of requests refused (409); the book is not changed.
//
//	go test -run '^$' -bench PlaceSlots -benchtime 5000x ./plan
func BenchmarkPlaceSlots(b *testing.B) {
	yes, no := true, false
	for _, h := range []int{1000, 5000} {
		book := workload.GenerateInstances(h, 10*h)
		x := plan.NewIndex(book.Hosts, book.AllocationsByLease())
		reqs := workload.InstanceRequests(1000)
		for _, kind := range []struct {
			name     string
			affinity func(workload.InstanceRequest) *bool
		}{
			{"mixed", func(q workload.InstanceRequest) *bool { return q.Affinity }},
			{"none", func(workload.InstanceRequest) *bool { return nil }},
			{"affinity", func(workload.InstanceRequest) *bool { return &yes }},
			{"anti-affinity", func(workload.InstanceRequest) *bool { return &no }},
		} {
			b.Run(fmt.Sprintf("H=%d/%s", h, kind.name), func(b *testing.B) {
				rs := make([]plan.SlotsRequest, len(reqs))
				for i, q := range reqs {
					rs[i] = plan.SlotsRequest{Window: plan.Window{Start: q.Window.Start, End: q.Window.End},
						Amount: q.Amount, Size: q.Size, Affinity: kind.affinity(q)}
				}
				lat := make([]time.Duration, b.N)
				refused := 0
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					_, err := x.PlaceSlots(rs[i%len(rs)])
					lat[i] = time.Since(t0)
					if err != nil {
						if climate.ErrorCode(err) != climate.CodeConflict {
							b.Fatal(err)
						}
						refused++
					}
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "median-µs")
				b.ReportMetric(float64(lat[min(len(lat)*99/100, len(lat)-1)].Nanoseconds())/1000, "p99-µs")
				b.ReportMetric(100*float64(refused)/float64(b.N), "%refused")
			})
		}
	}
}
