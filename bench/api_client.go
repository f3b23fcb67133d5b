package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"climate/workload"
)

// apiBench posts leases to servers: client k of a run to bases[k % len(bases)].
type apiBench struct {
	bases            []string
	token, kind, typ string
	windows          []workload.Window
	instances        []workload.InstanceRequest // typ instance: the requests, windows aside
	client           *http.Client
	requests         int // per run
	// pids are the server subprocesses' (none with --url); localDatabase says PostgreSQL
	// runs on this host, so its processes' CPU time is the database's.
	pids          []string
	localDatabase bool
	// remoteDatabase says PostgreSQL runs on another host, whose CPU time is not read.
	remoteDatabase bool
	// written totals the servers' writes during the runs (countWrites), when they tell
	// them; writesUnknown says why not.
	written       storeWrites
	writesUnknown error
	// wal reads PostgreSQL's WAL position (nil on SQLite and with --url).
	wal walReader
	// vacuum, when not nil, vacuums PostgreSQL after each run's deletions.
	vacuum vacuumer
}

// walReader is a store that can tell its database's WAL position in bytes
// (postgres.Store).
type walReader interface {
	WALBytes(context.Context) (int64, error)
}

// vacuumer is a store whose tables can be vacuumed and analyzed (postgres.Store). The
// benchmark does it after loading the book and after each run's deletions, untimed, as
// autovacuum would in time: no run then meets a bulk load without statistics or the dead
// rows of the runs before it, whether or not the database's autovacuum is on (it is off
// on the project's machine).
type vacuumer interface {
	Vacuum(context.Context) error
}

// vacuumDatabase vacuums st when it can, saying so on p.
func vacuumDatabase(ctx context.Context, st any, p *progressLine) error {
	v, ok := st.(vacuumer)
	if !ok {
		return nil
	}
	p.set("vacuuming and analyzing the database")
	defer p.done()
	if err := v.Vacuum(ctx); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// newAPIBench prepares n requests of o's type and kind.
func newAPIBench(o *APIOptions, n int) *apiBench {
	maxClients := slices.Max(o.Clients)
	b := &apiBench{
		token: o.Token, kind: o.Kind, typ: o.Type, requests: o.Requests,
		windows: workload.Windows(n),
		client: &http.Client{
			Timeout: 5 * time.Minute,
			Transport: &http.Transport{
				MaxIdleConns: maxClients, MaxIdleConnsPerHost: maxClients, IdleConnTimeout: time.Minute,
			},
		},
	}
	if o.Type == "instance" {
		b.instances = workload.InstanceRequests(n)
	}
	return b
}

// start readies the database for the runs (--limits) and times the first request, a
// dry run, on the fresh server.
func (b *apiBench) start(ctx context.Context, o *APIOptions, rep *APIReport, stderr io.Writer) error {
	if o.Limits {
		if err := b.setLimits(ctx); err != nil {
			return err
		}
		rep.Limits = true
	}
	fmt.Fprintln(stderr, "first request (dry run)")
	t0 := time.Now()
	status, body, err := b.create(ctx, b.bases[0], -1, true)
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusConflict {
		return fmt.Errorf("POST /v1/leases (dry run): %w", httpError(status, body))
	}
	rep.FirstRequestMS = millis(time.Since(t0))
	return nil
}

// runAll times each client count in turn on the servers of b.bases (replicas of them)
// and adds the runs to rep. Every run posts the same requests on the same book: the
// leases a run created are deleted after it, so that runs differ only in their clients
// and servers (later runs on a book grown by the earlier ones' leases would be refused
// more often, and a refusal costs less than a creation).
func (b *apiBench) runAll(ctx context.Context, clients []int, replicas int, rep *APIReport, stderr io.Writer) error {
	p := &progressLine{w: stderr}
	for _, c := range clients {
		before, measured := b.cpuUsed()
		var walBefore int64
		var walErr error
		if b.wal != nil {
			walBefore, walErr = b.wal.WALBytes(ctx)
		}
		writesBefore := b.serverWrites(ctx)
		run, created, err := b.run(ctx, c, b.requests, p)
		p.done()
		if err != nil {
			return err
		}
		b.countWrites(ctx, writesBefore, run)
		answered := run.Created + run.NoCapacity
		if after, ok := b.cpuUsed(); ok && measured {
			run.CPUPerRequestMS = after.since(before, answered)
		}
		if b.wal != nil {
			run.WALPerRequestKiB = b.walSince(ctx, walBefore, walErr, answered, stderr)
		}
		run.Replicas = replicas
		rep.Runs = append(rep.Runs, *run)
		err = b.deleteCreated(ctx, created, c, p)
		p.done()
		if err != nil {
			return err
		}
		if err := vacuumDatabase(ctx, b.vacuum, p); err != nil { // none on SQLite
			return err
		}
	}
	return nil
}

// walSince is the WAL PostgreSQL wrote per request, in KiB, over n requests since the
// position before (read with error beforeErr); nil, said on stderr, when unreadable.
func (b *apiBench) walSince(ctx context.Context, before int64, beforeErr error, n int, stderr io.Writer) *float64 {
	after, err := b.wal.WALBytes(ctx)
	if err = cmp.Or(beforeErr, err); err != nil {
		fmt.Fprintf(stderr, "PostgreSQL's WAL position unavailable: %v\n", err)
		return nil
	}
	if n == 0 {
		return nil
	}
	v := round(float64(after-before)/float64(n)/1024, 1)
	return &v
}

// cpuUse is the CPU time used so far by the servers, PostgreSQL's processes and this
// benchmark (its clients, and with --database-delay the forwarder).
type cpuUse struct {
	servers, database, bench time.Duration
	// serversIO is the servers' read and write calls so far (with hasServers).
	serversIO IO
	// hasServers and hasDatabase say which of the first two were measured; allHere that
	// the servers, their database (SQLite inside them, or PostgreSQL on this host) and
	// this benchmark all run on this host.
	hasServers, hasDatabase, allHere bool
}

// cpuPerRequest is the CPU time one request cost, in milliseconds: the servers' (absent
// with --url), PostgreSQL's (when it runs on this host) and this benchmark's.
type cpuPerRequest struct {
	Servers  *float64 `json:"servers,omitempty"`
	Database *float64 `json:"database,omitempty"`
	Bench    float64  `json:"bench"`
	// ServersIO is the servers' read and write calls and the KiB they wrote, per request
	// (absent with --url).
	ServersIO *ioPerRequest `json:"servers_io,omitempty"`
	// CoresCeiling is the requests a second that this host's cores would answer at these
	// CPU times if they did nothing else: cores / (servers + database + benchmark). Only
	// when all three run here; a run that reaches it is bound by the CPU.
	CoresCeiling *float64 `json:"cores_ceiling_per_second,omitempty"`
}

type ioPerRequest struct {
	ReadCalls  float64 `json:"read_calls"`
	WriteCalls float64 `json:"write_calls"`
	WrittenKiB float64 `json:"written_kib"`
}

// cpuUsed reads the CPU time used so far; ok is false where /proc cannot tell.
func (b *apiBench) cpuUsed() (u cpuUse, ok bool) {
	var err error
	if u.bench, err = cpuTime("self"); err != nil {
		return u, false
	}
	for _, pid := range b.pids {
		t, err := cpuTime(pid)
		if err != nil {
			return u, false
		}
		c, err := ProcIO(pid)
		if err != nil {
			return u, false
		}
		u.servers += t
		u.serversIO.ReadCalls += c.ReadCalls
		u.serversIO.WriteCalls += c.WriteCalls
		u.serversIO.WrittenBytes += c.WrittenBytes
	}
	if b.localDatabase {
		u.database = postgresCPU()
	}
	u.hasServers, u.hasDatabase = len(b.pids) > 0, b.localDatabase
	u.allHere = u.hasServers && !b.remoteDatabase
	return u, true
}

// since is the CPU time per request of n requests made between before and u.
func (u cpuUse) since(before cpuUse, n int) *cpuPerRequest {
	if n == 0 {
		return nil
	}
	ms := func(d time.Duration) float64 { return round(float64(d)/float64(n)/float64(time.Millisecond), 3) }
	c := &cpuPerRequest{Bench: ms(u.bench - before.bench)}
	if u.hasServers {
		v := ms(u.servers - before.servers)
		c.Servers = &v
		per := func(after, before int64) float64 { return round(float64(after-before)/float64(n), 1) }
		c.ServersIO = &ioPerRequest{
			ReadCalls:  per(u.serversIO.ReadCalls, before.serversIO.ReadCalls),
			WriteCalls: per(u.serversIO.WriteCalls, before.serversIO.WriteCalls),
			WrittenKiB: round(float64(u.serversIO.WrittenBytes-before.serversIO.WrittenBytes)/float64(n)/1024, 1),
		}
	}
	if u.hasDatabase {
		v := ms(u.database - before.database)
		c.Database = &v
	}
	if total := u.servers - before.servers + u.database - before.database + u.bench - before.bench; u.allHere && total > 0 {
		v := round(float64(runtime.NumCPU())*float64(n)/total.Seconds(), 1)
		c.CoresCeiling = &v
	}
	return c
}

type leaseRequestBody struct {
	Name         string `json:"name"`
	Start        string `json:"start_date"`
	End          string `json:"end_date"`
	Reservations []any  `json:"reservations"`
	DryRun       bool   `json:"dry_run,omitempty"`
}

type reservationRequestBody struct {
	ResourceType         string `json:"resource_type"`
	Min                  int    `json:"min"`
	Max                  int    `json:"max"`
	HypervisorProperties string `json:"hypervisor_properties"`
	ResourceProperties   string `json:"resource_properties"`
}

type instanceRequestBody struct {
	ResourceType       string `json:"resource_type"`
	Amount             int    `json:"amount"`
	VCPUs              int    `json:"vcpus"`
	MemoryMB           int    `json:"memory_mb"`
	DiskGB             int    `json:"disk_gb"`
	Affinity           *bool  `json:"affinity"`
	ResourceProperties string `json:"resource_properties"`
}

type floatingIPRequestBody struct {
	ResourceType string `json:"resource_type"`
	NetworkID    string `json:"network_id"`
	Amount       int    `json:"amount"`
}

// benchLimits bound the posting project far above what the benchmark books: every check
// runs, none refuses.
const benchLimits = `{"max_hosts": 100000000, "max_vcpus": 100000000, "max_floating_ips": 100000000, "max_leases": 100000000,
	"max_advance": "36500d", "max_lease_duration": "36500d", "budget": 1e14}`

// setLimits gives the noauth caller's project (admin) benchLimits.
func (b *apiBench) setLimits(ctx context.Context) error {
	status, body, err := b.do(ctx, http.MethodPut, b.bases[0]+"/v1/projects/admin/limits", []byte(benchLimits))
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("setting the limits: %w", httpError(status, body))
	}
	return err
}

// do sends a request with the benchmark's token (and payload as JSON when not nil) and
// returns the answer's status and body.
func (b *apiBench) do(ctx context.Context, method, url string, payload []byte) (int, []byte, error) {
	var r io.Reader
	if payload != nil {
		r = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, nil, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.token != "" {
		req.Header.Set("X-Auth-Token", b.token)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	_, _ = io.Copy(io.Discard, resp.Body) // so the connection is reused
	return resp.StatusCode, body, err
}

// create posts lease "bench-i" of request i (the first for i < 0, the dry run); it returns
// the status and the body.
func (b *apiBench) create(ctx context.Context, base string, i int, dryRun bool) (int, []byte, error) {
	var res any
	w := b.windows[max(i, 0)]
	switch b.typ {
	case "instance":
		q := b.instances[max(i, 0)]
		r := instanceRequestBody{ResourceType: "virtual:instance", Amount: q.Amount, VCPUs: q.Size.VCPUs, MemoryMB: q.Size.MemoryMB,
			DiskGB: q.Size.DiskGB, Affinity: q.Affinity}
		if b.kind == "filtered" {
			r.ResourceProperties = workload.FilteredResourceProperties
		}
		res, w = r, q.Window
	case "floatingip":
		res = floatingIPRequestBody{ResourceType: "virtual:floatingip", NetworkID: workload.FloatingIPNetwork(0), Amount: workload.HostsWanted}
	default:
		r := reservationRequestBody{ResourceType: "physical:host", Min: workload.HostsWanted, Max: workload.HostsWanted}
		if b.kind == "filtered" {
			r.HypervisorProperties, r.ResourceProperties = workload.FilteredHypervisorProperties, workload.FilteredResourceProperties
		}
		res = r
	}
	name := "bench-" + strconv.Itoa(i)
	if i < 0 {
		name = "bench-warmup"
	}
	payload, err := json.Marshal(leaseRequestBody{Name: name, Start: w.Start.Format("2006-01-02 15:04"), End: w.End.Format("2006-01-02 15:04"),
		Reservations: []any{res}, DryRun: dryRun})
	if err != nil {
		return 0, nil, err
	}
	return b.do(ctx, http.MethodPost, base+"/v1/leases", payload)
}

// writeCounts reads a server's climate_store_writes_total,
// climate_store_write_transactions_total, climate_store_write_round_trips_total (none on
// SQLite: zero), climate_commit_conflicts_total, climate_index_refreshes_total and
// climate_store_writer_busy_seconds_total (a server before it lacks it: hasBusy) from its
// /metrics; ok is false when it lacks the write counts or the refreshes.
func (b *apiBench) writeCounts(ctx context.Context, base string) (w storeWrites, ok bool, err error) {
	status, body, err := b.do(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return w, false, err
	}
	if status != http.StatusOK {
		return w, false, fmt.Errorf("reading /metrics: %w", httpError(status, body))
	}
	// Each series read, and whether the server must have it (round trips are PostgreSQL's).
	series := map[string]struct {
		dest     *float64
		required bool
	}{
		"climate_store_writes_total":                    {&w.writes, true},
		"climate_store_write_transactions_total":        {&w.transactions, true},
		"climate_store_write_round_trips_total":         {&w.roundTrips, false},
		"climate_commit_conflicts_total":                {&w.replans, false},
		`climate_index_refreshes_total{how="catch_up"}`: {&w.catchUps, true},
		`climate_index_refreshes_total{how="rebuild"}`:  {&w.rebuilds, true},
		"climate_store_writer_busy_seconds_total":       {&w.busy, false},
	}
	missing := 0
	for _, sr := range series {
		if sr.required {
			missing++
		}
	}
	for _, line := range strings.Split(string(body), "\n") {
		name, value, found := strings.Cut(line, " ")
		sr, known := series[name]
		if !known || !found {
			continue
		}
		if *sr.dest, err = strconv.ParseFloat(value, 64); err != nil {
			return w, false, fmt.Errorf("reading /metrics: %s: %w", name, err)
		}
		w.hasBusy = w.hasBusy || sr.dest == &w.busy
		if sr.required {
			missing--
		}
	}
	return w, missing == 0, nil
}

func httpError(status int, body []byte) error {
	msg := strings.Join(strings.Fields(string(body)), " ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return fmt.Errorf("HTTP %d: %s", status, msg)
}

// run posts requests 0 … n-1 with c concurrent clients; created holds the answers of
// those that got 201, for deleteCreated.
func (b *apiBench) run(ctx context.Context, c, n int, p *progressLine) (rep *apiRunReport, created [][]byte, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, done atomic.Int64
		mu         sync.Mutex
		firstErr   error
		lat        = make([]time.Duration, 0, n)
	)
	rep = &apiRunReport{Clients: c, Requests: n}
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	stopProgress := p.follow(func() string { return fmt.Sprintf("%d clients: %d/%d requests", c, done.Load(), n) })
	var wg sync.WaitGroup
	start := time.Now()
	for k := range c {
		base := b.bases[k%len(b.bases)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var answers [][]byte
			full, gaveUp := 0, 0
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				created = append(created, answers...)
				rep.Created += len(answers)
				rep.NoCapacity += full
				rep.GaveUp += gaveUp
				mu.Unlock()
			}()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				status, body, err := b.create(ctx, base, i, false)
				d := time.Since(t0)
				if err != nil {
					fail(err)
					return
				}
				switch status {
				case http.StatusCreated:
					answers = append(answers, body)
				case http.StatusConflict:
					full++
					if bytes.Contains(body, []byte("concurrent requests")) {
						gaveUp++
					}
				default:
					fail(fmt.Errorf("POST /v1/leases: %w", httpError(status, body)))
					return
				}
				mine = append(mine, d)
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	if firstErr != nil {
		return nil, nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	med, p99 := medianP99(lat)
	rep.MedianMS, rep.P99MS = millis(med), millis(p99)
	rep.Seconds = round(elapsed.Seconds(), 3)
	rep.CreationsPerSecond = round(float64(rep.Created)/elapsed.Seconds(), 1)
	rep.RequestsPerSecond = round(float64(n)/elapsed.Seconds(), 1)
	return rep, created, nil
}

// deleteCreated deletes the leases whose creation answers are created, with c clients
// spread over the servers as the run's were.
func (b *apiBench) deleteCreated(ctx context.Context, created [][]byte, c int, p *progressLine) error {
	ids := make([]string, len(created))
	for i, body := range created {
		var answer struct {
			Lease struct {
				ID string `json:"id"`
			} `json:"lease"`
		}
		if err := json.Unmarshal(body, &answer); err != nil || answer.Lease.ID == "" {
			return fmt.Errorf("a created lease's id: %v in %.200q", err, body)
		}
		ids[i] = answer.Lease.ID
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for k := range min(c, len(ids)) {
		base := b.bases[k%len(b.bases)]
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(ids) && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				if err := b.deleteLease(ctx, base, ids[i]); err != nil {
					cancel(err)
					return
				}
				done.Add(1)
			}
		})
	}
	stopProgress := p.follow(func() string { return fmt.Sprintf("deleting the run's leases: %d/%d", done.Load(), len(ids)) })
	wg.Wait()
	stopProgress()
	return context.Cause(ctx)
}

// deleteLease deletes lease id through the server at base.
func (b *apiBench) deleteLease(ctx context.Context, base, id string) error {
	status, body, err := b.do(ctx, http.MethodDelete, base+"/v1/leases/"+id, nil)
	if err == nil && status != http.StatusNoContent {
		err = fmt.Errorf("deleting lease %s: %w", id, httpError(status, body))
	}
	return err
}
