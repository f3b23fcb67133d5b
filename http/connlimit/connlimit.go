// Package connlimit bounds the connections an http.Server holds open: in all, and per
// client address.
//
// A Listener wraps the server's net.Listener and learns each connection's state from the
// server's ConnState hook. A connection is "waiting" while it has no request in progress:
// idle between keep-alive requests, or not yet done sending a request's headers. Only
// waiting connections are ever closed to make room (they cost their clients nothing they
// cannot redo); a connection with a request in progress is never cut.
//
// When a new connection from client X would exceed a bound:
//
//   - At X's own bound (Config.MaxPerClient), X's connection that has waited longest makes
//     room, if it has waited at least Config.MinWait; otherwise the new one is refused.
//   - At the global bound (Config.Max), among the few connections that have waited longest,
//     the one of the client holding the most connections makes room, provided that client
//     holds more than twice as many as X. So a client with few connections (a person, a
//     script) gets in at the expense of clients holding many (an attacker holding
//     thousands), and is never the one evicted for them. Failing that, X's own connection
//     that has waited longest and at least MinWait makes room; otherwise the new one is
//     refused.
//
// A refused connection gets a minimal 503 with Retry-After and is closed at once, which
// keeps the accept queue flowing and costs far less than serving it. MinWait keeps clients
// that hold many connections from churning them (each eviction admits a connection that
// the server must then serve); connections the server is about to close anyway
// (Expendable) make room first, whatever their age.
//
// Shedding is logged at most once per Config.LogEvery, with the counts since the last line.
package connlimit

import (
	"container/list"
	"context"
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
	// MinWait is how long a connection must have waited before a new connection of its own
	// client may take its place; 0 means DefaultMinWait.
	MinWait time.Duration
}

// DefaultMinWait is Config.MinWait's default.
const DefaultMinWait = 5 * time.Second

// candidates is the number of longest-waiting connections among which a victim is chosen
// at the global bound.
const candidates = 16

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
	if cfg.MinWait <= 0 {
		cfg.MinWait = DefaultMinWait
	}
	return &Listener{Listener: inner, cfg: cfg, log: cfg.Logger, clients: map[netip.Prefix]*client{}}
}

// Server sets srv's ConnState hook to l's and makes each connection reachable from its
// requests' contexts (for Expendable), keeping any hooks srv already has.
func (l *Listener) Server(srv *http.Server) {
	prevState, prevContext := srv.ConnState, srv.ConnContext
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		l.ConnState(c, s)
		if prevState != nil {
			prevState(c, s)
		}
	}
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prevContext != nil {
			ctx = prevContext(ctx, c)
		}
		if c, ok := c.(*conn); ok && c.l == l {
			ctx = context.WithValue(ctx, connKey{}, c)
		}
		return ctx
	}
}

type connKey struct{}

// Expendable makes the connection of the request whose context is ctx the first to close
// when room is needed, though a request is in progress on it: one that was answered
// without its body being read and will be closed once the server has drained what
// arrives of the body. Without this, clients that send bodies nobody reads could keep the
// bound full of connections that count as busy.
func Expendable(ctx context.Context) {
	c, ok := ctx.Value(connKey{}).(*conn)
	if !ok {
		return
	}
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	l.unwaitLocked(c)
	c.expendable = true
	c.inAll = l.waiting.PushFront(c)
	c.inClient = c.cl.waiting.PushFront(c)
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
	now := time.Now()
	var victims []*conn
	if cl := l.clients[key]; l.cfg.MaxPerClient > 0 && cl != nil && cl.open >= l.cfg.MaxPerClient {
		v := l.ownVictimLocked(cl, now)
		if v == nil {
			return nil, nil, l.noteLocked(key, 1, 0)
		}
		l.releaseLocked(v)
		victims = append(victims, v)
	}
	if l.cfg.Max > 0 && l.open >= l.cfg.Max {
		v := l.victimLocked(l.clients[key], now)
		if v == nil {
			return nil, victims, l.noteLocked(key, 1, uint64(len(victims)))
		}
		l.releaseLocked(v)
		victims = append(victims, v)
	}
	cl := l.clients[key] // an eviction may have dropped it
	if cl == nil {
		cl = &client{}
		l.clients[key] = cl
	}
	c := &conn{Conn: raw, l: l, key: key, cl: cl}
	l.open++
	cl.open++
	l.waitLocked(c, now) // StateNew: nothing read yet
	var line []any
	if len(victims) > 0 {
		line = l.noteLocked(key, 0, uint64(len(victims)))
	}
	return c, victims, line
}

// victimLocked chooses the connection to close for a new one of client cl (nil: none
// open) at the global bound, or nil.
func (l *Listener) victimLocked(cl *client, now time.Time) *conn {
	mine := 0
	if cl != nil {
		mine = cl.open
	}
	var heaviest *conn
	n := 0
	for e := l.waiting.Front(); e != nil && n < candidates; e, n = e.Next(), n+1 {
		c := e.Value.(*conn)
		if c.expendable {
			return c
		}
		if heaviest == nil || c.cl.open > heaviest.cl.open {
			heaviest = c
		}
	}
	if heaviest != nil && heaviest.cl.open > 2*mine {
		return heaviest
	}
	return l.ownVictimLocked(cl, now)
}

// ownVictimLocked returns cl's connection that has waited longest, if it is expendable or
// has waited at least MinWait.
func (l *Listener) ownVictimLocked(cl *client, now time.Time) *conn {
	if cl == nil {
		return nil
	}
	if e := cl.waiting.Front(); e != nil {
		if c := e.Value.(*conn); c.expendable || now.Sub(c.since) >= l.cfg.MinWait {
			return c
		}
	}
	return nil
}

// ConnState follows the server's view of each connection: new and idle connections may be
// evicted, active and hijacked ones may not (unless Expendable says otherwise). A connection counts against the bounds until
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
		c.expendable = false
		l.waitLocked(c, time.Now()) // newest now
	case http.StateActive, http.StateHijacked:
		l.unwaitLocked(c)
	case http.StateClosed:
		l.releaseLocked(c)
	}
}

func (l *Listener) waitLocked(c *conn, now time.Time) {
	c.since = now
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

// Close stops the listener (open connections stay open) and writes the pending report.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.report.timer != nil {
		l.report.timer.Stop()
		l.report.timer = nil
	}
	var line []any
	if l.report.refused+l.report.evicted > 0 {
		line = l.lineLocked(time.Now())
	}
	l.mu.Unlock()
	if line != nil {
		l.log.Warn("shedding connections", line...)
	}
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
	inAll, inClient *list.Element // non-nil while waiting (evictable)
	since           time.Time     // when it started waiting
	expendable      bool          // see Expendable
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
