package bench

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"climate/workload"
)

func writeAPITable(w io.Writer, rep *APIReport) error {
	sets := replicaSets(rep.Runs)
	if rep.Server == "subprocess" {
		on := "climate serve subprocess on SQLite"
		if rep.Database != "" {
			on = fmt.Sprintf("%d climate serve subprocess(es) on PostgreSQL (%s), clients round-robin", rep.Replicas, rep.Database)
			if len(sets) > 1 {
				on = fmt.Sprintf("climate serve subprocesses on PostgreSQL (%s), %s of them in turn, clients round-robin", rep.Database, joinInts(sets, ", then "))
			}
		}
		book, allocs := "", "host allocations"
		if rep.Type == "instance" {
			book, allocs = "instance ", "slot and host allocations"
		}
		fmt.Fprintf(w, "Lease creation through the HTTP API: %s, %sbook of %d hosts, %d leases, %d %s (loaded in %.1f s)\n",
			on, book, rep.Hosts, rep.Leases, rep.Allocations, allocs, rep.LoadSeconds)
		if rep.FloatingIPs > 0 {
			fmt.Fprintf(w, "Beside it %d floating IPs on network %s\n", rep.FloatingIPs, workload.FloatingIPNetwork(0))
		}
	} else {
		fmt.Fprintf(w, "Lease creation through the HTTP API of %s\n", rep.Server)
	}
	switch rep.Type {
	case "instance":
		fmt.Fprintf(w, "Requests: virtual:instance, %s, the instance workload's next request each (1–8 slots, mixed affinity, 1–72 h)\n", rep.Kind)
	case "floatingip":
		fmt.Fprintf(w, "Requests: virtual:floatingip, %d addresses of network %s each, one new workload window per request\n", workload.HostsWanted, workload.FloatingIPNetwork(0))
	default:
		fmt.Fprintf(w, "Requests: %s, %d hosts each, one new workload window per request\n", rep.Kind, workload.HostsWanted)
	}
	fmt.Fprintln(w, "Every run posts the same requests on the same book: the leases a run created are deleted after it")
	if rep.Database != "" {
		fmt.Fprintln(w, "PostgreSQL's tables are vacuumed and analyzed after the load and after each run's deletions, untimed")
	}
	if rep.DatabaseLink != "" {
		fmt.Fprintf(w, "Database behind a simulated %.1f ms round trip: %s\n", rep.DatabaseDelayMS, rep.DatabaseLink)
	}
	if rep.Limits {
		fmt.Fprintln(w, "The posting project has limits and a budget (--limits): every creation runs the fair-use checks")
	}
	if rep.StartSeconds > 0 {
		fmt.Fprintf(w, "Server start to listening (it reads the book and builds the availability index first): %.2f s\n", rep.StartSeconds)
	}
	fmt.Fprintf(w, "First request (dry run, on the fresh server): %.1f ms\n\n", rep.FirstRequestMS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	col := func(v string) string { // the REPLICAS column, with several sets only
		if len(sets) > 1 {
			return v + "\t"
		}
		return ""
	}
	fmt.Fprintln(tw, col("REPLICAS")+"CLIENTS\tREQUESTS\tCREATED (201)\tNO CAPACITY (409)\tMEDIAN\tP99\tCREATIONS/S\tREQUESTS/S\tBLAZAR (MEDIAN, 1 CLIENT)")
	for _, r := range rep.Runs {
		var blazar *float64
		if r.Clients == 1 {
			blazar = rep.BlazarCreateSeconds
		}
		full := strconv.Itoa(r.NoCapacity)
		if r.GaveUp > 0 {
			full += fmt.Sprintf(" (%d gave up on concurrent bookings)", r.GaveUp)
		}
		fmt.Fprintf(tw, "%s%d\t%d\t%d\t%s\t%.2f ms\t%.2f ms\t%.1f\t%.1f\t%s\n", col(strconv.Itoa(r.Replicas)), r.Clients, r.Requests, r.Created, full,
			r.MedianMS, r.P99MS, r.CreationsPerSecond, r.RequestsPerSecond, formatBlazar(blazar))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if sc := rep.Scaling; sc != nil {
		fmt.Fprintln(w)
		if r := sc.Clients; r != nil {
			fmt.Fprintf(w, "Creations/s with %d clients over %d (on %s): %.2f×\n", r.Of, r.Over, plural(r.At, "replica"), r.Ratio)
		}
		if r := sc.Replicas; r != nil {
			fmt.Fprintf(w, "Creations/s with %s over %d (at %s): %.2f×\n", plural(r.Of, "replica"), r.Over, plural(r.At, "client"), r.Ratio)
		}
	}
	writeCPUTable(w, rep.Runs, len(sets) > 1)
	writeWAL(w, rep.Runs, len(sets) > 1)
	writeReplans(w, rep.Runs, len(sets) > 1)
	switch {
	case rep.WriteRoundTrips > 0:
		fmt.Fprintf(w, "\nRound trips to the database per write: %.2f, over %d writes (the creations and the servers' own) in %d transactions (%.2f writes a transaction: group commit)\n",
			rep.WriteRoundTrips, rep.Writes, rep.WriteTransactions, float64(rep.Writes)/float64(rep.WriteTransactions))
	case rep.WriteTransactions > 0:
		fmt.Fprintf(w, "\nWrites a transaction: %.2f, over %d writes (the creations and the server's own) in %d transactions (group commit)\n",
			float64(rep.Writes)/float64(rep.WriteTransactions), rep.Writes, rep.WriteTransactions)
	}
	if len(rep.ReplicaPeakRSSMiB) > 1 {
		var each []string
		for _, v := range rep.ReplicaPeakRSSMiB {
			each = append(each, fmt.Sprintf("%.1f", v))
		}
		fmt.Fprintf(w, "\nServer peak RSS (VmHWM) per replica: %s MiB\n", strings.Join(each, ", "))
	} else if rep.PeakRSSMiB != nil {
		fmt.Fprintf(w, "\nServer peak RSS (VmHWM): %.1f MiB\n", *rep.PeakRSSMiB)
	}
	return nil
}

// replicaSets lists the replica counts of the runs, in order.
func replicaSets(runs []apiRunReport) []int {
	var out []int
	for _, r := range runs {
		if !slices.Contains(out, r.Replicas) {
			out = append(out, r.Replicas)
		}
	}
	return out
}

func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, sep)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeWAL prints what each run's requests made PostgreSQL write to its WAL.
func writeWAL(w io.Writer, runs []apiRunReport, replicas bool) {
	writeRunFigures(w, runs, replicas, "PostgreSQL's WAL per request (the whole cluster's, pg_current_wal_insert_lsn)", func(r apiRunReport) string {
		if r.WALPerRequestKiB == nil {
			return ""
		}
		return fmt.Sprintf("%.1f KiB", *r.WALPerRequestKiB)
	})
}

// writeReplans prints, when the servers told, how many of each run's commits lost a race
// to a concurrent writer and were planned again, the writers' time a request and how busy
// they were, and how many times the servers' indexes were caught up and rebuilt.
func writeReplans(w io.Writer, runs []apiRunReport, replicas bool) {
	writeRunFigures(w, runs, replicas, "Commits planned again after losing a race to a concurrent writer (climate_commit_conflicts_total)", func(r apiRunReport) string {
		if r.Replans == nil {
			return ""
		}
		return strconv.Itoa(*r.Replans)
	})
	writeRunFigures(w, runs, replicas, "The servers' writers' time a request, and how many were busy on average (climate_store_writer_busy_seconds_total; SQLite has one writer: busy near 1, it bounds the rate)", func(r apiRunReport) string {
		if r.WriterMSPerRequest == nil || r.WritersBusy == nil {
			return ""
		}
		return fmt.Sprintf("%.2f ms, %.2f busy", *r.WriterMSPerRequest, *r.WritersBusy)
	})
	writeRunFigures(w, runs, replicas, "The servers' index refreshes to other replicas' commits, from the log and whole (climate_index_refreshes_total)", func(r apiRunReport) string {
		if r.IndexCatchUps == nil || r.IndexRebuilds == nil {
			return ""
		}
		return fmt.Sprintf("%d and %d", *r.IndexCatchUps, *r.IndexRebuilds)
	})
}

// writeRunFigures prints one line titled title with each run's figure, skipping runs
// whose figure is "" (not measured), and nothing when none was.
func writeRunFigures(w io.Writer, runs []apiRunReport, replicas bool, title string, figure func(apiRunReport) string) {
	var each []string
	for _, r := range runs {
		f := figure(r)
		if f == "" {
			continue
		}
		run := plural(r.Clients, "client")
		if replicas {
			run = plural(r.Replicas, "replica") + ", " + run
		}
		each = append(each, run+" "+f)
	}
	if len(each) > 0 {
		fmt.Fprintf(w, "\n%s: %s\n", title, strings.Join(each, ", "))
	}
}

// writeCPUTable prints what each run's requests cost in CPU time, and the servers'
// system calls, when /proc told.
func writeCPUTable(w io.Writer, runs []apiRunReport, replicas bool) {
	ms := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f ms", *v)
	}
	ceiling := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f/s", *v)
	}
	writeRunsTable(w, runs, replicas, fmt.Sprintf("CPU time per request, from /proc (PostgreSQL's when it runs on this host), and the requests/s\n"+
		"this host's %d cores would answer at those times if they did nothing else (when everything runs here):", runtime.NumCPU()),
		"SERVERS\tPOSTGRESQL\tTHIS BENCHMARK\tCORES' CEILING", func(c *cpuPerRequest) string {
			return fmt.Sprintf("%s\t%s\t%.2f ms\t%s", ms(c.Servers), ms(c.Database), c.Bench, ceiling(c.CoresCeiling))
		})
	writeRunsTable(w, runs, replicas, "The servers' system calls per request, from /proc/PID/io (files and sockets; the machine's load does not move them):",
		"READ CALLS\tWRITE CALLS\tWRITTEN", func(c *cpuPerRequest) string {
			if c.ServersIO == nil {
				return ""
			}
			return fmt.Sprintf("%.1f\t%.1f\t%.1f KiB", c.ServersIO.ReadCalls, c.ServersIO.WriteCalls, c.ServersIO.WrittenKiB)
		})
}

// writeRunsTable prints a table of one line a run, of what row says of its per-request
// figures (nothing when it returns ""), under title; nothing at all without a line.
func writeRunsTable(w io.Writer, runs []apiRunReport, replicas bool, title, header string, row func(*cpuPerRequest) string) {
	var lines []string
	for _, r := range runs {
		if r.CPUPerRequestMS == nil {
			continue
		}
		cells := row(r.CPUPerRequestMS)
		if cells == "" {
			continue
		}
		run := plural(r.Clients, "client")
		if replicas {
			run = plural(r.Replicas, "replica") + ", " + run
		}
		lines = append(lines, "  "+run+"\t"+cells)
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\n"+title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  RUN\t"+header)
	for _, l := range lines {
		fmt.Fprintln(tw, l)
	}
	tw.Flush()
}
