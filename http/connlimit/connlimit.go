// Package connlimit bounds the connections an http.Server holds open: in all, and per
// client address.
//
// A Listener wraps the server's net.Listener and learns each connection's state from the
// server's ConnState hook. When a new connection would exceed a bound, the listener makes
// room by closing the connection that has waited longest without a request in progress:
// an idle keep-alive connection, or one that has not yet sent a complete request header.
// Those cost the server nothing to drop and their clients nothing they cannot redo, while
// a client that connects and sends its request at once gets in. Only when every connection
// within the bound is busy (a handler runs or a body is being read) is the new connection
// refused: it gets a minimal 503 with Retry-After and is closed. Closing at once, rather
// than leaving it in the kernel's queue, keeps the accept backlog flowing.
//
// Shedding is logged at most once per Config.LogEvery, with the counts since the last line.
package connlimit

import (
	"container/list"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Config sets a Listener's bounds.
type Config struct {
	// Max bounds the connections open at once; 0 means no bound.
	Max int
	// MaxPerClient bounds the connections of one client address (an IPv4 address, or an
	// IPv6 /64, as one host usually holds a whole /64); 0 means no bound.
	MaxPerClient int
	// Logger receives the shedding reports (level Warn); nil means slog.Default().
	Logger *slog.Logger
	// LogEvery is the least time between two shedding reports; 0 means 10 s.
	LogEvery time.Duration
}

// Stats are a Listener's counts.
type Stats struct {
	// Open is the number of connections open now.
	Open int
	// Refused counts new connections answered 503 and closed because no room could be made.
	Refused uint64
	// Evicted counts idle or unfinished connections closed to make room for new ones.
	Evicted uint64
}

// Listener is a net.Listener that enforces Config's bounds. Set its ConnState method as
// the http.Server's ConnState hook (see Server), or connections are never evictable.
type Listener struct {
	net.Listener
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	open    int
	clients map[netip.Prefix]*client
	// waiting holds the evictable connections (idle, or no complete request yet), oldest
	// first; each client's own list is its share of it.
	waiting list.List
	refused uint64
	evicted uint64
	report  report
}

type client struct {
	open    int
	waiting list.List
}

// New wraps inner.
func New(inner net.Listener, cfg Config) *Listener {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = 10 * time.Second
	}
	return &Listener{Listener: inner, cfg: cfg, log: cfg.Logger, clients: map[netip.Prefix]*client{}}
}

// Server sets srv's ConnState hook to l's, keeping any hook srv already has.
func (l *Listener) Server(srv *http.Server) {
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		l.ConnState(c, s)
		if prev != nil {
			prev(c, s)
		}
	}
}

// Stats returns the counts so far.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.open, Refused: l.refused, Evicted: l.evicted}
}

// Accept returns the next connection within the bounds, making room or refusing
// connections beyond them.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := clientKey(raw.RemoteAddr())
		c, victims, line := l.admit(raw, key)
		for _, v := range victims {
			_ = v.Conn.Close()
		}
		if line != nil {
			l.log.Warn("shedding connections", line...)
		}
		if c != nil {
			return c, nil
		}
		refuse(raw)
	}
}

// admit counts raw in when the bounds allow it, after evicting what must go. It returns
// the connection (nil if refused), the evicted connections to close, and a report line to
// log, if one is due.
func (l *Listener) admit(raw net.Conn, key netip.Prefix) (*conn, []*conn, []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cl := l.clients[key]
	var victims []*conn
	if l.cfg.MaxPerClient > 0 && cl != nil && cl.open >= l.cfg.MaxPerClient {
		v := oldest(&cl.waiting)
		if v == nil {
			return nil, nil, l.noteLocked(key, 1, 0)
		}
		l.releaseLocked(v)
		victims = append(victims, v)
	}
	if l.cfg.Max > 0 && l.open >= l.cfg.Max {
		v := oldest(&l.waiting)
		if v == nil {
			return nil, victims, l.noteLocked(key, 1, uint64(len(victims)))
		}
		l.releaseLocked(v)
		victims = append(victims, v)
	}
	cl = l.clients[key] // an eviction may have dropped it
	if cl == nil {
		cl = &client{}
		l.clients[key] = cl
	}
	c := &conn{Conn: raw, l: l, key: key, cl: cl}
	l.open++
	cl.open++
	l.waitLocked(c) // StateNew: nothing read yet
	var line []any
	if len(victims) > 0 {
		line = l.noteLocked(key, 0, uint64(len(victims)))
	}
	return c, victims, line
}

func oldest(waiting *list.List) *conn {
	if e := waiting.Front(); e != nil {
		return e.Value.(*conn)
	}
	return nil
}

// ConnState follows the server's view of each connection: new and idle connections may be
// evicted, active and hijacked ones may not. A connection counts against the bounds until
// it is closed (a hijacked one still holds a descriptor).
func (l *Listener) ConnState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*conn)
	if !ok || c.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	switch s {
	case http.StateNew:
		// admit put it on the waiting lists.
	case http.StateIdle:
		l.unwaitLocked(c)
		l.waitLocked(c) // newest now
	case http.StateActive, http.StateHijacked:
		l.unwaitLocked(c)
	case http.StateClosed:
		l.releaseLocked(c)
	}
}

func (l *Listener) waitLocked(c *conn) {
	c.inAll = l.waiting.PushBack(c)
	c.inClient = c.cl.waiting.PushBack(c)
}

func (l *Listener) unwaitLocked(c *conn) {
	if c.inAll != nil {
		l.waiting.Remove(c.inAll)
		c.cl.waiting.Remove(c.inClient)
		c.inAll, c.inClient = nil, nil
	}
}

// releaseLocked stops counting c.
func (l *Listener) releaseLocked(c *conn) {
	if c.released {
		return
	}
	c.released = true
	l.unwaitLocked(c)
	l.open--
	c.cl.open--
	if c.cl.open == 0 {
		delete(l.clients, c.key)
	}
}

// Close stops the listener and its pending report (open connections stay open).
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.report.timer != nil {
		l.report.timer.Stop()
		l.report.timer = nil
	}
	l.mu.Unlock()
	return l.Listener.Close()
}

// conn is an admitted connection.
type conn struct {
	net.Conn
	l   *Listener
	key netip.Prefix
	cl  *client
	// Guarded by l.mu:
	released        bool
	inAll, inClient *list.Element // non-nil while evictable
}

// Close closes the connection and stops counting it.
func (c *conn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// refusal is the whole answer to a connection beyond the bounds.
var refusal = func() []byte {
	body := `{"error_code": 503, "error_message": "Too many connections: try again later.", "error_name": "SERVICE_UNAVAILABLE"}`
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// refuse answers 503 and closes. The socket is new, so its send buffer is empty and the
// write does not wait; the deadline only guards against the impossible.
func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
	_, _ = c.Write(refusal)
	_ = c.Close()
}

// clientKey groups connections by client: the IPv4 address, or the IPv6 /64.
func clientKey(a net.Addr) netip.Prefix {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{} // one group for other kinds of address
	}
	ip := tcp.AddrPort().Addr().Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// report accumulates shedding between two log lines.
type report struct {
	last             time.Time
	timer            *time.Timer
	refused, evicted uint64
	byClient         map[netip.Prefix]uint64 // refused + evicted, for the busiest client
}

// maxReportClients bounds the clients remembered between two report lines.
const maxReportClients = 1024

// noteLocked records refused and evicted connections for key and returns a log line when
// one is due; otherwise it makes sure one will be written when the interval is over.
func (l *Listener) noteLocked(key netip.Prefix, refused, evicted uint64) []any {
	l.refused += refused
	l.evicted += evicted
	r := &l.report
	r.refused += refused
	r.evicted += evicted
	if r.byClient == nil {
		r.byClient = map[netip.Prefix]uint64{}
	}
	if _, ok := r.byClient[key]; ok || len(r.byClient) < maxReportClients {
		r.byClient[key] += refused + evicted
	}
	now := time.Now()
	if wait := r.last.Add(l.cfg.LogEvery).Sub(now); wait > 0 {
		if r.timer == nil {
			r.timer = time.AfterFunc(wait, l.flushReport)
		}
		return nil
	}
	return l.lineLocked(now)
}

// flushReport writes the pending report line.
func (l *Listener) flushReport() {
	l.mu.Lock()
	l.report.timer = nil
	var line []any
	if l.report.refused+l.report.evicted > 0 {
		line = l.lineLocked(time.Now())
	}
	l.mu.Unlock()
	if line != nil {
		l.log.Warn("shedding connections", line...)
	}
}

func (l *Listener) lineLocked(now time.Time) []any {
	r := &l.report
	var busiest netip.Prefix
	var most uint64
	for k, n := range r.byClient {
		if n > most {
			busiest, most = k, n
		}
	}
	line := []any{
		"refused", r.refused, "evicted", r.evicted,
		"busiest_client", clientString(busiest), "busiest_client_shed", most,
		"open", l.open, "max", l.cfg.Max, "max_per_client", l.cfg.MaxPerClient,
		"refused_total", l.refused, "evicted_total", l.evicted,
	}
	if !r.last.IsZero() {
		line = append(line, "since", now.Sub(r.last).Round(time.Millisecond))
	}
	r.last, r.refused, r.evicted = now, 0, 0
	clear(r.byClient)
	return line
}

func clientString(p netip.Prefix) string {
	switch {
	case !p.IsValid():
		return "-"
	case p.Addr().Is4():
		return p.Addr().String()
	}
	return p.String()
}
