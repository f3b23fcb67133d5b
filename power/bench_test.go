package power

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"climate/clock"
	"climate/sqlite"
	"climate/workload"
)

// BenchmarkPlan plans once over a book loaded with `climate bench load` into the data
// directory CLIMATE_POWER_BENCH_DIR, in the middle of its 90 days (reads only):
//
//	climate bench load --hosts 5000 --leases 50000 --data-dir /tmp/c5k
//	CLIMATE_POWER_BENCH_DIR=/tmp/c5k go test -run '^$' -bench Plan ./power
func BenchmarkPlan(b *testing.B) {
	dir := os.Getenv("CLIMATE_POWER_BENCH_DIR")
	if dir == "" {
		b.Skip("CLIMATE_POWER_BENCH_DIR is not set")
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "climate.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := workload.T0.Add(45 * 24 * time.Hour)
	m := New(st, clock.NewFake(now), Config{Lead: 10 * time.Minute, Idle: 30 * time.Minute, Logger: quiet})
	var switches []Decision
	for b.Loop() {
		switches, _, err = m.plan(context.Background(), now)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(switches)), "switches")
}
