package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/clock"
	climatehttp "climate/http"
	"climate/http/api"
	"climate/manager"
	"climate/notify/stream"
	"climate/sqlite"
)

// streamEnv is the API with the event stream: a hub woken by the manager's commits.
type streamEnv struct {
	*env
	hub    *stream.Hub
	leases int
}

func newStreamEnv(t *testing.T, heartbeat time.Duration, limits *climatehttp.Limits) *streamEnv {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	hub := stream.New(store, stream.Config{Logger: quiet})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = hub.Run(runCtx); close(done) }()
	clk := clock.NewFake(t0)
	mgr := manager.New(store, clk, manager.Config{Notified: hub.Wake})
	api := &climatehttp.Server{Leases: mgr, Hosts: mgr, Auth: climatehttp.NoAuth{}, Logger: quiet,
		Notifications: hub, StreamHeartbeat: heartbeat}
	var url string
	if limits == nil {
		srv := httptest.NewServer(api.Handler())
		t.Cleanup(srv.Close)
		url = srv.URL
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, limited := climatehttp.NewHTTPServer(api.Handler(), ln, *limits, quiet)
		go func() { _ = srv.Serve(limited) }()
		t.Cleanup(func() { srv.Close() })
		url = "http://" + ln.Addr().String()
	}
	// Streams end when the hub stops, before the server closes.
	t.Cleanup(func() { cancel(); <-done })
	e := &streamEnv{env: &env{t: t, url: url, clk: clk, store: store}, hub: hub}
	e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "h1"}`}, http.StatusCreated)
	return e
}

// createLease creates a lease as who (a future window, so it stays PENDING) and returns
// its id.
func (e *streamEnv) createLease(name string, who map[string]string) string {
	e.t.Helper()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(e.leases) * time.Hour)
	e.leases++
	body := fmt.Sprintf(`{"name": %q, "start_date": %q, "end_date": %q,
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]}`,
		name, start.Format(api.DateFormat), start.Add(time.Hour).Format(api.DateFormat))
	l := e.mustDo(call{method: "POST", path: "/v1/leases", body: body, header: who}, http.StatusCreated)
	return l["lease"].(map[string]any)["id"].(string)
}

// sse is an open event stream, read message by message.
type sse struct {
	t    testing.TB
	resp *http.Response
	r    *bufio.Reader
}

// message is one SSE message: its fields in order, comment lines included as ":".
type message struct {
	fields [][2]string
}

func (m message) get(name string) (string, bool) {
	for _, f := range m.fields {
		if f[0] == name {
			return f[1], true
		}
	}
	return "", false
}

func (e *streamEnv) open(path string, header map[string]string) *sse {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.t.Fatalf("Content-Type = %q", ct)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
		e.t.Fatalf("Cache-Control = %q", cc)
	}
	s := &sse{t: e.t, resp: resp, r: bufio.NewReader(resp.Body)}
	first := s.next()
	if retry, _ := first.get("retry"); retry != "1000" {
		e.t.Fatalf("first message %v: want retry: 1000 and the starting id", first.fields)
	}
	return s
}

// next reads one message (up to a blank line).
func (s *sse) next() message {
	s.t.Helper()
	var m message
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			s.t.Fatalf("reading the stream: %v (message so far %v)", err, m.fields)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return m
		}
		if strings.HasPrefix(line, ":") {
			m.fields = append(m.fields, [2]string{":", strings.TrimSpace(line[1:])})
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		m.fields = append(m.fields, [2]string{name, strings.TrimPrefix(value, " ")})
	}
}

// event reads messages until one with data, skipping heartbeats, and decodes it.
func (s *sse) event() (string, api.Notification) {
	s.t.Helper()
	for {
		m := s.next()
		data, ok := m.get("data")
		if !ok {
			continue
		}
		typ, _ := m.get("event")
		id, _ := m.get("id")
		var n api.Notification
		if err := json.Unmarshal([]byte(data), &n); err != nil {
			s.t.Fatalf("data %q: %v", data, err)
		}
		if id != strconv.FormatInt(n.Seq, 10) || typ != n.EventType {
			s.t.Fatalf("message %v: id and event must be the notification's seq and event_type", m.fields)
		}
		return typ, n
	}
}

func TestEventStreamFraming(t *testing.T) {
	e := newStreamEnv(t, 0, nil)
	s := e.open("/v1/events/stream", nil)
	id := e.createLease("first", asAlice)
	m := s.next()
	data, _ := m.get("data")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(data), &raw); err != nil {
		t.Fatalf("data %q: %v", data, err)
	}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, ","); got != "created_at,event_type,id,lease_id,payload,project_id,seq" {
		t.Fatalf("data keys %s", got)
	}
	var n api.Notification
	_ = json.Unmarshal([]byte(data), &n)
	if typ, _ := m.get("event"); typ != climate.NotifyLeaseCreate || n.EventType != typ || n.LeaseID != id || n.ProjectID != "physics" || n.ID == "" || n.Seq <= 0 {
		t.Fatalf("message %v", m.fields)
	}
	if mid, _ := m.get("id"); mid != strconv.FormatInt(n.Seq, 10) {
		t.Fatalf("message %v: id must be the seq", m.fields)
	}
	if _, err := api.ParseTime(n.CreatedAt); err != nil {
		t.Fatalf("created_at %q: %v", n.CreatedAt, err)
	}
	l, err := n.Lease()
	if err != nil || l.ID != id || l.Name != "first" || l.Status != "PENDING" {
		t.Fatalf("payload: %v %+v", err, l)
	}
	// A change is the next event.
	e.mustDo(call{method: "PUT", path: "/v1/leases/" + id, body: `{"name": "renamed"}`, header: asAlice}, http.StatusOK)
	if typ, n2 := s.event(); typ != climate.NotifyLeaseUpdate || n2.Seq <= n.Seq {
		t.Fatalf("after an update: %s %+v", typ, n2)
	}
}

func TestEventStreamResume(t *testing.T) {
	e := newStreamEnv(t, 0, nil)
	a := e.createLease("a", nil)
	e.createLease("b", nil)
	e.createLease("c", nil)
	all := e.open("/v1/events/stream?after=0", nil)
	var seqs []int64
	for range 3 {
		_, n := all.event()
		seqs = append(seqs, n.Seq)
	}

	// Last-Event-ID replays from the outbox what came after it, then goes on live; it
	// wins over ?after= (an EventSource reconnects to the URL it was given).
	s := e.open("/v1/events/stream?after=0", map[string]string{"Last-Event-ID": strconv.FormatInt(seqs[0], 10)})
	for _, want := range seqs[1:] {
		if _, n := s.event(); n.Seq != want {
			t.Fatalf("replayed %d, want %d", n.Seq, want)
		}
	}
	d := e.createLease("d", nil)
	if _, n := s.event(); n.LeaseID != d {
		t.Fatalf("live after the replay: %+v, want lease d", n)
	}

	// Filtered by lease, with a replay.
	one := e.open("/v1/events/stream?after=0&lease_id="+a, nil)
	if _, n := one.event(); n.LeaseID != a || n.Seq != seqs[0] {
		t.Fatalf("lease a: %+v", n)
	}

	for _, c := range []struct {
		path, header, msg string
	}{
		{"/v1/events/stream?after=x", "", `Query parameter after "x" is not a notification id`},
		{"/v1/events/stream?after=-1", "", `Query parameter after "-1" is not a notification id`},
		{"/v1/events/stream?after=", "", `Query parameter after "" is not a notification id`},
		{"/v1/events/stream", "abc", `Last-Event-ID "abc" is not a notification id`},
		{"/v1/events/stream?event_type=lease.created", "", `Unknown event_type "lease.created": expected one of lease.create, `},
	} {
		h := map[string]string{}
		if c.header != "" {
			h["Last-Event-ID"] = c.header
		}
		checkError(t, e.do(call{method: "GET", path: c.path, header: h}), http.StatusBadRequest, c.msg)
	}
	checkError(t, e.do(call{method: "POST", path: "/v1/events/stream"}), http.StatusMethodNotAllowed)
}

func TestEventStreamProjects(t *testing.T) {
	e := newStreamEnv(t, 0, nil)
	alice := e.open("/v1/events/stream", asAlice)
	bob := e.open("/v1/events/stream", asBob)
	admin := e.open("/v1/events/stream?project_id=chemistry", nil)
	pa := e.createLease("alice-1", asAlice)
	pb := e.createLease("bob-1", asBob)
	pa2 := e.createLease("alice-2", asAlice)
	for _, c := range []struct {
		s    *sse
		want []string
	}{{alice, []string{pa, pa2}}, {bob, []string{pb}}, {admin, []string{pb}}} {
		for _, w := range c.want {
			if _, n := c.s.event(); n.LeaseID != w {
				t.Fatalf("got lease %s, want %s", n.LeaseID, w)
			}
		}
	}
	// Bob's next event is his own: alice's never reached him.
	pb2 := e.createLease("bob-2", asBob)
	if _, n := bob.event(); n.LeaseID != pb2 {
		t.Fatalf("bob got %s, want his bob-2", n.LeaseID)
	}

	// Another project's lease is as unknown as a missing one; another project is refused;
	// a replay is filtered too.
	checkError(t, e.do(call{method: "GET", path: "/v1/events/stream?lease_id=" + pa, header: asBob}), http.StatusNotFound, pa)
	checkError(t, e.do(call{method: "GET", path: "/v1/events/stream?lease_id=nope", header: asBob}), http.StatusNotFound)
	checkError(t, e.do(call{method: "GET", path: "/v1/events/stream?project_id=physics", header: asBob}), http.StatusForbidden)
	checkError(t, e.do(call{method: "GET", path: "/v1/events/stream", header: asGuest}), http.StatusForbidden)
	replay := e.open("/v1/events/stream?after=0", asBob)
	for _, w := range []string{pb, pb2} {
		if _, n := replay.event(); n.LeaseID != w {
			t.Fatalf("bob's replay: %s, want %s", n.LeaseID, w)
		}
	}
	// A reader may watch.
	e.open("/v1/events/stream?lease_id="+pa, asReader)
}

// TestEventStreamHeartbeat: a quiet stream sends comment lines, and moves the client's
// Last-Event-ID past notifications it did not ask for.
func TestEventStreamHeartbeat(t *testing.T) {
	e := newStreamEnv(t, 20*time.Millisecond, nil)
	watched := e.createLease("watched", nil)
	s := e.open("/v1/events/stream?lease_id="+watched, nil)
	all := e.open("/v1/events/stream", nil)
	e.createLease("other", nil)
	_, other := all.event()
	for {
		m := s.next()
		if _, ok := m.get("data"); ok {
			t.Fatalf("the watched lease's stream got %v", m.fields)
		}
		if c, _ := m.get(":"); c != "heartbeat" {
			t.Fatalf("message %v: want a heartbeat comment", m.fields)
		}
		if id, ok := m.get("id"); ok {
			if id != strconv.FormatInt(other.Seq, 10) {
				t.Fatalf("heartbeat id %s, want %d", id, other.Seq)
			}
			break
		}
	}
}

// TestEventStreamOutlivesWriteTimeout: the server's WriteTimeout bounds an answer, but a
// stream extends its write deadline at every message.
func TestEventStreamOutlivesWriteTimeout(t *testing.T) {
	lim := climatehttp.DefaultLimits()
	lim.WriteTimeout = 200 * time.Millisecond
	e := newStreamEnv(t, 20*time.Millisecond, &lim)
	s := e.open("/v1/events/stream", nil)
	began := time.Now()
	for time.Since(began) < 3*lim.WriteTimeout {
		s.next() // heartbeats
	}
	id := e.createLease("late", nil)
	if _, n := s.event(); n.LeaseID != id {
		t.Fatalf("after %s: %+v", time.Since(began), n)
	}
}

// stoppedService is the NotificationService of a stopping server.
type stoppedService struct{}

func (stoppedService) WatchNotifications(context.Context, climate.Identity, climate.NotificationQuery) (climate.NotificationStream, error) {
	return nil, climate.ErrStreamClosed
}

func TestEventStreamWhileStopping(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer((&climatehttp.Server{Auth: climatehttp.NoAuth{}, Logger: quiet, Notifications: stoppedService{}}).Handler())
	defer srv.Close()
	e := &env{t: t, url: srv.URL}
	r := e.do(call{method: "GET", path: "/v1/events/stream"})
	checkError(t, r, http.StatusServiceUnavailable, "The server is stopping")
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After = %q", r.header.Get("Retry-After"))
	}
}

// laggingService is a NotificationService whose stream returns its notifications, then
// reports that the reader fell behind.
type laggingService struct{ ns []climate.Notification }

func (l *laggingService) WatchNotifications(context.Context, climate.Identity, climate.NotificationQuery) (climate.NotificationStream, error) {
	return &laggingStream{ns: l.ns}, nil
}

type laggingStream struct{ ns []climate.Notification }

func (s *laggingStream) Next(context.Context) (*climate.Notification, error) {
	if len(s.ns) == 0 {
		return nil, climate.ErrStreamLagged
	}
	n := &s.ns[0]
	s.ns = s.ns[1:]
	return n, nil
}
func (s *laggingStream) Position() int64 { return 0 }
func (s *laggingStream) Close()          {}

func TestEventStreamLagged(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := &laggingService{ns: []climate.Notification{{Seq: 7, ID: "n7", EventType: climate.NotifyLeaseUpdate, LeaseID: "l", ProjectID: "p", Payload: []byte(`{}`), CreatedAt: t0}}}
	srv := httptest.NewServer((&climatehttp.Server{Auth: climatehttp.NoAuth{}, Logger: quiet, Notifications: svc}).Handler())
	defer srv.Close()
	e := &streamEnv{env: &env{t: t, url: srv.URL}}
	s := e.open("/v1/events/stream", nil)
	if _, n := s.event(); n.Seq != 7 {
		t.Fatalf("first event %+v", n)
	}
	m := s.next()
	typ, _ := m.get("event")
	data, _ := m.get("data")
	var body map[string]string
	if _, hasID := m.get("id"); typ != climatehttp.LaggedEvent || hasID || json.Unmarshal([]byte(data), &body) != nil ||
		body["last_event_id"] != "7" || !strings.Contains(body["error_message"], "reconnect with Last-Event-ID") {
		t.Fatalf("final message %v", m.fields)
	}
	if _, err := s.r.ReadByte(); err != io.EOF {
		t.Fatalf("after the lagged event: %v, want the end of the answer", err)
	}
}
