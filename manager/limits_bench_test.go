package manager_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
	"climate/sqlite"
	"climate/workload"
)

// BenchmarkCreateLeaseWithLimits times lease creation at H=5,000 on SQLite for a project
// without limits and for one with every limit and a budget (none reached): the difference
// is what the fair-use checks cost. Each creation books three hosts for an hour; a
// thousand creations share each hour, so hosts fill as in a real book and the project's
// open usage grows.
func BenchmarkCreateLeaseWithLimits(b *testing.B) {
	for _, limited := range []bool{false, true} {
		b.Run(fmt.Sprintf("limits=%v", limited), func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, b.TempDir()+"/climate.db")
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if err := workload.Load(ctx, st, &workload.Book{Hosts: workload.Hosts(5000)}, nil); err != nil {
				b.Fatal(err)
			}
			m := manager.New(st, clock.NewFake(t0), manager.Config{})
			if limited {
				big := 100000000
				setLimits(b, m, "physics", climate.LimitsUpdate{MaxHosts: set(big), MaxVCPUs: set(big), MaxFloatingIPs: set(big), MaxLeases: set(big),
					MaxLeaseDuration: set(24 * time.Hour), MaxAdvance: set(10 * 365 * 24 * time.Hour), Budget: set(1e14)})
			}
			b.ResetTimer()
			for i := range b.N {
				start := time.Duration(i/1000) * time.Hour
				if _, err := m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "bench", Start: at(time.Hour + start), End: at(2*time.Hour + start),
					Reservations: []climate.ReservationRequest{hostReq(3, 3, "")}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
