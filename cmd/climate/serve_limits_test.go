package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	climatehttp "climate/http"

	"climate/bench"
)

// Issue 9, defect 2 (connection exhaustion): idle keep-alive connections, slow headers and
// slow bodies held connections for ever, so that enough of them ran the server out of file
// descriptors. These tests run "climate serve" as it runs in production, with short
// timeouts, and talk to it over raw TCP.

// failsafe bounds every network wait, so that a server without the fix fails the test
// instead of hanging it; the waits themselves end on events, not on the clock.
const failsafe = 10 * time.Second

const limitTokens = `tok-member  mia  physics  member
`

// startLimitedServer runs climate serve with --auth tokens and limits; its log goes to the
// returned buffer.
func startLimitedServer(t *testing.T, limits climatehttp.Limits) (addr string, log *bench.CappedBuffer) {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(limitTokens), 0o600); err != nil {
		t.Fatal(err)
	}
	log = &bench.CappedBuffer{Max: 1 << 20}
	s := startServer(t, serveOptions{auth: "tokens", tokensFile: tokens, limits: limits, logTo: log, logLevel: "warn"})
	return strings.TrimPrefix(s.url, "http://"), log
}

// limitsWith returns the default limits changed by f.
func limitsWith(f func(*climatehttp.Limits)) climatehttp.Limits {
	l := climatehttp.DefaultLimits()
	f(&l)
	return l
}

// rawConn is a client connection speaking HTTP/1.1 by hand.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn { t.Helper(); return dialRawFrom(t, addr, "") }

// dialRawFrom connects from the loopback address from ("": the system's choice).
func dialRawFrom(t *testing.T, addr, from string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: failsafe}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil && from != "" && errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("needs loopback addresses beyond 127.0.0.1 (Linux has 127.0.0.0/8): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(failsafe))
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, s); err != nil {
		c.t.Fatal(err)
	}
}

// response reads one response and its body.
func (c *rawConn) response(what string) (*http.Response, string) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.t.Fatalf("%s: no response: %v", what, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
	return resp, string(body)
}

// waitClosed reads until the server closes the connection (EOF or a reset), failing the
// test if it stays open.
func (c *rawConn) waitClosed(what string) {
	c.t.Helper()
	_, err := io.Copy(io.Discard, c.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("%s: the server keeps the connection open", what)
	}
}

func TestServeClosesIdleConnections(t *testing.T) {
	addr, _ := startLimitedServer(t, limitsWith(func(l *climatehttp.Limits) { l.IdleTimeout = 200 * time.Millisecond }))
	c := dialRaw(t, addr)
	c.send("GET /versions HTTP/1.1\r\nHost: climate\r\n\r\n")
	if resp, _ := c.response("GET /versions"); resp.StatusCode != http.StatusMultipleChoices {
		t.Fatalf("GET /versions: %d", resp.StatusCode)
	}
	c.waitClosed("an idle keep-alive connection")
}

func TestServeClosesConnectionsWithUnfinishedHeaders(t *testing.T) {
	addr, _ := startLimitedServer(t, limitsWith(func(l *climatehttp.Limits) { l.ReadHeaderTimeout = 200 * time.Millisecond }))
	c := dialRaw(t, addr)
	c.send("GET /v1/leases HTTP/1.1\r\nHost: climate\r\n") // the blank line never comes
	c.waitClosed("a connection that never finishes its headers")
}

func TestServeCutsOffSlowBodies(t *testing.T) {
	addr, _ := startLimitedServer(t, limitsWith(func(l *climatehttp.Limits) { l.BodyTimeout = 300 * time.Millisecond }))
	c := dialRaw(t, addr)
	c.send("POST /v1/leases HTTP/1.1\r\nHost: climate\r\nX-Auth-Token: tok-member\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	resp, body := c.response("a body that stops after one byte")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "not received in time") || !resp.Close {
		t.Fatalf("got %d (close: %v) %s; want 400 saying the body came too late, closing the connection", resp.StatusCode, resp.Close, body)
	}
	c.waitClosed("after a body timeout")
}

// In tokens mode a request without a valid token is answered 401 at once, without the
// server reading its body first, and the connection is closed: a client without a token
// cannot hold a connection by trickling a body.
func TestServeRefusesUnauthenticatedBodiesWithoutReadingThem(t *testing.T) {
	addr, _ := startLimitedServer(t, climatehttp.DefaultLimits())
	for _, tc := range []struct{ name, token string }{{"no token", ""}, {"invalid token", "X-Auth-Token: nope\r\n"}} {
		t.Run(tc.name, func(t *testing.T) {
			const length = 1000
			c := dialRaw(t, addr)
			c.send("POST /v1/leases HTTP/1.1\r\nHost: climate\r\n" + tc.token +
				fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n\r\n{", length))
			// Trickle the rest of the body, a byte every 20 ms (20 s in all), until the
			// connection fails or the test ends.
			var sent atomic.Int64
			sent.Store(1)
			stop := make(chan struct{})
			trickled := make(chan struct{})
			go func() {
				defer close(trickled)
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for sent.Load() < length {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if _, err := c.c.Write([]byte(" ")); err != nil {
						return
					}
					sent.Add(1)
				}
			}()
			defer func() { close(stop); <-trickled }()

			resp, body := c.response("an unauthenticated request with a trickling body")
			if n := sent.Load(); n >= length {
				t.Fatalf("the answer came after the whole body (%d bytes)", n)
			}
			if resp.StatusCode != http.StatusUnauthorized || !resp.Close || !strings.Contains(body, `"error_code":401`) {
				t.Fatalf("got %d (close: %v) %s; want 401 closing the connection", resp.StatusCode, resp.Close, body)
			}
			c.waitClosed("after a 401 to a request whose body was not read")
		})
	}
}

// At --max-connections, a new connection takes the place of one that has no request in
// progress; when every connection is busy it gets 503 and is closed. The shedding is
// logged. (Each connection comes from its own loopback address: one client's own young
// connections are not replaced, see package connlimit.)
func TestServeShedsConnectionsBeyondTheBound(t *testing.T) {
	addr, log := startLimitedServer(t, limitsWith(func(l *climatehttp.Limits) {
		l.MaxConnections, l.MaxConnectionsPerClient, l.BodyTimeout = 2, 0, time.Minute
	}))
	// busy sends an authenticated request whose body never comes, and returns once the
	// handler waits for it (the server asks for it with "100 Continue").
	busy := func(from string) *rawConn {
		c := dialRawFrom(t, addr, from)
		c.send("POST /v1/leases HTTP/1.1\r\nHost: climate\r\nX-Auth-Token: tok-member\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
		line, err := c.r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
			t.Fatalf("want 100 Continue, got %q %v", line, err)
		}
		if _, err := c.r.ReadString('\n'); err != nil { // the blank line
			t.Fatal(err)
		}
		return c
	}
	busy("127.0.0.1")
	unfinished := dialRawFrom(t, addr, "127.0.0.2") // has sent nothing: the cheapest to drop
	busy("127.0.0.3")                               // takes unfinished's place
	unfinished.waitClosed("the connection without a request, at the bound")

	refused := dialRawFrom(t, addr, "127.0.0.4")
	resp, body := refused.response("a connection beyond the bound, all busy")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "Too many connections") {
		t.Fatalf("got %d %v %s; want 503 with Retry-After", resp.StatusCode, resp.Header, body)
	}
	refused.waitClosed("a refused connection")

	// The eviction was logged before the new connection was served; the refusal comes
	// within the same 10 s, so it waits for the next line.
	if out := log.String(); !strings.Contains(out, `msg="shedding connections"`) || !strings.Contains(out, "evicted=1") || !strings.Contains(out, "max=2") {
		t.Fatalf("log:\n%s\nwant a shedding line with evicted=1 and max=2", out)
	}
}

func TestServeRefusesUnprotectedLimits(t *testing.T) {
	for _, tc := range []struct {
		f    func(*climatehttp.Limits)
		want string
	}{
		{func(l *climatehttp.Limits) { l.IdleTimeout = 0 }, "--idle-timeout 0s: must be positive"},
		{func(l *climatehttp.Limits) { l.BodyTimeout = -time.Second }, "--body-timeout -1s: must be positive"},
		{func(l *climatehttp.Limits) { l.ReadHeaderTimeout = 0 }, "--read-header-timeout 0s"},
		{func(l *climatehttp.Limits) { l.WriteTimeout = 0 }, "--write-timeout 0s"},
		{func(l *climatehttp.Limits) { l.MaxConnections = -1 }, "--max-connections -1"},
		{func(l *climatehttp.Limits) { l.MaxConnectionsPerClient = -1 }, "--max-connections-per-client -1"},
	} {
		o := serveOptions{listen: "127.0.0.1:0", auth: "noauth", role: "all", logLevel: "error", dataDir: t.TempDir(), limits: limitsWith(tc.f)}
		err := runServe(t.Context(), &o, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}

func TestConnectionBudget(t *testing.T) {
	for limit, want := range map[uint64]int{1024: 768, 20000: 19744, 512: 256, 100: 50, 1 << 62: 1 << 30} {
		if got := connectionBudget(limit); got != want {
			t.Errorf("connectionBudget(%d) = %d, want %d", limit, got, want)
		}
	}
	if got := defaultMaxConnections(); got <= 0 || got > climatehttp.DefaultMaxConnections {
		t.Errorf("defaultMaxConnections() = %d", got)
	}
}
