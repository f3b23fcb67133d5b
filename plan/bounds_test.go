package plan_test

import (
	"math"
	"runtime"
	"testing"
	"time"

	"climate"
	"climate/plan"
)

// A client's count must not size the planner's memory: asking for up to 2^31-1 hosts
// (once 34 GB of slice capacity, and the process killed) chooses among the hosts that
// exist, and asking for more than exist is a conflict answered before any work.
func TestPlaceHostsHugeCountsAllocateByInventory(t *testing.T) {
	hosts := []climate.Host{{ID: "a", Reservable: true}, {ID: "b", Reservable: true}, {ID: "c", Reservable: true}}
	x := plan.NewIndex(hosts, nil)
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	w := plan.Window{Start: start, End: start.Add(time.Hour)}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, _, err := x.PlaceHosts(plan.HostRequest{Window: w, Min: 1, Max: math.MaxInt32})
	runtime.ReadMemStats(&after)
	if err != nil || len(got) != 3 {
		t.Fatalf("min 1, max 2^31-1 on 3 free hosts: %v, %v; want all 3", got, err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("placing 3 hosts allocated %d bytes", grew)
	}

	_, ex, err := x.PlaceHosts(plan.HostRequest{Window: w, Min: math.MaxInt32, Max: math.MaxInt32})
	if climate.ErrorCode(err) != climate.CodeConflict || ex.Registered != 3 {
		t.Fatalf("min 2^31-1 on 3 hosts: %v (%+v), want a conflict naming 3 registered hosts", err, ex)
	}
	if want := "Not enough hosts available: 2147483647 requested, only 3 registered."; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}
