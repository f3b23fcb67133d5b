package manager

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/sqlite"
	"climate/workload"
)

// BenchmarkRetryWaiting times one pass over the waiting queue after a lease is deleted
// (and reports the first, cold pass as cold-ms):
// H=5,000 hosts with the standard book (R=50,000 leases), and 10,000 retry leases waiting
// because each asks for more hosts than are free (a few fit a quiet window: "booked") (4,000 to 4,900 of them, a third on GPU
// hosts, for 1 h to 1 d, half from now and half at windows of the workload).
//
//	go test -run '^$' -bench RetryWaiting -benchtime 10x ./manager
func BenchmarkRetryWaiting(b *testing.B) {
	const hosts, leases, waiting = 5000, 50000, 10000
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "climate.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := workload.Load(ctx, st, workload.Generate(hosts, leases), nil); err != nil {
		b.Fatal(err)
	}
	clk := clock.NewFake(workload.T0)
	m := New(st, clk, Config{})
	windows := workload.Windows(500)
	counts := []int{4000, 4400, 4700, 4900}
	lengths := []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour}
	filters := []string{"", "", `["==", "$gpu", "true"]`}
	err = st.Update(ctx, func(tx climate.Tx) error {
		for i := range waiting {
			n, length, filter := counts[i%len(counts)], lengths[i/4%len(lengths)], filters[i/12%len(filters)]
			start := workload.T0
			if i%2 == 1 {
				start = windows[i%len(windows)].Start
			}
			l := &climate.Lease{ID: fmt.Sprintf("w-%05d", i), Name: "waiting", ProjectID: "p", UserID: "u",
				Start: start, End: start.Add(length), Status: climate.LeaseWaiting, Type: climate.LeaseRetry,
				RetryUntil: start.Add(30 * 24 * time.Hour), CreatedAt: workload.T0.Add(time.Duration(i) * time.Microsecond),
				Reservations: []climate.Reservation{{ID: fmt.Sprintf("w-%05d-r", i), LeaseID: fmt.Sprintf("w-%05d", i),
					ResourceType: climate.ResourceTypeHost, Status: climate.ReservationPending, Min: n, Max: n, ResourceProperties: filter,
					BeforeEnd: "default", CreatedAt: workload.T0}}}
			if err := tx.InsertLease(ctx, l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	n, total := 1, 0
	// The first pass plans every waiting lease (cold); the timed ones follow a delete, as
	// in service: only what the freed span may help, and one plan per distinct request.
	start := time.Now()
	if _, err := m.RetryWaiting(ctx); err != nil {
		b.Fatal(err)
	}
	cold := time.Since(start)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		// A small lease created and deleted: the delete is what wakes the queue.
		l, err := m.CreateLease(ctx, replicaMember, climate.LeaseRequest{Name: "freed", Start: climate.Date{Now: true}, End: climate.Date{Time: workload.T0.Add(time.Hour)},
			Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &n, Max: &n}}})
		if err != nil {
			b.Fatal(err)
		}
		if err := m.DeleteLease(ctx, replicaAdmin, l.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		booked, err := m.RetryWaiting(ctx)
		if err != nil {
			b.Fatal(err)
		}
		total += booked
	}
	b.ReportMetric(float64(total), "booked")
	b.ReportMetric(float64(cold.Milliseconds()), "cold-ms")
}
