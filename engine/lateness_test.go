package engine_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/engine"
	"climate/manager"
	"climate/sqlite"
)

// BenchmarkStartLateness measures, on the real clock and a real SQLite file, how late
// start_lease events complete: 100 leases start at distinct instants spread over two
// seconds, and lateness is the time from each event's due time until its lease is ACTIVE.
func BenchmarkStartLateness(b *testing.B) {
	const leases = 100
	var all []time.Duration
	for n := 0; n < b.N; n++ {
		st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "climate.db"))
		if err != nil {
			b.Fatal(err)
		}
		clk := clock.Real{}
		done := make(chan time.Duration, leases)
		var eng *engine.Engine
		eng = engine.New(st, clk, engine.Config{
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Observe: func(r engine.Report) {
				if r.Event.Type == climate.EventStartLease {
					done <- time.Since(r.Event.Time)
				}
			},
		})
		mgr := manager.New(st, clk, manager.Config{EventsChanged: eng.WakeFor})
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() { defer close(stopped); _ = eng.Run(ctx) }()
		admin := climate.Identity{UserID: "u", ProjectID: "p", Roles: []string{"admin"}}
		for i := 0; i < leases; i++ {
			if _, err := mgr.CreateHost(ctx, admin, map[string]string{"name": fmt.Sprintf("h%d", i)}); err != nil {
				b.Fatal(err)
			}
		}
		base := time.Now().UTC().Add(time.Second)
		one := 1
		for i := 0; i < leases; i++ {
			start := base.Add(time.Duration(i) * 20 * time.Millisecond)
			_, err := mgr.CreateLease(ctx, admin, climate.LeaseRequest{
				Name: "l", Start: climate.Date{Time: start}, End: climate.Date{Time: start.Add(time.Hour)},
				Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one}},
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < leases; i++ {
			all = append(all, <-done)
		}
		cancel()
		<-stopped
		st.Close()
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "median-late-ms")
	b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-late-ms")
}
