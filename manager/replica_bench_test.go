package manager

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/resource"
	"climate/sqlite"
	"climate/workload"
)

// BenchmarkReplicaCatchUp times a replica's next view after one commit of another replica
// (a 10-host lease created or deleted) over the H=5,000 / R=50,000 book: catching up on the
// allocation log versus rebuilding the index (a store without the log).
//
//	go test -run '^$' -bench ReplicaCatchUp ./manager
func BenchmarkReplicaCatchUp(b *testing.B) {
	const hosts, leases = 5000, 50000
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "climate.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	book := workload.Generate(hosts, leases)
	start := time.Now()
	if err := workload.Load(ctx, st, book, nil); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d hosts, %d leases, %d allocations in %v", hosts, leases, book.Allocations(), time.Since(start).Round(time.Millisecond))
	clk := clock.NewFake(workload.T0)
	writer := New(st, clk, Config{})
	windows := workload.Windows(1000)
	n := workload.HostsWanted
	var created *climate.Lease
	// commit alternately books a window's hosts and deletes that lease, so the book stays
	// the size it was loaded at.
	commit := func(b *testing.B, i int) {
		if created != nil {
			if err := writer.DeleteLease(ctx, replicaAdmin, created.ID); err != nil {
				b.Fatal(err)
			}
			created = nil
			return
		}
		w := windows[i%len(windows)]
		created, err = writer.CreateLease(ctx, replicaMember, climate.LeaseRequest{Name: "bench", Start: climate.Date{Time: w.Start}, End: climate.Date{Time: w.End},
			Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &n, Max: &n}}})
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		store climate.Store
	}{
		{"catch-up", st},
		{"rebuild", withoutLog{Store: st}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			replica := New(tc.store, clk, Config{})
			noop := func(*resource.View) error { return nil }
			if err := replica.view(ctx, noop); err != nil {
				b.Fatal(err)
			}
			rebuilds, catchUps := replica.rebuilds.Load(), replica.catchUps.Load()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				commit(b, i)
				b.StartTimer()
				if err := replica.view(ctx, noop); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			rebuilds, catchUps = replica.rebuilds.Load()-rebuilds, replica.catchUps.Load()-catchUps
			if want := int64(b.N); tc.name == "catch-up" && (catchUps != want || rebuilds != 0) || tc.name == "rebuild" && (rebuilds != want || catchUps != 0) {
				b.Fatalf("%d views: %d rebuilds, %d catch-ups", b.N, rebuilds, catchUps)
			}
		})
	}
}
