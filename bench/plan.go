package bench

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"text/tabwriter"
	"time"

	"climate"
	"climate/plan"
	"climate/query"
	"climate/workload"
)

// PlanOptions are bench plan's settings (its flags).
type PlanOptions struct {
	Scales      string
	Windows     int
	Output      string
	Types       string
	FloatingIPs string
}

// Plan runs bench plan and writes its report to stdout as o.Output says (table or json).
func Plan(o *PlanOptions, stdout, stderr io.Writer) error {
	if err := checkOutput(o.Output); err != nil {
		return err
	}
	scales, err := parseScales(o.Scales)
	if err != nil {
		return err
	}
	if o.Windows <= 0 {
		return fmt.Errorf("--windows %d: want at least 1", o.Windows)
	}
	types, err := parseBenchTypes(o.Types)
	if err != nil {
		return err
	}
	var fips []benchScale
	if types.floatingIP {
		if fips, err = parseScales(o.FloatingIPs); err != nil {
			return fmt.Errorf("--floatingips %q: want ADDRESSES:ALLOCATIONS[,…] with ADDRESSES > 0, e.g. 10000:50000", o.FloatingIPs)
		}
	}
	rep, err := runBenchPlan(scales, o.Windows, types, fips, stderr)
	if err != nil {
		return err
	}
	if o.Output == "json" {
		return writeJSON(stdout, rep)
	}
	return writePlanTable(stdout, rep)
}

// planReport is bench plan's result (its JSON output).
type planReport struct {
	Windows     int               `json:"windows"`
	HostsWanted int               `json:"hosts_wanted"`
	GoVersion   string            `json:"go_version"`
	CPUs        int               `json:"cpus"`
	Scales      []planScaleReport `json:"scales"`
	// Instances and FloatingIPs are the instance-slot and floating-IP cases
	// (bench_plan_slots.go), empty when --types leaves them out.
	Instances   []planInstanceScaleReport `json:"instances"`
	FloatingIPs []planFloatingIPReport    `json:"floating_ips"`
}

type planScaleReport struct {
	Hosts       int `json:"hosts"`
	Leases      int `json:"leases"`
	Allocations int `json:"allocations"`
	// GenerateSeconds is the time to build the book (not part of Climate's work).
	GenerateSeconds float64 `json:"generate_seconds"`
	IndexBuildMS    float64 `json:"index_build_ms"`
	// IndexBytesPerAllocation is the heap the index holds beyond the book, per allocation.
	IndexBytesPerAllocation float64 `json:"index_bytes_per_allocation"`
	// IndexRSSMiBPerMillion is how much the process's peak resident memory grew to build
	// the index and serve the requests (the earliest-slot summaries included), in MiB per
	// 1,000,000 allocations; absent where /proc is not.
	IndexRSSMiBPerMillion *float64 `json:"index_rss_mib_per_million_allocations,omitempty"`
	// SummaryBuildMS is the first earliest-slot search of the plain filter, which builds
	// its free-time summary (plan/freetime.go); untimed in EarliestSlots' figures.
	SummaryBuildMS float64            `json:"earliest_summary_build_ms"`
	Requests       []planKindReport   `json:"requests"`
	EarliestSlots  planEarliestReport `json:"earliest_slots"`
	FullCloud      planFullReport     `json:"full_cloud"`
}

// planFullReport is plain requests on a full cloud (benchFullCloud), all refused.
type planFullReport struct {
	MedianUS float64 `json:"median_us"`
	P99US    float64 `json:"p99_us"`
	Refused  int     `json:"refused"`
}

type planKindReport struct {
	Kind     string  `json:"kind"` // plain or filtered
	MedianUS float64 `json:"median_us"`
	P99US    float64 `json:"p99_us"`
	// MeanFreeHosts is the mean number of matching hosts free over a window.
	MeanFreeHosts float64 `json:"mean_free_hosts"`
	// Unsatisfied counts windows with fewer than 10 free matching hosts.
	Unsatisfied int `json:"unsatisfied"`
	// BlazarSeconds is upstream Blazar's median for the same matching, where measured.
	BlazarSeconds *float64 `json:"blazar_seconds"`
}

type planEarliestReport struct {
	MedianUS float64 `json:"median_us"`
	P99US    float64 `json:"p99_us"`
	// NotFound counts windows with no slot for 10 hosts within 90 days of the window's start.
	NotFound int `json:"not_found"`
}

// filteredQuery is the workload's filtered request: both property queries combined.
func filteredQuery() (*query.Query, error) {
	hq, err := query.Parse(workload.FilteredHypervisorProperties)
	if err != nil {
		return nil, err
	}
	rq, err := query.Parse(workload.FilteredResourceProperties)
	if err != nil {
		return nil, err
	}
	return query.And(hq, rq), nil
}

func runBenchPlan(scales []benchScale, n int, types benchTypes, fips []benchScale, stderr io.Writer) (*planReport, error) {
	q, err := filteredQuery()
	if err != nil {
		return nil, err
	}
	rep := &planReport{Windows: n, HostsWanted: workload.HostsWanted, GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
	windows := workload.Windows(n)
	p := &progressLine{w: stderr}
	defer p.clear()
	for _, sc := range scales {
		if !types.host {
			break
		}
		r, err := benchPlanScale(sc, windows, q, p)
		if err != nil {
			return nil, err
		}
		rep.Scales = append(rep.Scales, *r)
	}
	for _, sc := range scales {
		if !types.instance {
			break
		}
		r, err := benchInstanceScale(sc, n, p)
		if err != nil {
			return nil, err
		}
		rep.Instances = append(rep.Instances, *r)
	}
	for _, sc := range fips {
		r, err := benchFloatingIPs(sc, n, p)
		if err != nil {
			return nil, err
		}
		rep.FloatingIPs = append(rep.FloatingIPs, *r)
	}
	return rep, nil
}

func benchPlanScale(sc benchScale, windows []workload.Window, q *query.Query, p *progressLine) (*planScaleReport, error) {
	p.set("%s: generating the book", sc)
	t0 := time.Now()
	book := workload.Generate(sc.hosts, sc.leases)
	allocs := book.AllocationsByHost() // as a server reads them, to build its index
	rep := &planScaleReport{Hosts: sc.hosts, Leases: sc.leases, Allocations: len(allocs),
		GenerateSeconds: round(time.Since(t0).Seconds(), 3)}

	p.set("%s: building the index", sc)
	var before, after runtime.MemStats
	settleHeap()
	debug.FreeOSMemory() // so the RSS below is what is live, and the build's growth shows
	rssBefore, rssErr := residentBytes("VmRSS:")
	resetPeakRSS()
	runtime.ReadMemStats(&before)
	t0 = time.Now()
	x := plan.NewIndex(book.Hosts, allocs)
	rep.IndexBuildMS = millis(time.Since(t0))
	settleHeap()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(book) // the book and allocs are live on both sides of the measurement
	runtime.KeepAlive(allocs)
	if len(allocs) > 0 {
		rep.IndexBytesPerAllocation = round(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(len(allocs)), 1)
	}

	match := func(h *climate.Host) bool { return q.Match(h.Property) }
	for _, kind := range []struct {
		name  string
		match func(*climate.Host) bool
		key   string
	}{{"plain", nil, ""}, {"filtered", match, q.String()}} {
		p.set("%s: planning %s requests", sc, kind.name)
		request := func(w workload.Window) plan.HostRequest {
			return plan.HostRequest{Window: plan.Window{Start: w.Start, End: w.End}, Min: workload.HostsWanted, Max: workload.HostsWanted,
				Match: kind.match, FilterKey: kind.key}
		}
		// The first request of a filter evaluates it on every host and caches the result, as
		// a running server's first request after an inventory change does; keep it untimed.
		_, _, _ = x.PlaceHosts(request(windows[0]))
		runtime.GC()
		lat := make([]time.Duration, len(windows))
		r := planKindReport{Kind: kind.name, BlazarSeconds: baseline(sc, kind.name)}
		for i, w := range windows {
			req := request(w)
			t0 := time.Now()
			_, _, err := x.PlaceHosts(req)
			lat[i] = time.Since(t0)
			if err != nil {
				if climate.ErrorCode(err) != climate.CodeConflict {
					return nil, fmt.Errorf("%s, window %d: %w", sc, i, err)
				}
				r.Unsatisfied++
			}
		}
		free := 0
		for _, w := range windows {
			free += len(x.FreeHosts(request(w)))
		}
		med, p99 := medianP99(lat)
		r.MedianUS, r.P99US = micros(med), micros(p99)
		r.MeanFreeHosts = round(float64(free)/float64(len(windows)), 2)
		rep.Requests = append(rep.Requests, r)
	}

	p.set("%s: earliest-slot searches", sc)
	slotRequest := func(w workload.Window) plan.SlotRequest {
		return plan.SlotRequest{Count: workload.HostsWanted, Duration: w.End.Sub(w.Start), After: w.Start,
			Deadline: w.Start.Add(90 * 24 * time.Hour), Limit: 3}
	}
	// The first search builds the filter's free-time summary, as a server's first search
	// after a rebuild does: timed apart.
	t0 = time.Now()
	x.EarliestSlots(slotRequest(windows[0]))
	rep.SummaryBuildMS = millis(time.Since(t0))
	runtime.GC()
	lat := make([]time.Duration, len(windows))
	for i, w := range windows {
		req := slotRequest(w)
		t0 := time.Now()
		slots := x.EarliestSlots(req)
		lat[i] = time.Since(t0)
		if len(slots) == 0 {
			rep.EarliestSlots.NotFound++
		}
	}
	med, p99 := medianP99(lat)
	rep.EarliestSlots.MedianUS, rep.EarliestSlots.P99US = micros(med), micros(p99)

	// Read before the full cloud's bookings (one more on every host, and the summaries
	// they change) join the index: the figure is the book's.
	if peak, err := residentBytes("VmHWM:"); err == nil && rssErr == nil && len(allocs) > 0 {
		v := round(float64(peak-rssBefore)/(1<<20)*1e6/float64(len(allocs)), 1)
		rep.IndexRSSMiBPerMillion = &v
	}

	p.set("%s: requests on a full cloud", sc)
	var err error
	if rep.FullCloud, err = benchFullCloud(x, book.Hosts, windows); err != nil {
		return nil, fmt.Errorf("%s: %w", sc, err)
	}
	runtime.KeepAlive(x)
	return rep, nil
}

// benchFullCloud times plain requests on a full cloud: every host is booked (one lease
// each) over a span a year after the book, and each window, moved into that span, is
// refused. A refusal must not cost a visit to every host (plan/scarce.go).
func benchFullCloud(x *plan.Index, hosts []climate.Host, windows []workload.Window) (planFullReport, error) {
	first, last := windows[0].Start, windows[0].End
	for _, w := range windows {
		first, last = climate.Earlier(first, w.Start), climate.Later(last, w.End)
	}
	shift := 365 * 24 * time.Hour
	from, until := first.Add(shift), last.Add(shift)
	fill := make([]climate.Allocation, len(hosts))
	for i, h := range hosts {
		fill[i] = climate.Allocation{ID: "full-" + h.ID, LeaseID: "full-" + h.ID, ResourceID: h.ID, Start: from, End: until}
	}
	x.Apply(nil, fill)
	defer x.Apply(fill, nil)
	var r planFullReport
	lat := make([]time.Duration, len(windows))
	for i, w := range windows {
		req := plan.HostRequest{Window: plan.Window{Start: w.Start.Add(shift), End: w.End.Add(shift)},
			Min: workload.HostsWanted, Max: workload.HostsWanted}
		t0 := time.Now()
		_, _, err := x.PlaceHosts(req)
		lat[i] = time.Since(t0)
		if climate.ErrorCode(err) != climate.CodeConflict {
			return r, fmt.Errorf("window %d on a full cloud: %v, not refused", i, err)
		}
		r.Refused++
	}
	med, p99 := medianP99(lat)
	r.MedianUS, r.P99US = micros(med), micros(p99)
	return r, nil
}

// settleHeap collects garbage until the heap holds only live objects: twice, because a
// collection only moves sync.Pool contents to a victim cache that the next one frees.
func settleHeap() {
	runtime.GC()
	runtime.GC()
}

func writePlanTable(w io.Writer, rep *planReport) error {
	if len(rep.Scales) == 0 {
		return writePlanSlotsTables(w, rep)
	}
	fmt.Fprintf(w, "Planner in process: %d request windows per scale, %d hosts each (%s, %d CPUs)\n\n",
		rep.Windows, rep.HostsWanted, rep.GoVersion, rep.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCALE H:R\tALLOCATIONS\tBOOK GENERATION\tINDEX BUILD\tINDEX BYTES/ALLOCATION\tRSS/1M ALLOCATIONS\tEARLIEST SUMMARY BUILD")
	for _, s := range rep.Scales {
		rss := "-"
		if s.IndexRSSMiBPerMillion != nil {
			rss = fmt.Sprintf("%.0f MiB", *s.IndexRSSMiBPerMillion)
		}
		fmt.Fprintf(tw, "%d:%d\t%d\t%.2f s\t%.1f ms\t%.0f\t%s\t%.1f ms\n", s.Hosts, s.Leases, s.Allocations, s.GenerateSeconds, s.IndexBuildMS,
			s.IndexBytesPerAllocation, rss, s.SummaryBuildMS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCALE H:R\tREQUEST\tMEDIAN\tP99\tFREE HOSTS/WINDOW\tUNSATISFIED\tBLAZAR (MEDIAN)\tSPEEDUP")
	for _, s := range rep.Scales {
		sc := benchScale{s.Hosts, s.Leases}
		for _, r := range s.Requests {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f\t%d/%d\t%s\t%s\n", sc, r.Kind, formatMicros(r.MedianUS), formatMicros(r.P99US), r.MeanFreeHosts,
				r.Unsatisfied, rep.Windows, formatBlazar(r.BlazarSeconds), formatSpeedup(r.BlazarSeconds, time.Duration(r.MedianUS*float64(time.Microsecond))))
		}
		e := s.EarliestSlots
		fmt.Fprintf(tw, "%s\tearliest slot\t%s\t%s\t-\t%d/%d\t-\t-\n", sc, formatMicros(e.MedianUS), formatMicros(e.P99US), e.NotFound, rep.Windows)
		f := s.FullCloud
		fmt.Fprintf(tw, "%s\tplain, full cloud\t%s\t%s\t0\t%d/%d\t-\t-\n", sc, formatMicros(f.MedianUS), formatMicros(f.P99US), f.Refused, rep.Windows)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nINDEX BUILD: plan.NewIndex over the book's allocations listed as a store lists them to a server (by host, then start).")
	fmt.Fprintln(w, "RSS/1M ALLOCATIONS: growth of the process's peak resident memory from before the index build to after the searches (before the full cloud's), per 1,000,000 allocations.")
	fmt.Fprintln(w, "EARLIEST SUMMARY BUILD: the first earliest-slot search, which builds the free-time summary (not in the earliest slot figures).")
	fmt.Fprintln(w, "PLAIN, FULL CLOUD: the plain requests moved to a span over which every host is booked, so each is refused.")
	fmt.Fprintln(w, "UNSATISFIED: windows with fewer than 10 free matching hosts (earliest slot: no slot within 90 days).")
	fmt.Fprintln(w, "BLAZAR: upstream Blazar's median CPU time for the same matching (WORKLOAD.md), where measured.")
	return writePlanSlotsTables(w, rep)
}

// formatMicros shows a time given in µs in µs below a millisecond, else in ms.
func formatMicros(us float64) string {
	if us < 1000 {
		return fmt.Sprintf("%.1f µs", us)
	}
	return fmt.Sprintf("%.2f ms", us/1000)
}
