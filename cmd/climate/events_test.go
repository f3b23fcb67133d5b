package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"climate/http/api"
	"climate/postgres"
)

// countingProxy forwards to a server and counts the requests by kind; with noStream it
// answers the event stream 404, as a server without it does.
type countingProxy struct {
	url      string
	mu       sync.Mutex
	gets     int // GET /v1/leases/{id}
	streams  int // GET /v1/events/stream
	noStream bool
	// opened gets a value when a stream's answer starts: the server has subscribed it.
	opened chan struct{}
}

func newCountingProxy(t testing.TB, target string, noStream bool) *countingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{noStream: noStream, opened: make(chan struct{}, 16)}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // pass the stream through as it comes
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		switch {
		case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/leases/"):
			p.gets++
		case r.URL.Path == "/v1/events/stream":
			p.streams++
		}
		p.mu.Unlock()
		if p.noStream && r.URL.Path == "/v1/events/stream" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error_code": 404, "error_message": "The resource could not be found.", "error_name": "NOT_FOUND"}`))
			return
		}
		if r.URL.Path == "/v1/events/stream" {
			w = &openedWriter{ResponseWriter: w, opened: p.opened}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// openedWriter signals when the answer's header is written.
type openedWriter struct {
	http.ResponseWriter
	opened chan struct{}
}

func (w *openedWriter) WriteHeader(status int) {
	w.ResponseWriter.WriteHeader(status)
	select {
	case w.opened <- struct{}{}:
	default:
	}
}

func (w *openedWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (p *countingProxy) counts() (gets, streams int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gets, p.streams
}

// TestCLIWaitIsPushed: lease wait and lease create --wait learn of the start from the
// event stream, not by polling: whatever the time until the start, they read the lease
// at most twice (to resolve it, and once the stream is open).
func TestCLIWaitIsPushed(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "h1")
	c.ok("host", "create", "h2")
	c.ok("host", "create", "h3")
	proxy := newCountingProxy(t, c.url, false)

	l := c.leaseJSON("lease", "create", "soon", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", "+1s", "--end-date", "+1h")
	out, errOut, err := runClimate(t, "lease", "wait", l.ID, "--url", proxy.url, "--interval", "50ms", "-o", "value", "-c", "status")
	if err != nil || out != "ACTIVE\n" {
		t.Fatalf("wait: %v %q\nstderr:\n%s", err, out, errOut)
	}
	if gets, streams := proxy.counts(); gets > 2 || streams != 1 {
		t.Fatalf("lease wait made %d GET /v1/leases/{id} and %d stream requests; want at most 2 and 1 (polling every 50 ms would make ~20)", gets, streams)
	}

	out, errOut, err = runClimate(t, "lease", "create", "next", "--url", proxy.url, "--reservation", "resource_type=physical:host,min=1,max=1",
		"--start-date", "+1s", "--end-date", "+1h", "--wait", "--interval", "50ms", "-o", "value", "-c", "status")
	if err != nil || out != "ACTIVE\n" || !strings.Contains(errOut, "Waiting for lease next to be ACTIVE") {
		t.Fatalf("create --wait: %v %q\nstderr:\n%s", err, out, errOut)
	}
	if gets, streams := proxy.counts(); gets > 3 || streams != 2 {
		t.Fatalf("create --wait: %d GET /v1/leases/{id} and %d stream requests in all; want at most 3 and 2", gets, streams)
	}

	// Waiting for the end.
	c.ok("lease", "create", "short", "--reservation", "resource_type=physical:host,min=1,max=1", "--end-date", "+2s") // long enough for a loaded machine to create it before it ends
	if out, errOut, err := runClimate(t, "lease", "wait", "short", "--status", "terminated", "-o", "value", "-c", "status"); err != nil || out != "TERMINATED\n" {
		t.Fatalf("wait for TERMINATED: %v %q\n%s", err, out, errOut)
	}

	// Deleting the lease ends a wait (whether it is seen through the stream or when the
	// wait reads the lease).
	proxy = newCountingProxy(t, c.url, false)
	later := c.leaseJSON("lease", "create", "later", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", "+1h", "--end-date", "+2h")
	waited := make(chan error, 1)
	go func() {
		_, _, err := runClimate(t, "lease", "wait", later.ID, "--url", proxy.url, "--timeout", "30s")
		waited <- err
	}()
	<-proxy.opened // the wait is subscribed
	c.ok("lease", "delete", later.ID)
	if err := <-waited; err == nil || err.Error() != "lease later was deleted" {
		t.Fatalf("wait on a deleted lease: %v", err)
	}
}

// TestCLIWaitPollsWithoutTheStream: against a server without the event stream, wait
// polls and still returns.
func TestCLIWaitPollsWithoutTheStream(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "h1")
	proxy := newCountingProxy(t, c.url, true)
	l := c.leaseJSON("lease", "create", "soon", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", "+1s", "--end-date", "+1h")
	out, errOut, err := runClimate(t, "lease", "wait", l.ID, "--url", proxy.url, "--interval", "100ms", "-o", "value", "-c", "status")
	if err != nil || out != "ACTIVE\n" {
		t.Fatalf("wait: %v %q\nstderr:\n%s", err, out, errOut)
	}
	if gets, streams := proxy.counts(); gets < 3 || streams != 1 {
		t.Fatalf("%d GETs and %d stream requests: want polling after one refused stream", gets, streams)
	}
	c.fails("does not serve live notifications (GET /v1/events/stream)", "events", "watch", "--url", proxy.url)
}

func TestCLIEventsWatch(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "h1")
	day := "2030-01-02"
	c.ok("lease", "create", "one", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", day+" 10:00", "--end-date", day+" 11:00")
	c.ok("lease", "create", "two", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", day+" 12:00", "--end-date", day+" 13:00")
	c.ok("lease", "update", "one", "--prolong-for", "30m")

	// JSON lines, replayed from the first kept.
	out := c.ok("events", "watch", "--after", "0", "--count", "3", "-o", "json")
	var got []string
	var first api.Notification
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var n api.Notification
		if err := json.Unmarshal([]byte(line), &n); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if i == 0 {
			first = n
		}
		l, err := n.Lease()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n.EventType+" "+l.Name)
	}
	if strings.Join(got, ", ") != "lease.create one, lease.create two, lease.update one" {
		t.Fatalf("events: %q", got)
	}

	// A table, one lease, one type; and resuming after a seq.
	out = c.ok("events", "watch", "--after", "0", "--count", "1", "--lease", "one", "--event", "lease.update")
	rows := lines(out)
	if len(rows) != 2 || strings.Join(rows[0], " ") != "TIME EVENT TYPE STATUS LEASE ID LEASE NAME" ||
		len(rows[1]) != 5 || rows[1][1] != "lease.update" || rows[1][2] != "PENDING" || rows[1][4] != "one" {
		t.Fatalf("table:\n%s", out)
	}
	out = c.ok("events", "watch", "--after", "1", "--count", "1", "-o", "value", "-c", "seq,event_type,lease_name")
	if out != "2 lease.create two\n" || first.Seq != 1 {
		t.Fatalf("--after 1: %q (first seq %d)", out, first.Seq)
	}

	c.fails(`Unknown event_type "lease.started"`, "events", "watch", "--event", "lease.started")
	c.fails("No lease with name or id \"nope\"", "events", "watch", "--lease", "nope")
	c.fails("--sort-by and --reverse do not apply to a stream", "events", "watch", "--sort-by", "time")
	c.fails(`--column "colour": no such field`, "events", "watch", "-c", "colour")
	c.fails("--count -1: want a positive number", "events", "watch", "--count", "-1")
}

// TestWaitAcrossReplicasOnPostgres: the engine runs in one replica, the wait talks to an
// API-only replica whose hub never re-reads on its own (hubMaxSleep of an hour): the
// start reaches the wait through LISTEN/NOTIFY alone.
func TestWaitAcrossReplicasOnPostgres(t *testing.T) {
	dsn := postgres.TestDSN(t)
	startServer(t, serveOptions{database: dsn, role: "engine"})
	api := startServer(t, serveOptions{database: dsn, role: "api", hubMaxSleep: time.Hour})
	waitAcrossProcesses(t, api.url)
}

// TestWaitAcrossProcessesOnSQLite: an API-only process shares the data directory with
// the engine's process, which cannot wake it: its hub re-reads the outbox every second
// while someone watches.
func TestWaitAcrossProcessesOnSQLite(t *testing.T) {
	dir := t.TempDir()
	startServer(t, serveOptions{dataDir: dir, role: "engine"})
	api := startServer(t, serveOptions{dataDir: dir, role: "api"})
	waitAcrossProcesses(t, api.url)
}

func waitAcrossProcesses(t *testing.T, apiURL string) {
	t.Helper()
	proxy := newCountingProxy(t, apiURL, false)
	if _, errOut, err := runClimate(t, "host", "create", "h1", "--url", apiURL); err != nil {
		t.Fatalf("host create: %v %s", err, errOut)
	}
	out, errOut, err := runClimate(t, "lease", "create", "there", "--url", proxy.url, "--reservation", "resource_type=physical:host,min=1,max=1",
		"--start-date", "+1s", "--end-date", "+1h", "--wait", "--timeout", "1m", "-o", "value", "-c", "status")
	if err != nil || out != "ACTIVE\n" {
		t.Fatalf("create --wait: %v %q\nstderr:\n%s", err, out, errOut)
	}
	if gets, streams := proxy.counts(); gets > 1 || streams != 1 {
		t.Fatalf("%d GET /v1/leases/{id} and %d streams: the start must come through the stream", gets, streams)
	}
}
