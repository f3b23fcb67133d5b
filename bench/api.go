package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"climate"
	"climate/workload"
)

// APIOptions are bench api's settings (its flags).
type APIOptions struct {
	Hosts, Leases, Requests int
	Clients                 []int
	URL, Token, Kind        string
	// Type is the reservation type posted: host, instance or floatingip; Addresses the
	// floating IPs registered for floatingip.
	Type      string
	Addresses int
	Output    string
	// Database, when set, is a PostgreSQL URL: the book is loaded there and the replica
	// servers share it.
	Database string
	// Replicas are the numbers of server subprocesses to run, one set after the other on
	// the same database, each set timed with every client count.
	Replicas []int
	// DatabaseDelay, when set, puts the servers in a network namespace of their own whose
	// PostgreSQL connections cross a link with this round trip (netem.go).
	DatabaseDelay time.Duration
	// Limits sets generous limits and a budget on the posting project, so every
	// creation runs the fair-use checks without being refused.
	Limits bool
	// Exe is the climate binary run as "serve"; empty: this process's executable.
	Exe string
	// Open opens the store the book is loaded into: PostgreSQL at Database, else SQLite
	// in a data directory; it returns the store and a description for messages.
	Open StoreOpener
	// link names the network of DatabaseDelay; zero: benchLink (tests use their own).
	link linkNames
}

// StoreOpener opens a database as "climate serve --database … --data-dir …" would.
type StoreOpener func(ctx context.Context, database, dataDir string) (climate.Store, string, error)

// APIReport is bench api's result (its JSON output).
type APIReport struct {
	// Server is "subprocess" (started by the benchmark) or the --url given.
	Server string `json:"server"`
	// Database is the PostgreSQL URL (password masked) the subprocesses share, "" for SQLite.
	Database string `json:"database,omitempty"`
	// Replicas is the number of server subprocesses (the largest set's with several
	// --replicas); clients are spread round-robin.
	Replicas int `json:"replicas"`
	// DatabaseDelayMS is the round trip added between the servers and the database
	// (--database-delay), and DatabaseLink how.
	DatabaseDelayMS float64 `json:"database_delay_ms,omitempty"`
	DatabaseLink    string  `json:"database_link,omitempty"`
	// Limits is set when the posting project had limits and a budget (--limits).
	Limits bool `json:"limits,omitempty"`
	// Hosts, Leases and Allocations describe the book loaded (0 with --url): blazar-90d's
	// for host and floatingip, the instance workload's (slot and whole-host allocations)
	// for instance.
	Hosts       int     `json:"hosts"`
	Leases      int     `json:"leases"`
	Allocations int     `json:"allocations"`
	LoadSeconds float64 `json:"load_seconds"`
	// Type is the reservation type posted (host, instance or floatingip), Kind plain or
	// filtered (host and instance).
	Type string `json:"type"`
	Kind string `json:"kind"`
	// FloatingIPs is the number of addresses registered beside the book (floatingip).
	FloatingIPs int `json:"floating_ips,omitempty"`
	// StartSeconds is the longest time a server took from its start to listening: it
	// reads the book and builds the availability index first.
	StartSeconds float64 `json:"start_seconds,omitempty"`
	// FirstRequestMS is an untimed dry-run creation sent before the runs, the first
	// request the fresh server answers (it built its availability index before
	// listening; with --url, a running server may still build it then).
	FirstRequestMS float64 `json:"first_request_ms"`
	// PeakRSSMiB is the server's peak resident memory (VmHWM) after the runs, the largest
	// of the replicas'; null with --url.
	PeakRSSMiB *float64 `json:"peak_rss_mib"`
	// ReplicaPeakRSSMiB is each replica's peak resident memory (of the largest set).
	ReplicaPeakRSSMiB []float64 `json:"replica_peak_rss_mib,omitempty"`
	// Writes is how many writes the servers committed over every run (the creations and
	// the servers' own writes: delivery cursors, events), in WriteTransactions database
	// transactions (group commit runs several in one), and WriteRoundTrips how many round
	// trips to PostgreSQL a write took on average (its transaction's shared by its
	// writes), BEGIN and COMMIT included; zero on SQLite. None with --url.
	Writes            int     `json:"writes,omitempty"`
	WriteTransactions int     `json:"write_transactions,omitempty"`
	WriteRoundTrips   float64 `json:"write_round_trips,omitempty"`
	// BlazarCreateSeconds is upstream Blazar's median for a whole plain lease creation at
	// this scale (one client), where WORKLOAD.md gives one.
	BlazarCreateSeconds *float64       `json:"blazar_create_seconds"`
	Runs                []apiRunReport `json:"runs"`
	// Scaling compares the runs' creation rates, when there are several.
	Scaling *apiScaling `json:"scaling,omitempty"`
}

type apiRunReport struct {
	// Replicas is the number of servers of the run (0 with --url).
	Replicas   int `json:"replicas,omitempty"`
	Clients    int `json:"clients"`
	Requests   int `json:"requests"`
	Created    int `json:"created"`     // 201
	NoCapacity int `json:"no_capacity"` // 409
	// GaveUp counts the 409s that say the hosts found kept being booked by concurrent
	// requests (the server's re-plan attempts ran out), a subset of NoCapacity.
	GaveUp int `json:"gave_up"`
	// CPUPerRequestMS is what each answered request cost in CPU time, from /proc (absent
	// without it).
	CPUPerRequestMS *cpuPerRequest `json:"cpu_per_request_ms,omitempty"`
	// Replans counts the run's commits that lost a race to a concurrent writer and were
	// planned again (the servers' climate_commit_conflicts_total; absent with --url).
	Replans *int `json:"replans,omitempty"`
	// IndexCatchUps and IndexRebuilds count the run's refreshes of the servers'
	// availability indexes to what the other replicas wrote: from the allocation log, or
	// whole (the servers' climate_index_refreshes_total; absent with --url).
	IndexCatchUps *int `json:"index_catch_ups,omitempty"`
	IndexRebuilds *int `json:"index_rebuilds,omitempty"`
	// WriterMSPerRequest is the servers' writers' time over the run (their
	// climate_store_writer_busy_seconds_total) per answered request, and WritersBusy how
	// many writers were busy on average: SQLite has one, and near 1 it bounds the rate at
	// 1,000 / WriterMSPerRequest a second (absent with --url).
	WriterMSPerRequest *float64 `json:"writer_ms_per_request,omitempty"`
	WritersBusy        *float64 `json:"writers_busy,omitempty"`
	// WALPerRequestKiB is what PostgreSQL wrote to its WAL per answered request, the
	// whole cluster's (absent on SQLite and with --url).
	WALPerRequestKiB   *float64 `json:"wal_per_request_kib,omitempty"`
	MedianMS           float64  `json:"median_ms"`
	P99MS              float64  `json:"p99_ms"`
	Seconds            float64  `json:"seconds"`
	CreationsPerSecond float64  `json:"creations_per_second"`
	RequestsPerSecond  float64  `json:"requests_per_second"`
}

// API runs bench api and writes its report to stdout as o.Output says (table or json).
func API(ctx context.Context, o *APIOptions, stdout, stderr io.Writer) error {
	if err := checkOutput(o.Output); err != nil {
		return err
	}
	rep, err := runAPI(ctx, o, stderr)
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("interrupted")
		}
		return err
	}
	if o.Output == "json" {
		return writeJSON(stdout, rep)
	}
	return writeAPITable(stdout, rep)
}

// checkAPIOptions refuses what bench api cannot run, before anything starts.
func checkAPIOptions(o *APIOptions) error {
	if o.Requests <= 0 {
		return fmt.Errorf("--requests %d: want at least 1", o.Requests)
	}
	if len(o.Clients) == 0 {
		return errors.New("--clients: want at least one client count, e.g. 1,4,16")
	}
	for _, c := range o.Clients {
		if c <= 0 {
			return fmt.Errorf("--clients %d: want positive client counts", c)
		}
	}
	if o.Kind != "plain" && o.Kind != "filtered" {
		return fmt.Errorf("--kind %q: want plain or filtered", o.Kind)
	}
	switch o.Type {
	case "host", "instance":
	case "floatingip":
		if o.Kind != "plain" {
			return fmt.Errorf("--kind %s: floating IP requests have no property filter", o.Kind)
		}
		if o.Addresses < workload.HostsWanted || o.Addresses > 65536 {
			return fmt.Errorf("--addresses %d: want %d to 65,536", o.Addresses, workload.HostsWanted)
		}
	default:
		return fmt.Errorf("--type %q: want host, instance or floatingip", o.Type)
	}
	if len(o.Replicas) == 0 {
		return errors.New("--replicas: want at least one replica count, e.g. 1,3")
	}
	for _, n := range o.Replicas {
		if n < 1 {
			return fmt.Errorf("--replicas %d: want at least 1", n)
		}
		if n > 1 && o.Database == "" {
			return fmt.Errorf("--replicas %d needs --database: replicas share a PostgreSQL database", n)
		}
	}
	if o.DatabaseDelay < 0 || (o.DatabaseDelay > 0 && o.Database == "") {
		return errors.New("--database-delay: want a positive round trip, with --database")
	}
	if o.URL != "" {
		if o.Database != "" || len(o.Replicas) > 1 || o.Replicas[0] > 1 || o.DatabaseDelay > 0 {
			return errors.New("--url posts to a running server: --database, --database-delay and --replicas are for the servers the benchmark starts")
		}
		if !strings.HasPrefix(o.URL, "http://") && !strings.HasPrefix(o.URL, "https://") {
			return fmt.Errorf("--url %q: want http://HOST:PORT", o.URL)
		}
	} else if o.Hosts <= 0 || o.Leases < 0 {
		return fmt.Errorf("--hosts %d --leases %d: want at least one host and no negative lease count", o.Hosts, o.Leases)
	}
	return nil
}

func runAPI(ctx context.Context, o *APIOptions, stderr io.Writer) (*APIReport, error) {
	if err := checkAPIOptions(o); err != nil {
		return nil, err
	}
	b := newAPIBench(o, o.Requests)
	defer b.client.CloseIdleConnections()
	if o.Database != "" {
		_, _, b.localDatabase, _ = databaseHost(o.Database)
		b.remoteDatabase = !b.localDatabase
	}
	rep := &APIReport{Server: o.URL, Type: o.Type, Kind: o.Kind}
	if o.URL != "" {
		b.bases = []string{strings.TrimRight(o.URL, "/")}
		if err := b.start(ctx, o, rep, stderr); err != nil {
			return nil, err
		}
		if err := b.runAll(ctx, o.Clients, 0, rep, stderr); err != nil {
			return nil, err
		}
		return rep, nil
	}

	exe, err := climateBinary(o.Exe)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "climate-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	l := &serverLauncher{exe: exe, listenIP: "127.0.0.1", args: []string{"--data-dir", dir, "--log-level", "error"}}
	database := o.Database
	// The delayed link first, so that what it needs (root, ip(8), a loopback database)
	// fails before the book's load rather than after it.
	if o.DatabaseDelay > 0 {
		names := o.link
		if names == (linkNames{}) {
			names = benchLink
		}
		link, err := openDelayedLink(ctx, names, o.Database, o.DatabaseDelay)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := link.close(); err != nil {
				fmt.Fprintf(stderr, "removing the network namespace: %v\n", err)
			}
		}()
		l.netns, l.listenIP, database = link.names.netns, link.serverIP(), link.database
		rep.DatabaseDelayMS, rep.DatabaseLink = millis(o.DatabaseDelay), link.describe()
		// Off loopback a server wants authentication: a token of the admin project, the
		// noauth caller's.
		tokens := filepath.Join(dir, "tokens")
		b.token = randomToken()
		if err := os.WriteFile(tokens, []byte(b.token+" bench admin admin\n"), 0o600); err != nil {
			return nil, err
		}
		l.args = append(l.args, "--auth", "tokens", "--tokens-file", tokens)
	}
	if err := loadAPIBook(ctx, o, dir, b, rep, stderr); err != nil {
		return nil, err
	}
	if c, ok := b.wal.(io.Closer); ok {
		defer c.Close()
	}
	if database != "" {
		l.args = append(l.args, "--database", database)
	}
	rep.Replicas = slices.Max(o.Replicas)
	for k, n := range o.Replicas {
		if err := b.runSet(ctx, l, k, n, o, rep, stderr); err != nil {
			return nil, err
		}
	}
	rep.Scaling = apiScalingOf(rep.Runs)
	if w := b.written; w.writes > 0 {
		rep.Writes, rep.WriteTransactions, rep.WriteRoundTrips = int(w.writes), int(w.transactions), round(w.roundTrips/w.writes, 2)
	} else if b.writesUnknown != nil {
		fmt.Fprintf(stderr, "write counts unavailable: %v\n", b.writesUnknown)
	}
	return rep, nil
}

// serverLauncher starts bench api's servers: exe serve with args, in network namespace
// netns ("" for this one), listening on listenIP.
type serverLauncher struct {
	exe, netns, listenIP string
	args                 []string
}

// runSet starts n servers, times every client count on them and stops them: set k of
// the replica counts, the first of which also readies the database and times the
// first request.
func (b *apiBench) runSet(ctx context.Context, l *serverLauncher, k, n int, o *APIOptions, rep *APIReport, stderr io.Writer) error {
	srvs := make([]*Server, 0, n)
	defer func() {
		for _, s := range srvs {
			s.Stop()
		}
	}()
	b.bases, b.pids = nil, nil
	for i := range n {
		fmt.Fprintf(stderr, "starting server %d/%d\n", i+1, n)
		started := time.Now()
		srv, err := startServerIn(ctx, l.netns, l.listenIP, l.exe, l.args, nil)
		if err != nil {
			return err
		}
		rep.StartSeconds = max(rep.StartSeconds, round(time.Since(started).Seconds(), 2))
		srvs = append(srvs, srv)
		b.bases = append(b.bases, srv.URL)
		b.pids = append(b.pids, strconv.Itoa(srv.Cmd.Process.Pid))
	}
	if k == 0 {
		if err := b.start(ctx, o, rep, stderr); err != nil {
			return err
		}
	}
	if err := b.runAll(ctx, o.Clients, n, rep, stderr); err != nil {
		return err
	}
	readPeakRSS(srvs, n == rep.Replicas && rep.ReplicaPeakRSSMiB == nil, rep, stderr)
	return nil
}

// storeWrites are write counts from servers' /metrics: their writes, the database
// transactions those took and, on PostgreSQL, those transactions' round trips; their
// commits planned again after losing a race; and their indexes' catch-ups and rebuilds.
type storeWrites struct {
	writes, transactions, roundTrips, replans, catchUps, rebuilds float64
	// busy is the writers' time in seconds, when every server tells it (hasBusy).
	busy    float64
	hasBusy bool
}

// serverWrites sums the write counts of the benchmark's own servers: nil with --url, or
// when a server does not tell them (b.writesUnknown then says why).
func (b *apiBench) serverWrites(ctx context.Context) *storeWrites {
	if len(b.pids) == 0 || b.writesUnknown != nil {
		return nil
	}
	sum := storeWrites{hasBusy: true}
	for _, base := range b.bases {
		w, ok, err := b.writeCounts(ctx, base)
		if err == nil && !ok {
			err = errors.New("the server's /metrics lacks climate_store_writes_total or climate_index_refreshes_total")
		}
		if err != nil {
			b.writesUnknown = err
			return nil
		}
		sum.writes += w.writes
		sum.transactions += w.transactions
		sum.roundTrips += w.roundTrips
		sum.replans += w.replans
		sum.catchUps += w.catchUps
		sum.rebuilds += w.rebuilds
		sum.busy += w.busy
		sum.hasBusy = sum.hasBusy && w.hasBusy
	}
	return &sum
}

// countWrites adds the servers' writes since before (serverWrites) to b.written: the
// runs' creations and what the servers wrote of their own meanwhile. It sets run's
// commits planned again and index refreshes since before (left nil when unknown).
func (b *apiBench) countWrites(ctx context.Context, before *storeWrites, run *apiRunReport) {
	if before == nil {
		return
	}
	after := b.serverWrites(ctx)
	if after == nil {
		return
	}
	b.written.writes += after.writes - before.writes
	b.written.transactions += after.transactions - before.transactions
	b.written.roundTrips += after.roundTrips - before.roundTrips
	since := func(a, b float64) *int { n := int(a - b); return &n }
	run.Replans = since(after.replans, before.replans)
	run.IndexCatchUps = since(after.catchUps, before.catchUps)
	run.IndexRebuilds = since(after.rebuilds, before.rebuilds)
	if answered := run.Created + run.NoCapacity; after.hasBusy && before.hasBusy && answered > 0 && run.Seconds > 0 {
		busy := after.busy - before.busy
		perRequest, onAverage := busy*1000/float64(answered), busy/run.Seconds
		run.WriterMSPerRequest, run.WritersBusy = &perRequest, &onAverage
	}
}

// loadAPIBook loads the book of o into the SQLite database in dir or PostgreSQL at
// o.Database, with the floating IPs of --type floatingip, and vacuums PostgreSQL. A store
// that tells its WAL position stays open as b.wal (and b.vacuum), for the caller to close.
func loadAPIBook(ctx context.Context, o *APIOptions, dir string, b *apiBench, rep *APIReport, stderr io.Writer) error {
	gen := workload.Generate
	if o.Type == "instance" {
		gen = workload.GenerateInstances
	}
	st, desc, err := o.Open(ctx, o.Database, dir)
	if err != nil {
		return err
	}
	sc := benchScale{o.Hosts, o.Leases}
	loaded, err := loadFreshBook(ctx, st, desc, sc, gen, stderr)
	if err == nil && o.Type == "floatingip" {
		err = st.Update(ctx, func(tx climate.Tx) error {
			for _, f := range workload.FloatingIPs(o.Addresses, 1) {
				if err := tx.InsertFloatingIP(ctx, &f); err != nil {
					return err
				}
			}
			return nil
		})
		rep.FloatingIPs = o.Addresses
	}
	if err == nil {
		err = vacuumDatabase(ctx, st, &progressLine{w: stderr})
	}
	if w, ok := st.(walReader); ok && err == nil {
		b.wal = w
		b.vacuum, _ = st.(vacuumer)
	} else if cerr := st.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	rep.Server, rep.Hosts, rep.Leases, rep.Allocations = "subprocess", loaded.Hosts, loaded.Leases, loaded.Allocations
	rep.LoadSeconds = loaded.LoadSeconds
	if o.Database != "" {
		rep.Database = desc
	}
	if o.Kind == "plain" && o.Type == "host" {
		rep.BlazarCreateSeconds = baseline(sc, "create")
	}
	return nil
}

// readPeakRSS records the servers' peak resident memory: the largest in rep.PeakRSSMiB,
// and, with each, each one's in rep.ReplicaPeakRSSMiB.
func readPeakRSS(srvs []*Server, each bool, rep *APIReport, stderr io.Writer) {
	var all []float64
	for _, srv := range srvs {
		rss, err := peakRSS(srv.Cmd.Process.Pid)
		if err != nil {
			fmt.Fprintf(stderr, "peak RSS unavailable: %v\n", err)
			return
		}
		mib := round(float64(rss)/(1<<20), 1)
		if rep.PeakRSSMiB == nil || mib > *rep.PeakRSSMiB {
			rep.PeakRSSMiB = &mib
		}
		all = append(all, mib)
	}
	if each {
		rep.ReplicaPeakRSSMiB = all
	}
}
