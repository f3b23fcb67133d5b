package connlimit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// failsafe bounds every wait on the network, so that a broken server fails the test
// instead of hanging it; the waits themselves end on events.
const failsafe = 10 * time.Second

// harness is an http.Server on a loopback Listener with cfg. Its handler answers "ok",
// or blocks until release is closed when the path is /block or /expendable (which first
// marks its connection Expendable).
type harness struct {
	t       *testing.T
	l       *Listener
	addr    string
	states  chan http.ConnState // every state change, after the Listener has seen it
	release chan struct{}
	entered chan struct{} // one value per request that reached /block
	logs    chan slog.Record
	once    sync.Once
}

// unblock lets the requests to /block finish.
func (h *harness) unblock() { h.once.Do(func() { close(h.release) }) }

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t: t, addr: inner.Addr().String(),
		states: make(chan http.ConnState, 1000), release: make(chan struct{}),
		entered: make(chan struct{}, 100), logs: make(chan slog.Record, 100),
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(recordHandler{h.logs})
	}
	h.l = New(inner, cfg)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/expendable":
				Expendable(r.Context())
				fallthrough
			case "/block":
				h.entered <- struct{}{}
				<-h.release
			}
			_, _ = io.WriteString(w, "ok")
		}),
		ReadHeaderTimeout: time.Minute,
		ConnState:         func(_ net.Conn, s http.ConnState) { h.states <- s },
	}
	h.l.Server(srv)
	go func() { _ = srv.Serve(h.l) }()
	t.Cleanup(func() {
		h.unblock()
		_ = srv.Close()
	})
	return h
}

// recordHandler sends every log record on a channel.
type recordHandler struct{ c chan slog.Record }

func (recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.c <- r
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// rawClient is a raw HTTP/1.1 connection.
type rawClient struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

// dial connects from the loopback address from ("" for any).
func (h *harness) dial(from string) *rawClient {
	h.t.Helper()
	d := net.Dialer{Timeout: failsafe}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", h.addr)
	if err != nil && from != "" && errors.Is(err, syscall.EADDRNOTAVAIL) {
		h.t.Skipf("needs loopback addresses beyond 127.0.0.1 (Linux has 127.0.0.0/8): %v", err)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(failsafe))
	return &rawClient{t: h.t, c: c, r: bufio.NewReader(c)}
}

// waitState waits until the server reports state s for some connection.
func (h *harness) waitState(s http.ConnState) {
	h.t.Helper()
	timeout := time.After(failsafe)
	for {
		select {
		case got := <-h.states:
			if got == s {
				return
			}
		case <-timeout:
			h.t.Fatalf("the server never reported %s", s)
		}
	}
}

func (c *rawClient) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, s); err != nil {
		c.t.Fatal(err)
	}
}

// get sends GET path and returns the response's status and body.
func (c *rawClient) get(path string) (int, string) {
	c.t.Helper()
	c.send("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// closed reports whether the server closed the connection: reading what it sent ends in
// EOF or a reset. It fails the test if the connection stays open.
func (c *rawClient) closed() bool {
	c.t.Helper()
	_, err := io.Copy(io.Discard, c.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatal("the connection is still open")
	}
	return true
}

// quick is a MinWait short enough that a client's connections can always make room for
// its new ones in these tests.
const quick = time.Nanosecond

func TestEvictsTheLongestIdleConnectionAtTheBound(t *testing.T) {
	h := newHarness(t, Config{Max: 2, MinWait: quick})
	a, b := h.dial(""), h.dial("")
	for _, c := range []*rawClient{a, b} {
		if status, _ := c.get("/"); status != 200 {
			t.Fatalf("status %d", status)
		}
		h.waitState(http.StateIdle)
	}
	// b was used last: a is the longest idle.
	if status, _ := b.get("/"); status != 200 {
		t.Fatalf("status %d", status)
	}
	h.waitState(http.StateIdle)

	c := h.dial("")
	if status, body := c.get("/"); status != 200 || body != "ok" {
		t.Fatalf("the new connection got %d %q, want 200 ok", status, body)
	}
	if !a.closed() {
		t.Fatal("a is open")
	}
	if status, _ := b.get("/"); status != 200 {
		t.Fatalf("b, used more recently than a, got %d", status)
	}
	if s := h.l.Stats(); s.Open != 2 || s.Evicted != 1 || s.Refused != 0 {
		t.Fatalf("stats %+v, want 2 open, 1 evicted, 0 refused", s)
	}
}

func TestEvictsUnfinishedHeadersToo(t *testing.T) {
	h := newHarness(t, Config{Max: 2, MinWait: quick})
	slow := h.dial("")
	h.waitState(http.StateNew)
	slow.send("GET / HTTP/1.1\r\nHost: x\r\n") // never finished
	idle := h.dial("")
	if status, _ := idle.get("/"); status != 200 {
		t.Fatalf("status %d", status)
	}
	h.waitState(http.StateIdle)

	c := h.dial("")
	if status, _ := c.get("/"); status != 200 {
		t.Fatalf("the new connection got %d, want 200", status)
	}
	if !slow.closed() {
		t.Fatal("the connection that never finished its headers, the oldest, is open")
	}
	if status, _ := idle.get("/"); status != 200 {
		t.Fatalf("the idle connection got %d", status)
	}
}

func TestRefusesWhenAllAreBusyAndLogs(t *testing.T) {
	h := newHarness(t, Config{Max: 1, LogEvery: time.Hour})
	busy := h.dial("")
	busy.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	<-h.entered

	for i := range 3 {
		c := h.dial("")
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil {
			t.Fatalf("refused connection %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"error_code": 503`) {
			t.Fatalf("refused connection %d: %d %v %s, want 503 with Retry-After in the API's error shape", i, resp.StatusCode, resp.Header, body)
		}
		if !c.closed() {
			t.Fatalf("refused connection %d is open", i)
		}
	}
	// One line for the first refusal; the next two wait for the interval (an hour).
	rec := <-h.logs
	attrs := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	if rec.Level != slog.LevelWarn || rec.Message != "shedding connections" || attrs["refused"] != "1" ||
		attrs["busiest_client"] != "127.0.0.1" || attrs["max"] != "1" || attrs["open"] != "1" {
		t.Fatalf("log line %s %q %v", rec.Level, rec.Message, attrs)
	}
	select {
	case rec := <-h.logs:
		t.Fatalf("a second line within the interval: %q", rec.Message)
	default:
	}
	if s := h.l.Stats(); s.Refused != 3 || s.Open != 1 {
		t.Fatalf("stats %+v, want 3 refused, 1 open", s)
	}

	h.unblock()
	resp, err := http.ReadResponse(busy.r, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the busy request: %v %v", resp, err)
	}
}

func TestReportsTheRestWhenTheIntervalEnds(t *testing.T) {
	h := newHarness(t, Config{Max: 1, LogEvery: 50 * time.Millisecond})
	busy := h.dial("")
	busy.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	<-h.entered
	for range 2 {
		c := h.dial("")
		if !c.closed() {
			t.Fatal("refused connection is open")
		}
	}
	var total uint64
	for total < 2 {
		select {
		case rec := <-h.logs:
			rec.Attrs(func(a slog.Attr) bool {
				if a.Key == "refused" {
					total += a.Value.Uint64()
				}
				return true
			})
		case <-time.After(failsafe):
			t.Fatalf("the log reported %d refusals, want 2", total)
		}
	}
}

// At the global bound a client with few connections takes the place of one of a client
// holding many, even a younger one; a client holding many cannot churn its own young
// connections, nor take the place of others holding about as many.
func TestClientsWithFewConnectionsComeFirst(t *testing.T) {
	h := newHarness(t, Config{Max: 4, MinWait: time.Hour})
	idle := func(c *rawClient) {
		t.Helper()
		if status, _ := c.get("/"); status != 200 {
			t.Fatalf("status %d", status)
		}
		h.waitState(http.StateIdle)
	}
	worker := h.dial("127.0.0.1") // the oldest connection of all
	idle(worker)
	var heavy []*rawClient
	for range 3 {
		c := h.dial("127.0.0.2")
		idle(c)
		heavy = append(heavy, c)
	}

	newcomer := h.dial("127.0.0.3")
	idle(newcomer)
	if !heavy[0].closed() {
		t.Fatal("the oldest connection of the client holding 3 is open")
	}
	if status, _ := worker.get("/"); status != 200 {
		t.Fatalf("the light client's connection, the oldest, got %d", status)
	}
	h.waitState(http.StateIdle)

	// 127.0.0.2 holds 2 young connections, no one holds more than twice that: refused.
	c := h.dial("127.0.0.2")
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("a new connection of the heaviest client: %v %v, want 503", resp, err)
	}
	if s := h.l.Stats(); s.Evicted != 1 || s.Refused != 1 || s.Open != 4 {
		t.Fatalf("stats %+v, want 1 evicted, 1 refused, 4 open", s)
	}
	for i, c := range []*rawClient{worker, heavy[1], heavy[2], newcomer} {
		if status, _ := c.get("/"); status != 200 {
			t.Fatalf("connection %d got %d", i, status)
		}
	}
}

func TestEvictsExpendableBusyConnectionsFirst(t *testing.T) {
	h := newHarness(t, Config{Max: 2})
	busy := h.dial("")
	busy.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	<-h.entered
	expendable := h.dial("")
	expendable.send("GET /expendable HTTP/1.1\r\nHost: x\r\n\r\n")
	<-h.entered

	c := h.dial("")
	if status, _ := c.get("/"); status != 200 {
		t.Fatalf("the new connection got %d, want 200", status)
	}
	if !expendable.closed() {
		t.Fatal("the expendable connection is open")
	}
	h.unblock()
	if resp, err := http.ReadResponse(busy.r, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the busy request: %v %v", resp, err)
	}
	if s := h.l.Stats(); s.Evicted != 1 || s.Refused != 0 {
		t.Fatalf("stats %+v, want 1 evicted", s)
	}
}

func TestReportsTheRestOnClose(t *testing.T) {
	h := newHarness(t, Config{Max: 1, LogEvery: time.Hour})
	busy := h.dial("")
	busy.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	<-h.entered
	for range 3 {
		if c := h.dial(""); !c.closed() {
			t.Fatal("refused connection is open")
		}
	}
	<-h.logs // the first refusal
	h.l.Close()
	rec := <-h.logs
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "refused" && a.Value.Uint64() != 2 {
			t.Errorf("the last line reports %d refusals, want 2", a.Value.Uint64())
		}
		return true
	})
}

func TestPerClientBound(t *testing.T) {
	h := newHarness(t, Config{MaxPerClient: 1, MinWait: quick})
	a := h.dial("127.0.0.1")
	if status, _ := a.get("/"); status != 200 {
		t.Fatalf("status %d", status)
	}
	h.waitState(http.StateIdle)
	other := h.dial("127.0.0.2")
	if status, _ := other.get("/"); status != 200 {
		t.Fatalf("another client's connection got %d", status)
	}
	h.waitState(http.StateIdle)

	b := h.dial("127.0.0.1")
	if status, _ := b.get("/"); status != 200 {
		t.Fatalf("status %d", status)
	}
	if s := h.l.Stats(); s.Evicted != 1 {
		t.Fatalf("stats %+v", s)
	}
	if !a.closed() {
		t.Fatal("the client's older idle connection is open")
	}
	if status, _ := other.get("/"); status != 200 {
		t.Fatalf("another client's connection got %d after the first client's eviction", status)
	}

	// The client's only connection busy: its next one is refused, others are not.
	b.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	<-h.entered
	if c := h.dial("127.0.0.1"); !c.closed() {
		t.Fatal("a second connection of a client at its bound with a busy one is open")
	}
	if status, _ := h.dial("127.0.0.3").get("/"); status != 200 {
		t.Fatalf("a third client got %d", status)
	}
	if s := h.l.Stats(); s.Refused != 1 || s.Evicted != 1 {
		t.Fatalf("stats %+v, want 1 refused, 1 evicted", s)
	}
}

func TestClosedConnectionsStopCounting(t *testing.T) {
	h := newHarness(t, Config{Max: 1})
	for i := range 5 {
		c := h.dial("")
		if status, _ := c.get("/"); status != 200 {
			t.Fatalf("connection %d: status %d", i, status)
		}
		c.c.Close()
		h.waitState(http.StateClosed)
	}
	if s := h.l.Stats(); s.Open != 0 || s.Evicted != 0 || s.Refused != 0 {
		t.Fatalf("stats %+v, want nothing open, evicted or refused", s)
	}
}

func TestClientKey(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.7:1234":                "192.0.2.7/32",
		"[::ffff:192.0.2.7]:1234":       "192.0.2.7/32",
		"[2001:db8:1:2:3:4:5:6]:1234":   "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:80":     "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:80":          "2001:db8:1:3::/64",
		"[::1]:80":                      "::/64",
		"[fe80::1%eth0]:80":             "fe80::/64",
		"127.0.0.1:80":                  "127.0.0.1/32",
		"[2001:db8:ffff:ffff::1]:65535": "2001:db8:ffff:ffff::/64",
	} {
		ap := netip.MustParseAddrPort(addr)
		got := clientKey(net.TCPAddrFromAddrPort(ap))
		if got.String() != want {
			t.Errorf("%s: %s, want %s", addr, got, want)
		}
	}
	if got := clientKey(&net.UnixAddr{Name: "/run/x", Net: "unix"}); got.IsValid() {
		t.Errorf("unix address: %s, want one shared group", got)
	}
}
