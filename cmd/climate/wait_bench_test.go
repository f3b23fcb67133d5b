package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"climate/http/api"
	"climate/http/client"
	"climate/postgres"
)

// BenchmarkWaitLatency measures how long after a lease becomes ACTIVE (the engine's
// commit: the lease's updated_at, which is also its lease.event.start_lease
// notification's created_at) `climate lease wait` and `lease create --wait` return, run
// in process against a served SQLite database. Each op is one lease; run with
// -benchtime 100x -v to see the figures:
//
//	create-now: lease create --start-date now --wait, one at a time
//	waiters: b.N leases starting 20 ms apart, each awaited by its own lease wait, all at once
//	create-now-polling: create-now against a server without the stream (the fallback)
func BenchmarkWaitLatency(b *testing.B) {
	srv := startServer(b, serveOptions{})
	w := newWaitBench(b, srv.url)
	b.Run("create-now", func(b *testing.B) { w.createNow(b, srv.url) })
	b.Run("waiters", func(b *testing.B) { w.waiters(b) })
	b.Run("create-now-polling", func(b *testing.B) { w.createNow(b, newCountingProxy(b, srv.url, true).url) })
}

// BenchmarkWaitLatencyPostgres is BenchmarkWaitLatency across PostgreSQL replicas: the
// engine runs in one, the waits talk to an API-only one, whose hub hears of the engine's
// commits through LISTEN/NOTIFY.
func BenchmarkWaitLatencyPostgres(b *testing.B) {
	dsn := postgres.TestDSN(b)
	startServer(b, serveOptions{database: dsn, role: "engine"})
	api := startServer(b, serveOptions{database: dsn, role: "api"})
	w := newWaitBench(b, api.url)
	b.Run("create-now", func(b *testing.B) { w.createNow(b, api.url) })
	b.Run("waiters", func(b *testing.B) { w.waiters(b) })
}

// waitBench runs lease waits against one server.
type waitBench struct {
	url   string
	c     *client.Client
	hosts int
}

func newWaitBench(b *testing.B, url string) *waitBench {
	c, err := client.New(url, "")
	if err != nil {
		b.Fatal(err)
	}
	return &waitBench{url: url, c: c}
}

// addHosts registers n more hosts, so that n more leases fit at once.
func (w *waitBench) addHosts(b *testing.B, n int) {
	for ; n > 0; n-- {
		w.hosts++
		if _, err := w.c.CreateHost(context.Background(), map[string]any{"name": fmt.Sprintf("h%d", w.hosts)}); err != nil {
			b.Fatal(err)
		}
	}
}

// createNow times lease create --start-date now --wait, one lease at a time, through url.
func (w *waitBench) createNow(b *testing.B, url string) {
	w.addHosts(b, b.N)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		out, errOut, err := execClimate("lease", "create", fmt.Sprintf("now-%s-%d", b.Name(), i), "--url", url,
			"--reservation", "resource_type=physical:host,min=1,max=1", "--end-date", "+1h", "--wait", "-o", "json")
		returned := time.Now()
		if err != nil {
			b.Fatalf("create --wait: %v\n%s", err, errOut)
		}
		at, err := activeAt(out)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, returned.Sub(at))
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// waiters times b.N lease waits at once, on leases starting 20 ms apart.
func (w *waitBench) waiters(b *testing.B) {
	w.addHosts(b, b.N)
	const spacing = 20 * time.Millisecond
	// Leases start after every waiter has had time to subscribe.
	base := time.Now().Add(2*time.Second + time.Duration(b.N)*10*time.Millisecond)
	ids := make([]string, b.N)
	for i := range b.N {
		start := base.Add(time.Duration(i) * spacing)
		l, err := w.c.CreateLease(context.Background(), api.LeaseRequest{Name: fmt.Sprintf("w-%s-%d", b.Name(), i), StartDate: start.UTC().Format(time.RFC3339Nano),
			EndDate: start.Add(time.Hour).UTC().Format(time.RFC3339Nano), Reservations: []map[string]any{{"resource_type": "physical:host", "min": 1, "max": 1}}})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = l.ID
	}
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	errs := make(chan error, b.N)
	b.ResetTimer()
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errOut, err := execClimate("lease", "wait", id, "--url", w.url, "--timeout", "1m", "-o", "json")
			returned := time.Now()
			if err != nil {
				errs <- fmt.Errorf("lease wait: %v\n%s", err, errOut)
				return
			}
			at, err := activeAt(out)
			if err != nil {
				errs <- err
				return
			}
			lat[i] = returned.Sub(at)
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if time.Now().Before(base) {
		b.Fatal("the waits returned before the leases started")
	}
	reportLatencies(b, lat)
}

// reportLatencies reports p50, p99 and the worst of lat, as metrics and in the log.
func reportLatencies(b *testing.B, lat []time.Duration) {
	b.Helper()
	logLatencies(b, fmt.Sprintf("%d leases: ACTIVE → wait returned", len(lat)), lat, true)
}

// logLatencies logs p50, p99 and the worst of lat under what, and reports them as the
// benchmark's metrics when metrics is set.
func logLatencies(b *testing.B, what string, lat []time.Duration, metrics bool) {
	b.Helper()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p50, p99, worst := lat[len(lat)/2], lat[(len(lat)*99)/100], lat[len(lat)-1]
	if metrics {
		b.ReportMetric(ms(p50), "p50-ms")
		b.ReportMetric(ms(p99), "p99-ms")
		b.ReportMetric(ms(worst), "max-ms")
	}
	b.Logf("%s: p50 %.1f ms, p99 %.1f ms, max %.1f ms", what, ms(p50), ms(p99), ms(worst))
}

// execClimate runs the CLI in process.
func execClimate(args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	err := root.Execute()
	return stdout.String(), stderr.String(), err
}

// activeAt reads when the lease printed as JSON became ACTIVE: its updated_at, written in
// the engine's commit of the start.
func activeAt(out string) (time.Time, error) {
	var l api.Lease
	if err := json.Unmarshal([]byte(out), &l); err != nil || l.Status != "ACTIVE" || l.UpdatedAt == nil {
		return time.Time{}, fmt.Errorf("wait's answer: %v %s", err, out)
	}
	return time.ParseInLocation("2006-01-02 15:04:05.999999", *l.UpdatedAt, time.UTC)
}
