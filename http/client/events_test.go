package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"climate/clock"
	climatehttp "climate/http"
	"climate/http/api"
	"climate/http/client"
	"climate/manager"
	"climate/notify/stream"
	"climate/sqlite"
)

// streamServer is the API with its event stream; lastEventIDs records the Last-Event-ID
// of every stream request.
type streamServer struct {
	srv          *httptest.Server
	api          *client.Client // without keep-alive: unaffected when the stream's connection is cut
	mu           sync.Mutex
	lastEventIDs []string
}

func newStreamServer(t *testing.T) *streamServer {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	hub := stream.New(st, stream.Config{Logger: quiet})
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = hub.Run(runCtx); close(done) }()
	m := manager.New(st, clock.Real{}, manager.Config{Notified: hub.Wake})
	h := (&climatehttp.Server{Leases: m, Hosts: m, Auth: climatehttp.NoAuth{}, Logger: quiet, Notifications: hub}).Handler()
	s := &streamServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events/stream" {
			s.mu.Lock()
			s.lastEventIDs = append(s.lastEventIDs, r.Header.Get("Last-Event-ID"))
			s.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { cancel(); <-done; s.srv.Close() })
	s.api = s.client(t)
	s.api.HTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if _, err := s.api.CreateHost(ctx, map[string]any{"name": "h1"}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *streamServer) client(t *testing.T) *client.Client {
	c, err := client.New(s.srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	c.HTTP = &http.Client{Transport: &http.Transport{}}
	return c
}

var leases = 0

// create creates a lease in the future (it stays PENDING) and returns its id.
func (s *streamServer) create(t *testing.T, name string) string {
	t.Helper()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(leases) * time.Hour)
	leases++
	l, err := s.api.CreateLease(ctx, api.LeaseRequest{Name: name, StartDate: start.Format(api.DateFormat), EndDate: start.Add(time.Hour).Format(api.DateFormat),
		Reservations: []map[string]any{{"resource_type": "physical:host", "min": 1, "max": 1}}})
	if err != nil {
		t.Fatal(err)
	}
	return l.ID
}

// receive reads one notification, failing if the stream ends.
func receive(t *testing.T, st *client.Stream) api.Notification {
	t.Helper()
	select {
	case n, ok := <-st.Notifications():
		if !ok {
			t.Fatalf("stream ended: %v", st.Err())
		}
		return n
	case <-time.After(10 * time.Second): // a failsafe, not a wait
		t.Fatal("no notification within 10 s")
	}
	return api.Notification{}
}

func TestWatchReconnectsWhereItLeftOff(t *testing.T) {
	s := newStreamServer(t)
	c := s.client(t)
	s.create(t, "before")
	st, err := c.Watch(ctx, client.WatchQuery{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := s.create(t, "a")
	if n := receive(t, st); n.LeaseID != a || n.EventType != "lease.create" {
		t.Fatalf("first: %+v (the lease created before Watch must not come)", n)
	} else if l, err := n.Lease(); err != nil || l.Name != "a" {
		t.Fatalf("payload: %v %+v", err, l)
	}

	// The connection drops; the leases created meanwhile come after the reconnection,
	// each once, in order.
	s.srv.CloseClientConnections()
	want := []string{s.create(t, "b"), s.create(t, "c"), s.create(t, "d")}
	for _, w := range want {
		if n := receive(t, st); n.LeaseID != w {
			t.Fatalf("after the reconnection: %s, want %s", n.LeaseID, w)
		}
	}
	s.mu.Lock()
	ids := append([]string(nil), s.lastEventIDs...)
	s.mu.Unlock()
	if len(ids) != 2 || ids[0] != "" || ids[1] == "" {
		t.Fatalf("Last-Event-IDs sent: %q, want none then the position", ids)
	}

	// Filtered by lease, with a replay from the start.
	one, err := c.Watch(ctx, client.WatchQuery{LeaseID: want[1], Replay: true})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if n := receive(t, one); n.LeaseID != want[1] {
		t.Fatalf("lease c's stream: %+v", n)
	}

	st.Close()
	if _, ok := <-st.Notifications(); ok || st.Err() != nil {
		t.Fatalf("after Close: channel open %v, Err %v", ok, st.Err())
	}
}

func TestWatchRefusals(t *testing.T) {
	s := newStreamServer(t)
	c := s.client(t)
	if _, err := c.Watch(ctx, client.WatchQuery{LeaseID: "nope"}); !client.IsNotFound(err) {
		t.Fatalf("unknown lease: %v", err)
	}
	if _, err := c.Watch(ctx, client.WatchQuery{EventTypes: []string{"lease.start"}}); err == nil || !strings.Contains(err.Error(), `Unknown event_type "lease.start"`) {
		t.Fatalf("unknown type: %v", err)
	}
	// A server without the stream (an older Climate, Blazar) answers 404.
	old := newServer(t)
	if _, err := old.Watch(ctx, client.WatchQuery{}); !client.IsNotFound(err) {
		t.Fatalf("server without the stream: %v", err)
	}
}

// TestWatchParsesAndResumes runs a scripted server: CRLF line ends, comments, id-only
// messages, a stream.lagged event (reconnect at once with the last id), and a 404 on a
// later reconnection (the stream ends with it).
func TestWatchParsesAndResumes(t *testing.T) {
	var mu sync.Mutex
	var got []string // Last-Event-ID per request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Last-Event-ID"))
		n := len(got)
		mu.Unlock()
		if n == 3 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error_code": 404, "error_message": "Object with {'lease_id': 'x'} not found", "error_name": "NOT_FOUND"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		if n == 1 {
			fmt.Fprint(w, "retry: 1000\r\nid: 4\r\n\r\n: heartbeat\r\n\r\n")
			fmt.Fprint(w, "id: 5\r\nevent: lease.create\r\ndata: {\"seq\": 5, \"event_type\": \"lease.create\", \"lease_id\": \"x\"}\r\n\r\n")
			fmt.Fprint(w, ": heartbeat\nid: 9\n\n")
			fmt.Fprint(w, "event: stream.lagged\ndata: {\"error_message\": \"fell behind\"}\n\n")
			return
		}
		fmt.Fprint(w, "id: 12\nevent: lease.update\ndata: {\"seq\": 12,\ndata: \"event_type\": \"lease.update\"}\n\n")
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Watch(ctx, client.WatchQuery{LeaseID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n := receive(t, st); n.Seq != 5 || n.EventType != "lease.create" {
		t.Fatalf("first: %+v", n)
	}
	if n := receive(t, st); n.Seq != 12 || n.EventType != "lease.update" {
		t.Fatalf("after the lagged event: %+v (multi-line data)", n)
	}
	if _, ok := <-st.Notifications(); ok {
		t.Fatal("the stream went on after a 404")
	}
	if !client.IsNotFound(st.Err()) {
		t.Fatalf("Err = %v, want the 404", st.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, ",") != ",9,12" {
		t.Fatalf("Last-Event-IDs %q, want none, 9 (the heartbeat's position), 12", got)
	}
}
