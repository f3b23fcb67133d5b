package engine_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"climate"
	"climate/clock"
	"climate/engine"
	"climate/postgres"
	"climate/workload"
)

// BenchmarkStartLatenessPostgres measures, on the real clock and PostgreSQL, how late
// start_lease events complete when 10,000 of them fall due uniformly over one minute, with
// 1 and with 3 engines (each with its own connection pool, woken by WatchEvents like
// `climate serve` replicas) sharing the schema. Lateness is the time from an event's due
// time until its handler has committed (the lease is ACTIVE). Run it with
//
//	CLIMATE_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test go test -run '^$' -bench StartLatenessPostgres -benchtime 1x ./engine/
func BenchmarkStartLatenessPostgres(b *testing.B) {
	for _, engines := range []int{1, 3} {
		b.Run(fmt.Sprintf("engines=%d", engines), func(b *testing.B) {
			var all []time.Duration
			for range b.N {
				all = append(all, startLatenessPostgres(b, engines, 10000, time.Minute)...)
			}
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			at := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))].Microseconds()) / 1000 }
			b.ReportMetric(at(0.5), "median-late-ms")
			b.ReportMetric(at(0.99), "p99-late-ms")
			b.ReportMetric(at(1), "max-late-ms")
		})
	}
}

// startLatenessPostgres loads n one-host leases whose starts are spread uniformly over
// span, runs engines engines until every start has fired, and returns each lateness.
func startLatenessPostgres(b *testing.B, engines, n int, span time.Duration) []time.Duration {
	b.Helper()
	ctx := context.Background()
	dsn := postgres.TestDSN(b)
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()

	// Load with placeholder dates a year ahead, then move everything to start shortly after
	// the load in one statement per table, so loading time does not count as lateness.
	hosts := workload.Hosts(n)
	far := time.Now().UTC().Add(365 * 24 * time.Hour).Truncate(time.Second)
	step := span / time.Duration(n)
	err = st.Update(ctx, func(tx climate.Tx) error {
		for i := range hosts {
			if err := tx.InsertHost(ctx, &hosts[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for from := 0; from < n; from += 2000 {
		err := st.Update(ctx, func(tx climate.Tx) error {
			for i := from; i < min(from+2000, n); i++ {
				l := benchLease(i, hosts[i].ID, far.Add(time.Duration(i)*step), time.Hour)
				if err := tx.InsertLease(ctx, &l); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}

	done := make(chan time.Duration, n)
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{}, 2*engines)
	var stores []*postgres.Store
	defer func() {
		cancel()
		for range 2 * len(stores) {
			<-stopped
		}
		for _, s := range stores {
			s.Close()
		}
	}()
	for range engines {
		est, err := postgres.Open(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		stores = append(stores, est)
		eng := engine.New(est, clock.Real{}, engine.Config{
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
			MaxSleep: 30 * time.Second,
			Observe: func(r engine.Report) {
				if r.Event.Type == climate.EventStartLease {
					if r.Err != nil {
						b.Errorf("event %s: %v", r.Event.ID, r.Err)
					}
					done <- time.Since(r.Event.Time)
				}
			},
		})
		go func() { _ = eng.Run(runCtx); stopped <- struct{}{} }()
		go func() {
			_ = est.WatchEvents(runCtx, func(c postgres.Change) { eng.WakeFor(c.Due) })
			stopped <- struct{}{}
		}()
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	shift := time.Until(far) - 2*time.Second // the first start is 2 s from now
	tx, err := conn.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE leases SET start_at = start_at - $1 * interval '1 microsecond', end_at = end_at - $1 * interval '1 microsecond'`,
		`UPDATE allocations SET start_at = start_at - $1 * interval '1 microsecond', end_at = end_at - $1 * interval '1 microsecond'`,
		`UPDATE events SET time = time - $1 * interval '1 microsecond'`,
	} {
		if _, err := tx.Exec(ctx, q, shift.Microseconds()); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	out := make([]time.Duration, 0, n)
	timeout := time.After(span + 5*time.Minute)
	for len(out) < n {
		select {
		case d := <-done:
			out = append(out, d)
		case <-timeout:
			b.Fatalf("%d of %d starts fired", len(out), n)
		}
	}
	b.StopTimer()
	return out
}

// benchLease is lease i: one host from start for d, with its start and end events.
func benchLease(i int, host string, start time.Time, d time.Duration) climate.Lease {
	id := func(kind int) string { return workload.UID(90+kind, i) }
	created := time.Now().UTC().Truncate(time.Microsecond)
	l := climate.Lease{ID: id(0), Name: fmt.Sprintf("late-%d", i), UserID: "bench", ProjectID: "bench",
		Start: start, End: start.Add(d), Status: climate.LeasePending, CreatedAt: created}
	l.Reservations = []climate.Reservation{{ID: id(1), LeaseID: l.ID, ResourceType: climate.ResourceTypeHost,
		Status: climate.ReservationPending, Min: 1, Max: 1, BeforeEnd: "default", CreatedAt: created,
		Allocations: []climate.Allocation{{ID: id(2), ReservationID: id(1), LeaseID: l.ID, ResourceID: host, Start: l.Start, End: l.End}}}}
	l.Events = []climate.Event{
		{ID: id(3), LeaseID: l.ID, Type: climate.EventStartLease, Time: l.Start, Status: climate.EventUndone, CreatedAt: created},
		{ID: id(4), LeaseID: l.ID, Type: climate.EventEndLease, Time: l.End, Status: climate.EventUndone, CreatedAt: created},
	}
	return l
}
