package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// SoakOptions are bench soak's settings.
type SoakOptions struct {
	URL, Token string
	PID        int
	// Attack connections by kind.
	Idle, SlowHeader, SlowBody, SlowBodyNoAuth int
	Addresses                                  int
	Before, Duration, After                    time.Duration
	Trickle, Reconnect, Pause                  time.Duration
	// Server bounds passed to the subprocess; -1 keeps its defaults.
	MaxConnections, MaxPerClient int
	Output                       string
	// Exe is the climate binary run as "serve" and "bench soak-attack"; empty: this
	// process's executable.
	Exe string
}

// soakReport is bench soak's result (its JSON output).
type soakReport struct {
	// Server is "subprocess" or the --url given.
	Server string `json:"server"`
	// MaxConnections and MaxConnectionsPerClient are the bounds given to the server; null
	// means its defaults.
	MaxConnections          *int `json:"max_connections"`
	MaxConnectionsPerClient *int `json:"max_connections_per_client"`
	// OpenFileLimit is the hard limit on open files, to which the attack process raises its
	// soft limit.
	OpenFileLimit uint64     `json:"open_file_limit"`
	Attack        soakAttack `json:"attack"`
	// Phases are the working client's requests: alone, under attack, after.
	Phases []soakPhase `json:"phases"`
	// GoalMet says whether the p99 under attack is at most GoalP99MS.
	GoalP99MS float64 `json:"goal_p99_ms"`
	GoalMet   bool    `json:"goal_met"`
	// Shed sums the server's "shedding connections" log lines (subprocess only).
	Shed *soakShed `json:"server_shed,omitempty"`
	// Server memory and descriptors (subprocess or --pid; null otherwise).
	RSSMiB *soakSeries `json:"server_rss_mib"`
	FDs    *soakSeries `json:"server_fds"`
	// PeakRSSMiB is the server's VmHWM at the end.
	PeakRSSMiB *float64 `json:"server_peak_rss_mib"`
}

type soakAttack struct {
	Idle           int     `json:"idle"`
	SlowHeader     int     `json:"slow_header"`
	SlowBody       int     `json:"slow_body"`
	SlowBodyNoAuth int     `json:"slow_body_noauth"`
	Addresses      int     `json:"addresses"`
	HoldSeconds    float64 `json:"hold_seconds"`
	// HeldAtEnd is the number of attack connections open, as the attacker sees them (a
	// connection still in the server's accept queue counts), at the end of the hold;
	// HeldMin, HeldMedian and HeldMax sample it twice a second over the hold.
	HeldAtEnd  int `json:"held_at_end"`
	HeldMin    int `json:"held_min"`
	HeldMedian int `json:"held_median"`
	HeldMax    int `json:"held_max"`
	// Dialed counts connections opened, DialErrors failed attempts, ClosedByServer
	// connections the server ended; Answers counts what the server said before closing
	// them, by status ("none": closed without a word).
	Dialed         int64            `json:"dialed"`
	DialErrors     int64            `json:"dial_errors"`
	ClosedByServer int64            `json:"closed_by_server"`
	Answers        map[string]int64 `json:"answers"`
}

type soakPhase struct {
	Name     string  `json:"name"`
	Seconds  float64 `json:"seconds"`
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	// NewConnections counts the requests that needed a new connection (the others reused
	// the client's keep-alive connection).
	NewConnections int `json:"new_connections"`
	// FirstError describes the first failed request, if any.
	FirstError string  `json:"first_error,omitempty"`
	P50MS      float64 `json:"p50_ms"`
	P99MS      float64 `json:"p99_ms"`
	MaxMS      float64 `json:"max_ms"`
}

type soakShed struct {
	Lines   int    `json:"lines"`
	Refused uint64 `json:"refused"`
	Evicted uint64 `json:"evicted"`
}

// soakSeries is a server figure before the attack, at its peak during it, and after.
type soakSeries struct {
	Before float64 `json:"before"`
	Peak   float64 `json:"peak"`
	After  float64 `json:"after"`
}

// soakGoalP99 is the working client's p99 goal under attack.
const soakGoalP99 = 100 * time.Millisecond

// Soak runs bench soak and writes its report to stdout as o.Output says (table or json).
func Soak(ctx context.Context, o *SoakOptions, stdout, stderr io.Writer) error {
	if err := checkOutput(o.Output); err != nil {
		return err
	}
	rep, err := runSoak(ctx, o, stderr)
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("interrupted")
		}
		return err
	}
	if o.Output == "json" {
		return writeJSON(stdout, rep)
	}
	return writeSoakTable(stdout, rep)
}

func runSoak(ctx context.Context, o *SoakOptions, stderr io.Writer) (*soakReport, error) {
	total := o.Idle + o.SlowHeader + o.SlowBody + o.SlowBodyNoAuth
	switch {
	case o.Idle < 0 || o.SlowHeader < 0 || o.SlowBody < 0 || o.SlowBodyNoAuth < 0:
		return nil, errors.New("--idle, --slow-header, --slow-body, --slow-body-noauth: want 0 or more")
	case o.Addresses < 0 || o.Addresses > 250:
		return nil, fmt.Errorf("--addresses %d: want 0 to 250", o.Addresses)
	case o.Before < 0 || o.After < 0 || o.Duration <= 0:
		return nil, errors.New("--duration must be positive, --before and --after not negative")
	case o.Trickle <= 0 || o.Reconnect <= 0 || o.Pause < 0:
		return nil, errors.New("--trickle and --reconnect must be positive, --pause not negative")
	case o.URL != "" && (o.MaxConnections >= 0 || o.MaxPerClient >= 0):
		return nil, errors.New("--max-connections and --max-connections-per-client configure the server the soak starts, not --url")
	case o.URL == "" && (o.Token != "" || o.PID != 0):
		return nil, errors.New("--token and --pid go with --url")
	}
	rep := &soakReport{Server: o.URL, GoalP99MS: millis(soakGoalP99), Attack: soakAttack{
		Idle: o.Idle, SlowHeader: o.SlowHeader, SlowBody: o.SlowBody, SlowBodyNoAuth: o.SlowBodyNoAuth,
		Addresses: o.Addresses, HoldSeconds: o.Duration.Seconds(),
	}}
	if o.MaxConnections >= 0 {
		rep.MaxConnections = &o.MaxConnections
	}
	if o.MaxPerClient >= 0 {
		rep.MaxConnectionsPerClient = &o.MaxPerClient
	}

	// Descriptors: the attack process needs one per connection, plus spare; it raises its
	// soft limit to the hard one, which it inherits.
	soft, hard, err := raiseOpenFileLimit()
	if err != nil && soft == 0 {
		fmt.Fprintf(stderr, "open-file limit unknown (%v); going on\n", err)
	} else {
		rep.OpenFileLimit = hard
		if need := uint64(total) + 64; hard < need {
			return nil, fmt.Errorf("the open-file limit is %d (ulimit -Hn), not enough for %d attack connections: lower the counts or raise the limit", hard, total)
		}
	}
	exe, err := climateBinary(o.Exe)
	if err != nil {
		return nil, err
	}

	base, token, pid := strings.TrimRight(o.URL, "/"), o.Token, o.PID
	var shed *shedLog
	var srv *soakServer
	if o.URL == "" {
		s, tok, sl, err := startSoakServer(ctx, exe, o, stderr)
		if err != nil {
			return nil, err
		}
		defer s.cleanup()
		srv, base, token, pid, shed = s, s.URL, tok, s.Cmd.Process.Pid, sl
		rep.Server = "subprocess"
	} else if err := checkLoopbackURL(o.URL); err != nil {
		return nil, err
	}
	host := strings.TrimPrefix(base, "http://")

	sources, err := soakSources(o.Addresses, host)
	if err != nil {
		return nil, err
	}
	if o.Addresses > 0 && sources == nil {
		fmt.Fprintln(stderr, "loopback addresses other than 127.0.0.1 are not usable here: the attack comes from the working client's address")
		rep.Attack.Addresses = 0
	}

	// The working client runs here; the attack runs in a process of its own, so that its
	// thousands of goroutines do not delay the working client's in this process's
	// scheduler: the latencies measured are the server's.
	w := newSoakWorker(base, token, sources != nil)
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	workDone := make(chan struct{})
	go func() { defer close(workDone); w.run(workCtx, o.Pause) }()

	var rss, fds *soakSeries
	if pid != 0 {
		if r, err := procRSS(pid); err == nil {
			rss = &soakSeries{Before: mib(r)}
		}
		if n, err := procFDs(pid); err == nil {
			fds = &soakSeries{Before: float64(n)}
		}
	}

	phase := func(name string, d time.Duration) error {
		fmt.Fprintf(stderr, "%s: %s\n", name, d)
		w.startPhase(name)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	if err := phase("alone", o.Before); err != nil {
		return nil, err
	}

	att, err := startSoakAttack(exe, o, host, len(sources), token)
	if err != nil {
		return nil, err
	}
	defer att.kill()
	fmt.Fprintf(stderr, "under attack: %s, %d connections\n", o.Duration, total)
	w.startPhase("under attack")
	var held []int
	tick := time.NewTicker(500 * time.Millisecond)
	end := time.NewTimer(o.Duration)
	p := &progressLine{w: stderr}
sampling:
	for {
		select {
		case <-tick.C:
			st, ok := att.latest()
			if ok {
				held = append(held, st.Held)
			}
			if rss != nil {
				if r, err := procRSS(pid); err == nil {
					rss.Peak = max(rss.Peak, mib(r))
				}
			}
			if fds != nil {
				if n, err := procFDs(pid); err == nil {
					fds.Peak = max(fds.Peak, float64(n))
				}
			}
			p.set("attack connections held: %d of %d; opened %d, closed by the server %d", st.Held, total, st.Dialed, st.ClosedByServer)
		case <-att.done:
			break sampling
		case <-end.C:
			break sampling
		case <-ctx.Done():
			break sampling
		}
	}
	tick.Stop()
	p.done()
	final, err := att.finish()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := phase("after", o.After); err != nil {
		return nil, err
	}
	stopWork()
	<-workDone
	rep.Phases = w.phases()

	if len(held) > 0 {
		s := slices.Clone(held)
		slices.Sort(s)
		rep.Attack.HeldMin, rep.Attack.HeldMedian, rep.Attack.HeldMax = s[0], s[len(s)/2], s[len(s)-1]
	}
	rep.Attack.HeldAtEnd, rep.Attack.Dialed, rep.Attack.DialErrors = final.Held, final.Dialed, final.DialErrors
	rep.Attack.ClosedByServer, rep.Attack.Answers = final.ClosedByServer, final.Answers
	for _, ph := range rep.Phases {
		if ph.Name == "under attack" {
			rep.GoalMet = ph.Requests > 0 && ph.Errors == 0 && ph.P99MS <= rep.GoalP99MS
		}
	}
	if pid != 0 {
		if rss != nil {
			if r, err := procRSS(pid); err == nil {
				rss.After = mib(r)
			}
			rep.RSSMiB = rss
		}
		if fds != nil {
			if n, err := procFDs(pid); err == nil {
				fds.After = float64(n)
			}
			rep.FDs = fds
		}
		if hwm, err := peakRSS(pid); err == nil {
			v := mib(hwm)
			rep.PeakRSSMiB = &v
		}
	}
	if srv != nil {
		srv.Stop() // the server writes its last shedding line as it stops
	}
	if shed != nil {
		s := shed.totals()
		rep.Shed = &s
	}
	return rep, nil
}

func mib(b int64) float64 { return round(float64(b)/(1<<20), 1) }

// checkLoopbackURL accepts only http:// URLs on a loopback address: the soak is an attack.
func checkLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Port() == "" {
		return fmt.Errorf("--url %q: want http://127.0.0.1:PORT", raw)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--url %q: the soak only targets loopback addresses (127.0.0.1, ::1)", raw)
	}
	return nil
}

// soakSources returns n loopback addresses 127.0.0.2… from which the attack connects
// to hostport, or nil when n is 0 or they are not usable (only Linux routes all of
// 127.0.0.0/8 to loopback by default).
func soakSources(n int, hostport string) ([]net.IP, error) {
	if n == 0 {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || ip.To4() == nil {
		return nil, nil // IPv6 loopback is one address
	}
	probe := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	c, err := probe.Dial("tcp", hostport)
	if err != nil {
		return nil, nil
	}
	c.Close()
	out := make([]net.IP, n)
	for i := range out {
		out[i] = net.IPv4(127, 0, 0, byte(2+i))
	}
	return out, nil
}

// soakServer is the server subprocess and its files.
type soakServer struct {
	*Server
	dir string
}

func (s *soakServer) cleanup() {
	s.Stop()
	os.RemoveAll(s.dir)
}

// startSoakServer starts "climate serve --auth tokens" with fresh random tokens (never
// shown), registers one host, and returns the member's token.
func startSoakServer(ctx context.Context, exe string, o *SoakOptions, stderr io.Writer) (*soakServer, string, *shedLog, error) {
	dir, err := os.MkdirTemp("", "climate-soak-")
	if err != nil {
		return nil, "", nil, err
	}
	fail := func(err error) (*soakServer, string, *shedLog, error) {
		os.RemoveAll(dir)
		return nil, "", nil, err
	}
	admin, member := randomToken(), randomToken()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(admin+" soak-admin ops admin\n"+member+" soak-member soak member\n"), 0o600); err != nil {
		return fail(err)
	}
	args := []string{"--data-dir", dir, "--auth", "tokens", "--tokens-file", tokens, "--log-level", "warn"}
	if o.MaxConnections >= 0 {
		args = append(args, "--max-connections", strconv.Itoa(o.MaxConnections))
	}
	if o.MaxPerClient >= 0 {
		args = append(args, "--max-connections-per-client", strconv.Itoa(o.MaxPerClient))
	}
	fmt.Fprintln(stderr, "starting server")
	sl := &shedLog{}
	srv, err := StartServer(ctx, exe, args, sl)
	if err != nil {
		return fail(err)
	}
	s := &soakServer{Server: srv, dir: dir}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/os-hosts", strings.NewReader(`{"name": "soak-1"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Auth-Token", admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.cleanup()
		return nil, "", nil, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		s.cleanup()
		return nil, "", nil, fmt.Errorf("register a host: HTTP %d: %s", resp.StatusCode, body)
	}
	return s, member, sl, nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// shedLog reads the server's log and sums its "shedding connections" lines.
type shedLog struct {
	mu      sync.Mutex
	partial []byte
	sums    soakShed
}

func (s *shedLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		line := string(s.partial[:i])
		s.partial = s.partial[i+1:]
		if !strings.Contains(line, `msg="shedding connections"`) {
			continue
		}
		s.sums.Lines++
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "refused":
				s.sums.Refused += n
			case "evicted":
				s.sums.Evicted += n
			}
		}
	}
	return len(p), nil
}

func (s *shedLog) totals() soakShed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sums
}

// soakWorker is the authenticated client that keeps working: it creates a lease, reads it
// and deletes it, again and again, and records each request's latency in the current phase.
type soakWorker struct {
	client *http.Client
	base   string
	token  string
	mu     sync.Mutex
	all    []*soakPhaseRec
}

type soakPhaseRec struct {
	name     string
	start    time.Time
	end      time.Time
	lat      []time.Duration
	newConns int
	errors   int
	firstErr string
}

func newSoakWorker(base, token string, fromFirstAddress bool) *soakWorker {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if fromFirstAddress {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	}
	return &soakWorker{base: base, token: token, client: &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: d.DialContext, MaxIdleConns: 2, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute,
		},
	}}
}

func (w *soakWorker) startPhase(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if n := len(w.all); n > 0 {
		w.all[n-1].end = now
	}
	w.all = append(w.all, &soakPhaseRec{name: name, start: now})
}

// record adds one request's outcome to the current phase.
func (w *soakWorker) record(d time.Duration, newConn bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.all) == 0 {
		return
	}
	ph := w.all[len(w.all)-1]
	if newConn {
		ph.newConns++
	}
	if err != nil {
		ph.errors++
		if ph.firstErr == "" {
			ph.firstErr = err.Error()
		}
		return
	}
	ph.lat = append(ph.lat, d)
}

func (w *soakWorker) phases() []soakPhase {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []soakPhase
	for _, ph := range w.all {
		end := ph.end
		if end.IsZero() {
			end = time.Now()
		}
		slices.Sort(ph.lat)
		p := soakPhase{Name: ph.name, Seconds: round(end.Sub(ph.start).Seconds(), 1), Requests: len(ph.lat) + ph.errors,
			NewConnections: ph.newConns, Errors: ph.errors, FirstError: ph.firstErr}
		if len(ph.lat) > 0 {
			p.P50MS, p.P99MS, p.MaxMS = millis(percentile(ph.lat, 0.5)), millis(percentile(ph.lat, 0.99)), millis(ph.lat[len(ph.lat)-1])
		}
		out = append(out, p)
	}
	return out
}

// run loops until ctx is done: create a lease a day ahead, read it, delete it.
func (w *soakWorker) run(ctx context.Context, pause time.Duration) {
	start := time.Now().UTC().Add(24 * time.Hour).Format("2006-01-02 15:04")
	end := time.Now().UTC().Add(25 * time.Hour).Format("2006-01-02 15:04")
	for i := 0; ctx.Err() == nil; i++ {
		body := fmt.Sprintf(`{"name": "soak-%d", "start_date": %q, "end_date": %q, "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]}`, i, start, end)
		status, out, err := w.do(ctx, http.MethodPost, "/v1/leases", body)
		var created struct {
			Lease struct {
				ID string `json:"id"`
			} `json:"lease"`
		}
		switch {
		case err != nil:
		case status == http.StatusCreated && json.Unmarshal(out, &created) == nil && created.Lease.ID != "":
			w.do(ctx, http.MethodGet, "/v1/leases/"+created.Lease.ID, "")
			w.do(ctx, http.MethodDelete, "/v1/leases/"+created.Lease.ID, "")
		default: // 409 (no free host, with another server's data) is an answer too
			w.do(ctx, http.MethodGet, "/v1/leases", "")
		}
		if pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
}

// do sends one request and records it: any answer but 2xx and 409 is an error.
func (w *soakWorker) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.base+path, r)
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Auth-Token", w.token)
	newConn := false
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { newConn = newConn || !i.Reused },
	}))
	t0 := time.Now()
	resp, err := w.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			w.record(0, newConn, fmt.Errorf("%s %s: %w", method, path, err))
		}
		return 0, nil, err
	}
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	d := time.Since(t0)
	if err == nil && resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusConflict {
		err = fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, strings.Join(strings.Fields(string(out)), " "))
	}
	if ctx.Err() == nil {
		w.record(d, newConn, err)
	}
	return resp.StatusCode, out, err
}

func writeSoakTable(w io.Writer, rep *soakReport) error {
	bound := func(v *int) string {
		if v == nil {
			return "server default"
		}
		return strconv.Itoa(*v)
	}
	a := rep.Attack
	total := a.Idle + a.SlowHeader + a.SlowBody + a.SlowBodyNoAuth
	on := "climate serve --auth tokens subprocess on SQLite"
	if rep.Server != "subprocess" {
		on = rep.Server
	}
	fmt.Fprintf(w, "Soak: %s, --max-connections %s, --max-connections-per-client %s\n", on, bound(rep.MaxConnections), bound(rep.MaxConnectionsPerClient))
	from := "the working client's address"
	if a.Addresses > 0 {
		from = fmt.Sprintf("%d loopback addresses (127.0.0.2 on)", a.Addresses)
	}
	fmt.Fprintf(w, "Attack: %d connections (%d idle, %d slow headers, %d slow bodies with a token, %d without) from %s, held %.0f s\n",
		total, a.Idle, a.SlowHeader, a.SlowBody, a.SlowBodyNoAuth, from, a.HoldSeconds)
	fmt.Fprintf(w, "Working client: create, read, delete a lease in a loop, with a member's token, from 127.0.0.1\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PHASE\tSECONDS\tREQUESTS\tNEW CONNECTIONS\tERRORS\tP50\tP99\tMAX")
	for _, p := range rep.Phases {
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%d\t%d\t%.2f ms\t%.2f ms\t%.2f ms\n", p.Name, p.Seconds, p.Requests, p.NewConnections, p.Errors, p.P50MS, p.P99MS, p.MaxMS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range rep.Phases {
		if p.FirstError != "" {
			fmt.Fprintf(w, "First error %s: %s\n", p.Name, p.FirstError)
		}
	}
	verdict := "met"
	if !rep.GoalMet {
		verdict = "NOT met"
	}
	fmt.Fprintf(w, "Goal under attack, p99 ≤ %.0f ms without errors: %s\n\n", rep.GoalP99MS, verdict)

	fmt.Fprintf(w, "Attack connections open (attacker's view, including the server's accept queue): %d at the end of the hold; min %d, median %d, max %d (sampled twice a second)\n",
		a.HeldAtEnd, a.HeldMin, a.HeldMedian, a.HeldMax)
	answers := make([]string, 0, len(a.Answers))
	for k := range a.Answers {
		answers = append(answers, k)
	}
	slices.Sort(answers)
	for i, k := range answers {
		answers[i] = fmt.Sprintf("%s: %d", k, a.Answers[k])
	}
	fmt.Fprintf(w, "Opened %d, closed by the server %d (answers before closing: %s), failed to connect %d\n",
		a.Dialed, a.ClosedByServer, strings.Join(answers, ", "), a.DialErrors)
	if rep.Shed != nil {
		fmt.Fprintf(w, "Server log: %d shedding lines, %d connections refused (503), %d evicted (idle or headers unfinished)\n",
			rep.Shed.Lines, rep.Shed.Refused, rep.Shed.Evicted)
	}
	if rep.RSSMiB != nil {
		fmt.Fprintf(w, "Server RSS: %.1f MiB before, %.1f MiB at the peak of the attack, %.1f MiB after", rep.RSSMiB.Before, rep.RSSMiB.Peak, rep.RSSMiB.After)
		if rep.PeakRSSMiB != nil {
			fmt.Fprintf(w, " (VmHWM %.1f MiB)", *rep.PeakRSSMiB)
		}
		fmt.Fprintln(w)
	}
	if rep.FDs != nil {
		fmt.Fprintf(w, "Server open descriptors: %.0f before, %.0f at the peak, %.0f after\n", rep.FDs.Before, rep.FDs.Peak, rep.FDs.After)
	}
	if rep.OpenFileLimit > 0 {
		fmt.Fprintf(w, "Open-file limit of the attack process (hard limit; it raises its soft limit to it): %d\n", rep.OpenFileLimit)
	}
	return nil
}
