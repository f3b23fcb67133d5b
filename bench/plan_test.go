package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"climate/workload"
)

// runPlan runs bench plan with o and returns its output.
func runPlan(t *testing.T, o PlanOptions) string {
	t.Helper()
	var out bytes.Buffer
	if err := Plan(&o, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	return out.String()
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
	stdout := runPlan(t, PlanOptions{Scales: "50:200,80:400", Windows: 20, Output: "json", Types: "host"})
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
	for _, k := range []string{"hosts", "leases", "allocations", "generate_seconds", "index_build_ms", "index_bytes_per_allocation", "earliest_summary_build_ms", "requests", "earliest_slots", "full_cloud"} {
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
		if f := s.FullCloud; f.MedianUS <= 0 || f.P99US < f.MedianUS || f.Refused != 20 {
			t.Errorf("scale %v: full cloud %+v, want all 20 refused", want, f)
		}
	}
}

func TestBenchPlanTableShowsBlazarBaseline(t *testing.T) {
	stdout := runPlan(t, PlanOptions{Scales: "100:1000", Windows: 5, Output: "table", Types: "host"})
	for _, want := range []string{"BLAZAR", "100:1000", "plain", "filtered", "earliest slot", "plain, full cloud", "0.35 s", "0.11 s", "2500"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}
