package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/plan"
	"climate/sqlite"
	"climate/workload"
)

// runClimate runs the root command with args and returns its stdout and stderr.
func runClimate(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	err := root.Execute()
	return stdout.String(), stderr.String(), err
}

// bruteFree counts, per window, the hosts of the book free over it (and, when filtered,
// matching the workload's filter), straight from the book's leases.
func bruteFree(b *workload.Book, windows []workload.Window, filtered bool) []int {
	busy := map[string][][2]time.Time{}
	for _, l := range b.Leases {
		for _, r := range l.Reservations {
			for _, a := range r.Allocations {
				busy[a.ResourceID] = append(busy[a.ResourceID], [2]time.Time{a.Start, a.End})
			}
		}
	}
	out := make([]int, len(windows))
	for i, w := range windows {
		for _, h := range b.Hosts {
			if filtered && (h.MemoryMB < 131072 || h.Extra["node_type"] != "compute_icelake") {
				continue
			}
			free := true
			for _, iv := range busy[h.ID] {
				if iv[0].Before(w.End) && w.Start.Before(iv[1]) {
					free = false
					break
				}
			}
			if free {
				out[i]++
			}
		}
	}
	return out
}

func TestBenchPlanJSONMatchesBruteForce(t *testing.T) {
	stdout, _, err := runClimate(t, "bench", "plan", "--scales", "50:200,80:400", "--windows", "20", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	// Every documented field is present.
	var raw map[string]any
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	for _, k := range []string{"windows", "hosts_wanted", "go_version", "cpus", "scales"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	scales := raw["scales"].([]any)
	if len(scales) != 2 {
		t.Fatalf("%d scales, want 2", len(scales))
	}
	sc := scales[0].(map[string]any)
	for _, k := range []string{"hosts", "leases", "allocations", "generate_seconds", "index_build_ms", "index_bytes_per_allocation", "earliest_summary_build_ms", "requests", "earliest_slots"} {
		if _, ok := sc[k]; !ok {
			t.Errorf("scale: missing %q", k)
		}
	}
	for _, r := range sc["requests"].([]any) {
		for _, k := range []string{"kind", "median_us", "p99_us", "mean_free_hosts", "unsatisfied", "blazar_seconds"} {
			if _, ok := r.(map[string]any)[k]; !ok {
				t.Errorf("request: missing %q", k)
			}
		}
	}
	for _, k := range []string{"median_us", "p99_us", "not_found"} {
		if _, ok := sc["earliest_slots"].(map[string]any)[k]; !ok {
			t.Errorf("earliest_slots: missing %q", k)
		}
	}

	var rep planReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Windows != 20 || rep.HostsWanted != 10 {
		t.Errorf("windows %d, hosts wanted %d", rep.Windows, rep.HostsWanted)
	}
	windows := workload.Windows(20)
	for i, want := range []benchScale{{50, 200}, {80, 400}} {
		s := rep.Scales[i]
		book := workload.Generate(want.hosts, want.leases)
		if s.Hosts != want.hosts || s.Leases != want.leases || s.Allocations != book.Allocations() {
			t.Errorf("scale %d: %d hosts, %d leases, %d allocations; want %v with %d allocations", i, s.Hosts, s.Leases, s.Allocations, want, book.Allocations())
		}
		if s.IndexBuildMS <= 0 || s.IndexBytesPerAllocation <= 0 || s.SummaryBuildMS <= 0 {
			t.Errorf("scale %v: index build %v ms, %v bytes/allocation, summary build %v ms; want positive", want, s.IndexBuildMS, s.IndexBytesPerAllocation, s.SummaryBuildMS)
		}
		if _, err := os.Stat("/proc/self/status"); err == nil && s.IndexRSSMiBPerMillion == nil {
			t.Errorf("scale %v: no RSS per 1,000,000 allocations, though /proc is there", want)
		}
		if len(s.Requests) != 2 || s.Requests[0].Kind != "plain" || s.Requests[1].Kind != "filtered" {
			t.Fatalf("scale %v: requests %+v", want, s.Requests)
		}
		for k, r := range s.Requests {
			free := bruteFree(book, windows, k == 1)
			total, short := 0, 0
			for _, n := range free {
				total += n
				if n < 10 {
					short++
				}
			}
			if mean := float64(total) / float64(len(windows)); r.MeanFreeHosts < mean-0.005 || r.MeanFreeHosts > mean+0.005 {
				t.Errorf("scale %v %s: mean free hosts %v, brute force %v", want, r.Kind, r.MeanFreeHosts, mean)
			}
			if r.Unsatisfied != short {
				t.Errorf("scale %v %s: %d unsatisfied, brute force %d windows with fewer than 10 free hosts", want, r.Kind, r.Unsatisfied, short)
			}
			if r.MedianUS <= 0 || r.P99US < r.MedianUS {
				t.Errorf("scale %v %s: median %v µs, p99 %v µs", want, r.Kind, r.MedianUS, r.P99US)
			}
			if r.BlazarSeconds != nil {
				t.Errorf("scale %v: Blazar has no baseline there, got %v", want, *r.BlazarSeconds)
			}
		}
		if e := s.EarliestSlots; e.MedianUS <= 0 || e.P99US < e.MedianUS || e.NotFound < 0 || e.NotFound > 20 {
			t.Errorf("scale %v: earliest slots %+v", want, e)
		}
	}
}

func TestBenchPlanTableShowsBlazarBaseline(t *testing.T) {
	stdout, _, err := runClimate(t, "bench", "plan", "--scales", "100:1000", "--windows", "5")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"BLAZAR", "100:1000", "plain", "filtered", "earliest slot", "0.35 s", "0.11 s", "2500"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "plan", "--scales", "100"},
		{"bench", "plan", "--scales", "0:10"},
		{"bench", "plan", "--scales", "a:b"},
		{"bench", "plan", "--windows", "0"},
		{"bench", "plan", "-o", "yaml"},
		{"bench", "api", "-o", "yaml"},
		{"bench", "api", "--requests", "0"},
		{"bench", "api", "--clients", "0"},
		{"bench", "api", "--kind", "gpu"},
		{"bench", "api", "--url", "localhost:1234"},
		{"bench", "load", "--hosts", "0", "--data-dir", t.TempDir()},
	} {
		_, _, err := runClimate(t, args...)
		if err == nil {
			t.Errorf("%v: no error", args)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error is not one line: %q", args, err)
		}
	}
}

func TestBenchLoadWritesBookAndRefusesSecondBook(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, err := runClimate(t, "bench", "load", "--hosts", "30", "--leases", "100", "--data-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	book := workload.Generate(30, 100)
	if want := fmt.Sprintf("Loaded 30 hosts, 100 leases, %d host allocations into %s in ", book.Allocations(), filepath.Join(dir, "climate.db")); !strings.HasPrefix(stdout, want) {
		t.Errorf("summary: %q", stdout)
	}
	if !strings.Contains(stderr, "loading leases 100/100 (100%)") {
		t.Errorf("progress: %q", stderr)
	}
	hosts, leases, allocs := countStore(t, dir)
	if hosts != 30 || leases != 100 || allocs != book.Allocations() {
		t.Fatalf("database holds %d hosts, %d leases, %d allocations; want 30, 100, %d", hosts, leases, allocs, book.Allocations())
	}

	_, _, err = runClimate(t, "bench", "load", "--hosts", "30", "--leases", "100", "--data-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "already holds 30 hosts") || !strings.Contains(err.Error(), "fresh --data-dir") {
		t.Fatalf("second load: %v", err)
	}
	if h, l, _ := countStore(t, dir); h != 30 || l != 100 {
		t.Fatalf("after the refused load: %d hosts, %d leases", h, l)
	}
}

func countStore(t *testing.T, dir string) (hosts, leases, allocs int) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.View(ctx, func(tx climate.Tx) error {
		h, err := tx.ListHosts(ctx)
		if err != nil {
			return err
		}
		l, err := tx.ListLeases(ctx, climate.LeaseFilter{})
		if err != nil {
			return err
		}
		a, err := tx.ListAllocations(ctx, climate.AllocationFilter{})
		hosts, leases, allocs = len(h), len(l), len(a)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hosts, leases, allocs
}

// simulateCreated plans the benchmark's sequential requests on the book in process, booking
// each one that fits, and returns how many fit: what one client must see from the server.
func simulateCreated(b *workload.Book, windows []workload.Window) int {
	x := plan.NewIndex(b.Hosts, bookAllocs(b))
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

func checkAPIRuns(t *testing.T, rep *apiReport, clients []int, requests int) {
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

// With --url the benchmark posts to a running server (here in process) and must see
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
	s := startServer(t, serveOptions{dataDir: dir})

	stdout, _, err := runClimate(t, "bench", "api", "--url", s.url, "--requests", "15", "--clients", "1,3", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep apiReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	checkAPIRuns(t, &rep, []int{1, 3}, 15)
	if rep.Server != s.url || rep.PeakRSSMiB != nil || rep.Hosts != 0 || rep.Kind != "plain" {
		t.Errorf("report: %+v", rep)
	}
	if want := simulateCreated(book, workload.Windows(15)); rep.Runs[0].Created != want {
		t.Errorf("one client: %d created, the planner predicts %d", rep.Runs[0].Created, want)
	}
	if rep.Runs[0].NoCapacity == 0 && rep.Runs[1].NoCapacity == 0 {
		t.Errorf("40 hosts 42%% booked should refuse some requests for 10: %+v", rep.Runs)
	}
	// The leases are in the server: 300 from the book plus those created, named bench-N.
	_, leases, _ := countStore(t, dir)
	if want := 300 + rep.Runs[0].Created + rep.Runs[1].Created; leases != want {
		t.Errorf("%d leases in the database, want %d", leases, want)
	}
}

// The full benchmark: load, server subprocess, runs, RSS, and nothing left behind.
func TestBenchAPISubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the climate binary")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc for the server's peak RSS")
	}
	bin := filepath.Join(t.TempDir(), "climate")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "api", "--hosts", "50", "--leases", "200", "--requests", "20", "--clients", "1,2", "-o", "json")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep apiReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	book := workload.Generate(50, 200)
	checkAPIRuns(t, &rep, []int{1, 2}, 20)
	if rep.Server != "subprocess" || rep.Hosts != 50 || rep.Leases != 200 || rep.Allocations != book.Allocations() {
		t.Errorf("report: %+v", rep)
	}
	if rep.PeakRSSMiB == nil || *rep.PeakRSSMiB <= 1 || rep.FirstRequestMS <= 0 {
		t.Errorf("peak RSS %v MiB, first request %v ms", rep.PeakRSSMiB, rep.FirstRequestMS)
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
