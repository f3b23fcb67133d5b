package manager_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"climate"
	"climate/bench"
	"climate/clock"
	"climate/manager"
	"climate/postgres"
	"climate/sqlite"
	"climate/workload"
)

// sumObserver adds up the manager's planning and commit times.
type sumObserver struct{ planned, committed, conflicts atomic.Int64 }

func (o *sumObserver) Planned(d time.Duration)   { o.planned.Add(int64(d)) }
func (o *sumObserver) Committed(d time.Duration) { o.committed.Add(int64(d)) }
func (o *sumObserver) Conflict()                 { o.conflicts.Add(1) }
func (o *sumObserver) Refreshed(bool)            {}

// BenchmarkCreateLeaseConcurrent times lease creations by 1 and 16 concurrent callers in
// process (no HTTP) at H=5,000 / R=50,000 on SQLite and H=1,000 / R=10,000 on PostgreSQL
// (when CLIMATE_TEST_POSTGRES is set), the blazar-90d book: each asks for 10 hosts over
// the workload's next request window. leases/s is the write path's throughput (SQLite:
// concurrent commits share one transaction, group commit; PostgreSQL: writers lock only
// the hosts they book); plan-ms and commit-ms are a creation's mean planning and commit
// (queueing included) times, conflicts the commits whose re-check failed and were planned
// again, cpu-ms/op the process's CPU time a creation (user and system, all goroutines:
// the figure to compare builds by when the machine's other load makes leases/s noisy),
// and, on Linux, reads/op, writes/op and written-KiB/op, the process's read and write
// system calls and the bytes it wrote a creation, which that load does not move at all.
// With -cpuprofile, run once with -benchtime 1x as well and subtract it (pprof
// -diff_base) to leave the book's load out.
func BenchmarkCreateLeaseConcurrent(b *testing.B) {
	ctx := context.Background()
	b.Run("store=sqlite", func(b *testing.B) {
		path := b.TempDir() + "/climate.db"
		benchmarkCreateLeaseConcurrent(b, 5000, 50000, func() (climate.Store, error) { return sqlite.Open(ctx, path) })
	})
	b.Run("store=postgres", func(b *testing.B) {
		dsn := postgres.TestDSN(b)
		benchmarkCreateLeaseConcurrent(b, 1000, 10000, func() (climate.Store, error) { return postgres.Open(ctx, dsn) })
	})
}

// processCPU returns the CPU time (user and system) the process has used so far.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// storeCloser is a store the benchmark closes.
type storeCloser interface {
	climate.Store
	Close() error
}

func benchmarkCreateLeaseConcurrent(b *testing.B, hosts, leases int, open func() (climate.Store, error)) {
	ctx := context.Background()
	openStore := func() storeCloser {
		st, err := open()
		if err != nil {
			b.Fatal(err)
		}
		return st.(storeCloser)
	}
	st := openStore()
	if err := workload.Load(ctx, st, workload.Generate(hosts, leases), nil); err != nil {
		b.Fatal(err)
	}
	st.Close()
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			st := openStore()
			defer st.Close()
			obs := &sumObserver{}
			m := manager.New(st, clock.NewFake(workload.T0.Add(-time.Hour)), manager.Config{Observer: obs})
			if _, err := m.Warm(ctx); err != nil {
				b.Fatal(err)
			}
			windows := workload.Windows(b.N)
			var next, full atomic.Int64
			var wg sync.WaitGroup
			cpuBefore := processCPU(b)
			ioBefore, ioErr := bench.ProcIO("self")
			b.ResetTimer()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := int(next.Add(1) - 1); i < b.N; i = int(next.Add(1) - 1) {
						w := windows[i]
						_, err := m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "bench", Start: climate.Date{Time: w.Start}, End: climate.Date{Time: w.End},
							Reservations: []climate.ReservationRequest{hostReq(10, 10, "")}})
						if climate.ErrorCode(err) == climate.CodeConflict {
							full.Add(1)
						} else if err != nil && !errors.Is(err, context.Canceled) {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpuBefore)/float64(b.N)/1e6, "cpu-ms/op")
			if io, err := bench.ProcIO("self"); err == nil && ioErr == nil { // Linux: system calls, which the machine's load does not move
				b.ReportMetric(float64(io.ReadCalls-ioBefore.ReadCalls)/float64(b.N), "reads/op")
				b.ReportMetric(float64(io.WriteCalls-ioBefore.WriteCalls)/float64(b.N), "writes/op")
				b.ReportMetric(float64(io.WrittenBytes-ioBefore.WrittenBytes)/float64(b.N)/1024, "written-KiB/op")
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leases/s")
			b.ReportMetric(float64(full.Load()), "no-capacity")
			b.ReportMetric(float64(obs.planned.Load())/float64(b.N)/1e6, "plan-ms")
			b.ReportMetric(float64(obs.committed.Load())/float64(b.N)/1e6, "commit-ms")
			b.ReportMetric(float64(obs.conflicts.Load()), "conflicts")
		})
	}
}
