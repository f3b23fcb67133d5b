package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"climate"
	"climate/workload"
)

type benchAPIOptions struct {
	hosts, leases, requests int
	clients                 []int
	url, token, kind        string
	// typ is the reservation type posted: host, instance or floatingip; addresses the
	// floating IPs registered for floatingip.
	typ       string
	addresses int
	output    string
	// database, when set, is a PostgreSQL URL: the book is loaded there and replicas
	// servers share it.
	database string
	replicas int
	// limits sets generous limits and a budget on the posting project, so every
	// creation runs the fair-use checks without being refused.
	limits bool
}

// apiReport is bench api's result (its JSON output).
type apiReport struct {
	// Server is "subprocess" (started by the benchmark) or the --url given.
	Server string `json:"server"`
	// Database is the PostgreSQL URL (password masked) the subprocesses share, "" for SQLite.
	Database string `json:"database,omitempty"`
	// Replicas is the number of server subprocesses; clients are spread round-robin.
	Replicas int `json:"replicas"`
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
	// ReplicaPeakRSSMiB is each replica's peak resident memory.
	ReplicaPeakRSSMiB []float64 `json:"replica_peak_rss_mib,omitempty"`
	// BlazarCreateSeconds is upstream Blazar's median for a whole plain lease creation at
	// this scale (one client), where WORKLOAD.md gives one.
	BlazarCreateSeconds *float64       `json:"blazar_create_seconds"`
	Runs                []apiRunReport `json:"runs"`
}

type apiRunReport struct {
	Clients    int `json:"clients"`
	Requests   int `json:"requests"`
	Created    int `json:"created"`     // 201
	NoCapacity int `json:"no_capacity"` // 409
	// GaveUp counts the 409s that say the hosts found kept being booked by concurrent
	// requests (the server's re-plan attempts ran out), a subset of NoCapacity.
	GaveUp             int     `json:"gave_up"`
	MedianMS           float64 `json:"median_ms"`
	P99MS              float64 `json:"p99_ms"`
	Seconds            float64 `json:"seconds"`
	CreationsPerSecond float64 `json:"creations_per_second"`
	RequestsPerSecond  float64 `json:"requests_per_second"`
}

func newBenchAPICmd() *cobra.Command {
	o := &benchAPIOptions{}
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Time lease creation through the HTTP API of a server holding the workload",
		Long: `Load the blazar-90d book into a temporary data directory, start "climate serve" on it as a
subprocess (this same binary, on a free loopback port), then for each client count C run C
concurrent clients that post leases until --requests requests are done. Each request asks
for 10 hosts (min = max = 10) over the workload's next request window, so no two requests
of the whole benchmark share a window; the book grows as leases are created. Reported per
client count: median and p99 latency, creations per second, and how many requests got 201
(created) and 409 (not enough free hosts); then the server's peak RSS.

--type chooses the reservation posted (the figures are the same):

  host        physical:host, 10 hosts, on the blazar-90d book (the default)
  instance    virtual:instance on the instance workload's book (workload/instances.go:
              H hosts of 32–128 vCPUs and 128–512 GB, R instance leases of 1–8 slots and a
              whole-host lease after every tenth, over 21 days); each request is the
              workload's next instance request: 1–8 slots of one of 8 sizes over 1–72 h,
              half without affinity, a quarter each with affinity and anti-affinity
              (--kind filtered adds resource_properties ["==", "$node_type", "compute_icelake"])
  floatingip  virtual:floatingip, 10 of --addresses addresses registered on network
              "net-0" beside the blazar-90d book, over the workload's request windows (with
              --url the server must hold them already)

The server and its data directory are removed at the end, also on Ctrl-C. With --url the
benchmark posts to an already running server instead and neither loads a book nor reads
its memory.

With --database postgres://…?search_path=SCHEMA the book is loaded into that PostgreSQL
schema (which must hold no hosts yet: use a fresh one, and drop it afterwards) and
--replicas N servers run on it, the clients spread round-robin over them; the peak RSS of
each replica is reported.`,
		Example: `  climate bench api
  climate bench api --hosts 1000 --leases 10000 --requests 500 --clients 1,4,16 -o json
  climate bench api --type instance --clients 1,4,16
  climate bench api --type floatingip --addresses 1000 --hosts 1000 --leases 10000
  climate bench api --url http://127.0.0.1:1234 --requests 100 --clients 1
  climate bench api --database 'postgres://postgres@127.0.0.1/test?search_path=bench' --replicas 3 --hosts 1000 --leases 10000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(o.output); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := runBenchAPI(ctx, o, cmd.ErrOrStderr())
			if err != nil {
				if ctx.Err() != nil {
					return errors.New("interrupted")
				}
				return err
			}
			if o.output == "json" {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			return writeAPITable(cmd.OutOrStdout(), rep)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.hosts, "hosts", 5000, "number of hosts H of the book loaded")
	f.IntVar(&o.leases, "leases", 50000, "number of existing leases R of the book loaded")
	f.IntVar(&o.requests, "requests", 200, "lease creations posted per client count")
	f.IntSliceVar(&o.clients, "clients", []int{1, 4, 16}, "comma-separated numbers of concurrent clients, one run each")
	f.StringVar(&o.kind, "kind", "plain", "request kind: plain (no filter) or filtered (the workload's property filters; host and instance)")
	f.StringVar(&o.typ, "type", "host", "reservation type posted: host (physical:host), instance (virtual:instance) or floatingip (virtual:floatingip)")
	f.IntVar(&o.addresses, "addresses", 1000, "floating IPs registered on network net-0 for --type floatingip")
	f.StringVar(&o.url, "url", "", "post to this running server (e.g. http://127.0.0.1:1234) instead of starting one")
	f.StringVar(&o.token, "token", "", "X-Auth-Token to send (for a server run with --auth tokens)")
	f.StringVar(&o.database, "database", "", "load the book into this PostgreSQL URL (postgres://…?search_path=SCHEMA, a schema without hosts) and serve it from there")
	f.BoolVar(&o.limits, "limits", false, "give the posting project (admin, the noauth caller's) limits and a budget none of the requests reaches, so each creation pays for the fair-use checks")
	f.IntVar(&o.replicas, "replicas", 1, "number of server subprocesses (more than one needs --database); clients are spread round-robin")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	addFormatAlias(f, "output", "table", "json")
	return cmd
}

func runBenchAPI(ctx context.Context, o *benchAPIOptions, stderr io.Writer) (*apiReport, error) {
	if o.requests <= 0 {
		return nil, fmt.Errorf("--requests %d: want at least 1", o.requests)
	}
	if len(o.clients) == 0 {
		return nil, errors.New("--clients: want at least one client count, e.g. 1,4,16")
	}
	maxClients := 0
	for _, c := range o.clients {
		if c <= 0 {
			return nil, fmt.Errorf("--clients %d: want positive client counts", c)
		}
		maxClients = max(maxClients, c)
	}
	if o.kind != "plain" && o.kind != "filtered" {
		return nil, fmt.Errorf("--kind %q: want plain or filtered", o.kind)
	}
	gen := workload.Generate
	switch o.typ {
	case "host":
	case "instance":
		gen = workload.GenerateInstances
	case "floatingip":
		if o.kind != "plain" {
			return nil, fmt.Errorf("--kind %s: floating IP requests have no property filter", o.kind)
		}
		if o.addresses < workload.HostsWanted || o.addresses > 65536 {
			return nil, fmt.Errorf("--addresses %d: want %d to 65,536", o.addresses, workload.HostsWanted)
		}
	default:
		return nil, fmt.Errorf("--type %q: want host, instance or floatingip", o.typ)
	}
	if o.replicas < 1 {
		return nil, fmt.Errorf("--replicas %d: want at least 1", o.replicas)
	}
	if o.replicas > 1 && o.database == "" {
		return nil, fmt.Errorf("--replicas %d needs --database: replicas share a PostgreSQL database", o.replicas)
	}
	if o.url != "" && (o.database != "" || o.replicas > 1) {
		return nil, errors.New("--url posts to a running server: --database and --replicas are for the servers the benchmark starts")
	}
	rep := &apiReport{Server: o.url, Type: o.typ, Kind: o.kind}
	bases := []string{strings.TrimRight(o.url, "/")}
	var srvs []*benchServer
	if o.url == "" {
		if o.hosts <= 0 || o.leases < 0 {
			return nil, fmt.Errorf("--hosts %d --leases %d: want at least one host and no negative lease count", o.hosts, o.leases)
		}
		dir, err := os.MkdirTemp("", "climate-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		st, desc, err := openDatabase(ctx, o.database, dir)
		if err != nil {
			return nil, err
		}
		sc := benchScale{o.hosts, o.leases}
		loaded, err := loadFreshBook(ctx, st, desc, sc, gen, stderr)
		if err == nil && o.typ == "floatingip" {
			err = st.Update(ctx, func(tx climate.Tx) error {
				for _, f := range workload.FloatingIPs(o.addresses, 1) {
					if err := tx.InsertFloatingIP(ctx, &f); err != nil {
						return err
					}
				}
				return nil
			})
			rep.FloatingIPs = o.addresses
		}
		if cerr := st.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		rep.Server, rep.Hosts, rep.Leases, rep.Allocations = "subprocess", loaded.Hosts, loaded.Leases, loaded.Allocations
		rep.Replicas, rep.LoadSeconds = o.replicas, loaded.LoadSeconds
		if o.database != "" {
			rep.Database = desc
		}
		if o.kind == "plain" && o.typ == "host" {
			rep.BlazarCreateSeconds = baseline(sc, "create")
		}
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find this binary to start the server: %w", err)
		}
		args := []string{"--data-dir", dir, "--log-level", "error"}
		if o.database != "" {
			args = append(args, "--database", o.database)
		}
		bases = nil
		defer func() {
			for _, s := range srvs {
				s.stop()
			}
		}()
		for i := range o.replicas {
			fmt.Fprintf(stderr, "starting server %d/%d\n", i+1, o.replicas)
			started := time.Now()
			srv, err := startServeProcess(ctx, exe, args, nil)
			if err != nil {
				return nil, err
			}
			rep.StartSeconds = max(rep.StartSeconds, round(time.Since(started).Seconds(), 2))
			srvs = append(srvs, srv)
			bases = append(bases, srv.url)
		}
	} else if !strings.HasPrefix(o.url, "http://") && !strings.HasPrefix(o.url, "https://") {
		return nil, fmt.Errorf("--url %q: want http://HOST:PORT", o.url)
	}

	b := &apiBench{
		bases: bases, token: o.token, kind: o.kind, typ: o.typ,
		windows: workload.Windows(o.requests * len(o.clients)),
		client: &http.Client{
			Timeout: 5 * time.Minute,
			Transport: &http.Transport{
				MaxIdleConns: maxClients, MaxIdleConnsPerHost: maxClients, IdleConnTimeout: time.Minute,
			},
		},
	}
	defer b.client.CloseIdleConnections()

	if o.limits {
		if err := b.setLimits(ctx); err != nil {
			return nil, err
		}
		rep.Limits = true
	}
	fmt.Fprintln(stderr, "first request (dry run)")
	t0 := time.Now()
	if o.typ == "instance" {
		b.instances = workload.InstanceRequests(o.requests * len(o.clients))
	}
	status, body, err := b.create(ctx, b.bases[0], -1, true)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK && status != http.StatusConflict {
		return nil, httpError(status, body)
	}
	rep.FirstRequestMS = millis(time.Since(t0))

	p := &progressLine{w: stderr}
	for k, c := range o.clients {
		run, err := b.run(ctx, c, k*o.requests, o.requests, p)
		p.done()
		if err != nil {
			return nil, err
		}
		rep.Runs = append(rep.Runs, *run)
	}
	for _, srv := range srvs {
		rss, err := peakRSS(srv.cmd.Process.Pid)
		if err != nil {
			fmt.Fprintf(stderr, "peak RSS unavailable: %v\n", err)
			rep.PeakRSSMiB, rep.ReplicaPeakRSSMiB = nil, nil
			break
		}
		mib := round(float64(rss)/(1<<20), 1)
		if rep.PeakRSSMiB == nil || mib > *rep.PeakRSSMiB {
			rep.PeakRSSMiB = &mib
		}
		rep.ReplicaPeakRSSMiB = append(rep.ReplicaPeakRSSMiB, mib)
	}
	return rep, nil
}

// apiBench posts leases to servers: client k of a run to bases[k % len(bases)].
type apiBench struct {
	bases            []string
	token, kind, typ string
	windows          []workload.Window
	instances        []workload.InstanceRequest // typ instance: the requests, windows aside
	client           *http.Client
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, b.bases[0]+"/v1/projects/admin/limits", strings.NewReader(benchLimits))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if b.token != "" {
		req.Header.Set("X-Auth-Token", b.token)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("setting the limits: %w", httpError(resp.StatusCode, body))
	}
	return nil
}

// create posts lease "bench-i" of request i (the first for i < 0, the dry run); it returns
// the status and, unless 201, the body.
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/leases", bytes.NewReader(payload))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if b.token != "" {
		req.Header.Set("X-Auth-Token", b.token)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var body []byte
	if resp.StatusCode != http.StatusCreated {
		body, err = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	}
	_, _ = io.Copy(io.Discard, resp.Body) // so the connection is reused
	return resp.StatusCode, body, err
}

func httpError(status int, body []byte) error {
	msg := strings.Join(strings.Fields(string(body)), " ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return fmt.Errorf("POST /v1/leases: HTTP %d: %s", status, msg)
}

// run posts n leases (windows first … first+n-1) with c concurrent clients.
func (b *apiBench) run(ctx context.Context, c, first, n int, p *progressLine) (*apiRunReport, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, done atomic.Int64
		mu         sync.Mutex
		firstErr   error
		lat        = make([]time.Duration, 0, n)
		rep        = &apiRunReport{Clients: c, Requests: n}
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	stopTicker := make(chan struct{})
	tickerDone := make(chan struct{})
	go func() {
		defer close(tickerDone)
		for {
			p.set("%d clients: %d/%d requests", c, done.Load(), n)
			select {
			case <-tick.C:
			case <-stopTicker:
				p.set("%d clients: %d/%d requests", c, done.Load(), n)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	start := time.Now()
	for k := range c {
		base := b.bases[k%len(b.bases)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			created, full, gaveUp := 0, 0, 0
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				rep.Created += created
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
				status, body, err := b.create(ctx, base, first+i, false)
				d := time.Since(t0)
				if err != nil {
					fail(err)
					return
				}
				switch status {
				case http.StatusCreated:
					created++
				case http.StatusConflict:
					full++
					if bytes.Contains(body, []byte("concurrent requests")) {
						gaveUp++
					}
				default:
					fail(httpError(status, body))
					return
				}
				mine = append(mine, d)
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopTicker)
	<-tickerDone
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	med, p99 := medianP99(lat)
	rep.MedianMS, rep.P99MS = millis(med), millis(p99)
	rep.Seconds = round(elapsed.Seconds(), 3)
	rep.CreationsPerSecond = round(float64(rep.Created)/elapsed.Seconds(), 1)
	rep.RequestsPerSecond = round(float64(n)/elapsed.Seconds(), 1)
	return rep, nil
}

// benchServer is a "climate serve" subprocess.
type benchServer struct {
	cmd      *exec.Cmd
	url      string
	scanDone chan struct{}
	stderr   *cappedBuffer
	once     sync.Once
}

// startServeProcess runs "exe serve --listen 127.0.0.1:0" with args and returns once it
// listens (with --role engine: once its engine runs). Its stderr goes to logs too, when
// not nil.
func startServeProcess(ctx context.Context, exe string, args []string, logs io.Writer) (*benchServer, error) {
	cmd := exec.Command(exe, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = envWithoutClimate(os.Environ()) // the server's settings are the flags only
	setDeathSignal(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &benchServer{cmd: cmd, scanDone: make(chan struct{}), stderr: &cappedBuffer{max: 16 << 10}}
	cmd.Stderr = s.stderr
	if logs != nil {
		cmd.Stderr = io.MultiWriter(s.stderr, logs)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", exe, err)
	}
	urlc := make(chan string, 1)
	go func() {
		defer close(s.scanDone)
		lines := bufio.NewScanner(stdout)
		sent := false
		for lines.Scan() { // read to the end so the server never blocks on its stdout
			line := lines.Text()
			if i := strings.Index(line, "listening on "); i >= 0 && !sent {
				if f := strings.Fields(line[i+len("listening on "):]); len(f) > 0 {
					urlc <- f[0]
					sent = true
				}
			} else if strings.Contains(line, "event engine running") && !sent {
				urlc <- ""
				sent = true
			}
		}
	}()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	select {
	case s.url = <-urlc:
		return s, nil
	case <-s.scanDone:
		s.stop()
		msg := strings.TrimSpace(s.stderr.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return nil, fmt.Errorf("the server exited before listening: %s", msg)
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	case <-timeout.C:
		s.stop()
		return nil, errors.New("the server did not listen within a minute")
	}
}

// stop ends the server (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (s *benchServer) stop() {
	s.once.Do(func() {
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			_ = s.cmd.Process.Kill()
		}
		select {
		case <-s.scanDone:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.scanDone
		}
		_ = s.cmd.Wait()
	})
}

// envWithoutClimate drops CLIMATE_… variables, which would otherwise configure the server.
func envWithoutClimate(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CLIMATE_") {
			out = append(out, kv)
		}
	}
	return out
}

// peakRSS reads a process's peak resident set size (VmHWM) in bytes from /proc.
func peakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmHWM(data)
}

func parseVmHWM(status []byte) (int64, error) { return parseStatusKB(status, "VmHWM:") }

// parseStatusKB reads a size in kB (e.g. "VmHWM:") from /proc/PID/status, in bytes.
func parseStatusKB(status []byte, field string) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				break
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s line in /proc/PID/status", strings.TrimSuffix(field, ":"))
}

// cappedBuffer keeps the first max bytes written to it; safe for concurrent use.
type cappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func writeAPITable(w io.Writer, rep *apiReport) error {
	if rep.Server == "subprocess" {
		on := "climate serve subprocess on SQLite"
		if rep.Database != "" {
			on = fmt.Sprintf("%d climate serve subprocess(es) on PostgreSQL (%s), clients round-robin", rep.Replicas, rep.Database)
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
	if rep.Limits {
		fmt.Fprintln(w, "The posting project has limits and a budget (--limits): every creation runs the fair-use checks")
	}
	if rep.StartSeconds > 0 {
		fmt.Fprintf(w, "Server start to listening (it reads the book and builds the availability index first): %.2f s\n", rep.StartSeconds)
	}
	fmt.Fprintf(w, "First request (dry run, on the fresh server): %.1f ms\n\n", rep.FirstRequestMS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENTS\tREQUESTS\tCREATED (201)\tNO CAPACITY (409)\tMEDIAN\tP99\tCREATIONS/S\tREQUESTS/S\tBLAZAR (MEDIAN, 1 CLIENT)")
	for _, r := range rep.Runs {
		var blazar *float64
		if r.Clients == 1 {
			blazar = rep.BlazarCreateSeconds
		}
		full := strconv.Itoa(r.NoCapacity)
		if r.GaveUp > 0 {
			full += fmt.Sprintf(" (%d gave up on concurrent bookings)", r.GaveUp)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%.2f ms\t%.2f ms\t%.1f\t%.1f\t%s\n", r.Clients, r.Requests, r.Created, full,
			r.MedianMS, r.P99MS, r.CreationsPerSecond, r.RequestsPerSecond, formatBlazar(blazar))
	}
	if err := tw.Flush(); err != nil {
		return err
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
