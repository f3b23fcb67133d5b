package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/plan"
	"climate/sqlite"
	"climate/workload"
)

// simulateCreated plans the benchmark's sequential requests on the book in process, booking
// each one that fits, and returns how many fit: what one client must see from the server.
func simulateCreated(b *workload.Book, windows []workload.Window) int {
	x := plan.NewIndex(b.Hosts, b.AllocationsByLease())
	created := 0
	for i, w := range windows {
		hosts, _, err := x.PlaceHosts(plan.HostRequest{Window: plan.Window{Start: w.Start, End: w.End}, Min: 10, Max: 10})
		if err != nil {
			continue
		}
		created++
		var add []climate.Allocation
		for _, h := range hosts {
			add = append(add, climate.Allocation{LeaseID: fmt.Sprintf("sim-%d", i), ResourceID: h, Start: w.Start, End: w.End})
		}
		x.Apply(nil, add)
	}
	return created
}

func checkAPIRuns(t *testing.T, rep *APIReport, clients []int, requests int) {
	t.Helper()
	if len(rep.Runs) != len(clients) {
		t.Fatalf("%d runs, want %d", len(rep.Runs), len(clients))
	}
	for i, r := range rep.Runs {
		if r.Clients != clients[i] || r.Requests != requests || r.Created+r.NoCapacity != requests {
			t.Errorf("run %d: %+v; want %d clients and %d requests, each 201 or 409", i, r, clients[i], requests)
		}
		if r.MedianMS <= 0 || r.P99MS < r.MedianMS || r.Seconds <= 0 || r.RequestsPerSecond <= 0 {
			t.Errorf("run %d: timings %+v", i, r)
		}
		if r.Created > 0 && r.CreationsPerSecond <= 0 {
			t.Errorf("run %d: %d created but %v creations/s", i, r.Created, r.CreationsPerSecond)
		}
	}
}

// With --url the benchmark posts to a running server and must see
// exactly the outcomes the planner predicts for one client.
func TestBenchAPIAgainstRunningServer(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	book := workload.Generate(40, 300)
	if err := workload.Load(ctx, st, book, nil); err != nil {
		t.Fatal(err)
	}
	st.Close()
	url := serveDataDir(t, dir)

	rep := runAPIForTest(t, APIOptions{URL: url, Requests: 15, Clients: []int{1, 3, 1}})
	checkAPIRuns(t, rep, []int{1, 3, 1}, 15)
	if rep.Server != url || rep.PeakRSSMiB != nil || rep.Hosts != 0 || rep.Kind != "plain" || rep.Runs[0].Replans != nil ||
		rep.Runs[0].WriterMSPerRequest != nil {
		t.Errorf("report: %+v", rep)
	}
	// Each run posts the same requests on the same book: the runs' leases are deleted
	// after them, so the last run, one client again, sees what the first saw.
	want := simulateCreated(book, workload.Windows(15))
	if rep.Runs[0].Created != want || rep.Runs[2].Created != want {
		t.Errorf("one client: %d then %d created, the planner predicts %d each time", rep.Runs[0].Created, rep.Runs[2].Created, want)
	}
	if rep.Runs[0].NoCapacity == 0 {
		t.Errorf("40 hosts 42%% booked should refuse some requests for 10: %+v", rep.Runs)
	}
	if _, leases, allocs := countStore(t, dir); leases != 300 || allocs != book.Allocations() {
		t.Errorf("%d leases and %d allocations in the database after the runs, want the book's 300 and %d", leases, allocs, book.Allocations())
	}
}

// The full benchmark: load, server subprocess, runs, RSS, and nothing left behind.
func TestBenchAPISubprocess(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc for the server's peak RSS")
	}
	bin := climateBinaryForTest(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	rep := runAPIForTest(t, APIOptions{Hosts: 50, Leases: 200, Requests: 20, Clients: []int{1, 2}, Exe: bin})
	book := workload.Generate(50, 200)
	checkAPIRuns(t, rep, []int{1, 2}, 20)
	if rep.Server != "subprocess" || rep.Hosts != 50 || rep.Leases != 200 || rep.Allocations != book.Allocations() {
		t.Errorf("report: %+v", rep)
	}
	if rep.PeakRSSMiB == nil || *rep.PeakRSSMiB <= 1 || rep.FirstRequestMS <= 0 {
		t.Errorf("peak RSS %v MiB, first request %v ms", rep.PeakRSSMiB, rep.FirstRequestMS)
	}
	// The servers' CPU time is measured (some ticks in 40 requests), the database's is not
	// (SQLite runs inside the server).
	var serverCPU float64
	for _, r := range rep.Runs {
		if c := r.CPUPerRequestMS; c == nil || c.Servers == nil || c.Database != nil || *c.Servers < 0 || c.Bench < 0 {
			t.Fatalf("run of %d clients: CPU per request %+v, want the servers' and none of a database", r.Clients, c)
		}
		if r.WALPerRequestKiB != nil {
			t.Errorf("run of %d clients: %v KiB of PostgreSQL WAL per request on SQLite", r.Clients, *r.WALPerRequestKiB)
		}
		// Every creation commits at least a page (4 KiB) to SQLite's WAL and writes its answer.
		if io := r.CPUPerRequestMS.ServersIO; io == nil || io.WriteCalls < 2 || io.WrittenKiB < 4 || io.ReadCalls < 1 {
			t.Errorf("run of %d clients: the servers' I/O per request %+v, want a request read, an answer and a WAL page written", r.Clients, io)
		}
		serverCPU += *r.CPUPerRequestMS.Servers
		// The CPU the run used cannot exceed what the cores had over its time, so its
		// rate cannot exceed the ceiling (give or take /proc's clock ticks).
		if c := r.CPUPerRequestMS.CoresCeiling; c == nil || r.RequestsPerSecond > 1.5**c {
			t.Errorf("run of %d clients: %.1f requests/s over a cores' ceiling of %v/s", r.Clients, r.RequestsPerSecond, c)
		}
		if r.Replans == nil || *r.Replans < 0 {
			t.Errorf("run of %d clients: re-plans %v, want the servers' count", r.Clients, r.Replans)
		}
		// Every creation is a write transaction of SQLite's one writer, which cannot be busy
		// longer than the run (give or take the scrapes around it).
		if r.WriterMSPerRequest == nil || *r.WriterMSPerRequest <= 0 || r.WritersBusy == nil || *r.WritersBusy <= 0 || *r.WritersBusy > 1.2 {
			t.Errorf("run of %d clients: writer %s ms a request, %s busy; want some time, one writer at most", r.Clients, orNone(r.WriterMSPerRequest), orNone(r.WritersBusy))
		}
		// One server: its own commits keep its index current, built once before the runs.
		if r.IndexCatchUps == nil || r.IndexRebuilds == nil || *r.IndexCatchUps != 0 || *r.IndexRebuilds != 0 {
			t.Errorf("run of %d clients: index catch-ups %v and rebuilds %v, want 0 and 0 on one server", r.Clients, r.IndexCatchUps, r.IndexRebuilds)
		}
	}
	if serverCPU == 0 {
		t.Error("the servers used no CPU time in 40 requests")
	}
	if want := simulateCreated(book, workload.Windows(20)); rep.Runs[0].Created != want {
		t.Errorf("one client: %d created, the planner predicts %d", rep.Runs[0].Created, want)
	}
	// The temporary data directory is gone, and so is the server that used it.
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left behind in TMPDIR: %v", left)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(tmp)) {
			t.Errorf("server still running: %s: %q", p, b)
		}
	}
}

func TestParseStatCPU(t *testing.T) {
	// A command may hold spaces and parentheses: fields count from its last ')'.
	stat := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 25 0 0 20 0 4 0 12345 1000 200"
	got, err := parseStatCPU([]byte(stat))
	if want := 1750 * time.Millisecond; err != nil || got != want {
		t.Errorf("parseStatCPU: %v, %v; want %v (utime 150 + stime 25 ticks)", got, err, want)
	}
	if _, err := parseStatCPU([]byte("4242 (x) S 1 2")); err == nil {
		t.Error("parseStatCPU of a short line: no error")
	}
	self, err := cpuTime("self")
	if err != nil || self <= 0 {
		t.Errorf("cpuTime(self): %v, %v", self, err)
	}
}

func TestProcIOCountsWrites(t *testing.T) {
	before, err := ProcIO("self")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 3 {
		if _, err := f.Write(make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	after, err := ProcIO("self")
	if err != nil || after.WriteCalls-before.WriteCalls < 3 || after.WrittenBytes-before.WrittenBytes < 3000 || after.ReadCalls < before.ReadCalls {
		t.Errorf("ProcIO: %+v before, %+v (%v) after 3 writes of 1,000 bytes", before, after, err)
	}
	if _, err := ProcIO("0"); err == nil {
		t.Error("ProcIO of no process: no error")
	}
}

func TestPercentileAndVmHWM(t *testing.T) {
	d := make([]time.Duration, 200)
	for i := range d {
		d[len(d)-1-i] = time.Duration(i + 1)
	}
	if med, p99 := medianP99(d); med != 100 || p99 != 198 {
		t.Errorf("median %d, p99 %d; want 100, 198 (nearest rank)", med, p99)
	}
	if got := percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("one sample: %d", got)
	}
	n, err := parseVmHWM([]byte("Name:\tclimate\nVmPeak:\t  900 kB\nVmHWM:\t   204800 kB\nVmRSS:\t 1 kB\n"))
	if err != nil || n != 200<<20 {
		t.Errorf("VmHWM = %d, %v; want %d", n, err, 200<<20)
	}
	if _, err := parseVmHWM([]byte("Name:\tclimate\n")); err == nil {
		t.Error("no VmHWM line: no error")
	}
	env := envWithoutClimate([]string{"PATH=/bin", "CLIMATE_AUTH=tokens", "HOME=/root"})
	if strings.Join(env, " ") != "PATH=/bin HOME=/root" {
		t.Errorf("env %v", env)
	}
}

// orNone prints a measured figure, or "none".
func orNone(v *float64) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprint(*v)
}
