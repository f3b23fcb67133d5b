package openstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"climate"
	"climate/clock"
	"climate/manager"
	"climate/notify/amqp"
)

// failAfter bounds every wait for the listener: reaching it is a failure.
const failAfter = 30 * time.Second

// What Nova's oslo.messaging notifier publishes for a compute service's change (nova
// 26, objects/service.py and notifications/objects/service.py): the 2.0 envelope, the
// message's context keys trimmed.
func serviceUpdate(t *testing.T, host, binary string, disabled, forcedDown bool) []byte {
	t.Helper()
	msg := map[string]any{
		"message_id":   "c5c7c8b4-1b0e-4a4e-9c4b-7f0e2f0f5a01",
		"publisher_id": binary + ":" + host,
		"event_type":   "service.update",
		"priority":     "INFO",
		"timestamp":    "2026-11-27 06:30:00.123456",
		"payload": map[string]any{
			"nova_object.name":      "ServiceStatusPayload",
			"nova_object.namespace": "nova",
			"nova_object.version":   "1.1",
			"nova_object.data": map[string]any{
				"host": host, "binary": binary, "topic": "compute", "report_count": 12,
				"disabled": disabled, "disabled_reason": nil, "availability_zone": nil,
				"last_seen_up": "2026-11-27T06:29:58Z", "forced_down": forcedDown, "version": 61,
				"uuid": "fa69c544-906b-4a6a-a9c6-c1f7a8078c73"}},
		"_unique_id":          "7c9c7a1e0b0a4e0c8c0e0a2e3f4a5b6c",
		"_context_auth_token": "gAAAAA-secret-token",
	}
	inner, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string]string{"oslo.version": "2.0", "oslo.message": string(inner)})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestParseNotification(t *testing.T) {
	bare := func(s string) []byte { return []byte(s) }
	wrap := func(inner string) []byte {
		b, _ := json.Marshal(map[string]string{"oslo.version": "2.0", "oslo.message": inner})
		return b
	}
	for _, c := range []struct {
		name      string
		body      []byte
		host      string
		down      bool
		ignored   bool
		malformed bool
	}{
		{"disabled", serviceUpdate(t, "c1", "nova-compute", true, false), "c1", true, false, false},
		{"forced down", serviceUpdate(t, "c1", "nova-compute", false, true), "c1", true, false, false},
		{"up", serviceUpdate(t, "c1", "nova-compute", false, false), "c1", false, false, false},
		{"oslo 1.0: no envelope", bare(`{"event_type": "service.update", "payload": {"nova_object.name": "ServiceStatusPayload", "nova_object.data": {"host": "c2", "binary": "nova-compute", "disabled": true, "forced_down": false}}}`), "c2", true, false, false},
		{"a scheduler", serviceUpdate(t, "c1", "nova-scheduler", true, false), "c1", true, true, false},
		{"another event", wrap(`{"event_type": "instance.create.end", "payload": {}}`), "", false, true, false},
		{"not JSON", bare(`not json at all`), "", false, true, true},
		{"a JSON array", bare(`[1, 2]`), "", false, true, true},
		{"oslo.message not JSON", wrap(`{"event_type": `), "", false, true, true},
		{"no event type", wrap(`{"payload": {}}`), "", false, true, true},
		{"no payload", wrap(`{"event_type": "service.update"}`), "", false, true, true},
		{"unversioned payload", wrap(`{"event_type": "service.update", "payload": {"host": "c1", "disabled": true}}`), "", false, true, true},
		{"another object", wrap(`{"event_type": "service.update", "payload": {"nova_object.name": "InstancePayload", "nova_object.data": {}}}`), "", false, true, true},
		{"no host", wrap(`{"event_type": "service.update", "payload": {"nova_object.data": {"binary": "nova-compute", "disabled": true, "forced_down": false}}}`), "", false, true, true},
		{"no disabled", wrap(`{"event_type": "service.update", "payload": {"nova_object.data": {"host": "c1", "binary": "nova-compute", "forced_down": false}}}`), "", false, true, true},
		{"disabled a string", wrap(`{"event_type": "service.update", "payload": {"nova_object.data": {"host": "c1", "binary": "nova-compute", "disabled": "yes", "forced_down": false}}}`), "", false, true, true},
	} {
		s := parseNotification(c.body)
		if s.Host != c.host || s.Down != c.down || (s.Ignored != "") != c.ignored || s.Malformed != c.malformed {
			t.Errorf("%s: %+v; want host %q, down %v, ignored %v, malformed %v", c.name, s, c.host, c.down, c.ignored, c.malformed)
		}
	}
}

// proxy forwards TCP connections to the broker and can cut them all, as a broker
// restart or a network cut would.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	open   int
	change chan int // the number of client connections open, after each change
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, change: make(chan int, 100)}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, b)
			p.open++
			p.change <- p.open
			p.mu.Unlock()
			var once sync.Once
			done := func() {
				c.Close()
				b.Close()
				once.Do(func() {
					p.mu.Lock()
					p.open--
					p.change <- p.open
					p.mu.Unlock()
				})
			}
			go func() { io.Copy(b, c); done() }()
			go func() { io.Copy(c, b); done() }()
		}
	}()
	return p
}

// cut closes every connection through the proxy.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// waitOpen waits until n client connections are open.
func (p *proxy) waitOpen(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(failAfter)
	for {
		select {
		case got := <-p.change:
			if got == n {
				return
			}
		case <-deadline:
			t.Fatalf("waiting for %d connections through the proxy", n)
		}
	}
}

// novaBus is the test's Nova: an exchange of its own on the broker (deleted at the end),
// which it publishes notifications to as Nova's oslo.messaging notifier does.
type novaBus struct {
	exchange string
	ch       *amqp091.Channel
}

func newNovaBus(t *testing.T, url string) *novaBus {
	t.Helper()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatalf("connect to the test broker: %v", err)
	}
	var b [6]byte
	rand.Read(b[:])
	n := &novaBus{exchange: "climate_test_nova_" + hex.EncodeToString(b[:])}
	if n.ch, err = conn.Channel(); err != nil {
		t.Fatal(err)
	}
	// As oslo.messaging declares a notifier's exchange (amqp_durable_queues=False).
	if err := n.ch.ExchangeDeclare(n.exchange, "topic", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			_ = ch.ExchangeDelete(n.exchange, false, false)
		}
		conn.Close()
	})
	return n
}

func (n *novaBus) publish(t *testing.T, routingKey string, body []byte) {
	t.Helper()
	err := n.ch.PublishWithContext(context.Background(), n.exchange, routingKey, false, false,
		amqp091.Publishing{ContentType: "application/json", ContentEncoding: "utf-8", Body: body})
	if err != nil {
		t.Fatal(err)
	}
}

// syncLog is a log buffer safe for the listener's goroutine; lines, when set, gets each
// line written.
type syncLog struct {
	mu    sync.Mutex
	b     bytes.Buffer
	lines chan string
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lines != nil {
		select {
		case s.lines <- string(p):
		default:
		}
	}
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// listening is a listener on a driver with the fake Nova and a real manager (SQLite),
// hosts c1 and c2 registered, and a lease holding one of them from an hour ahead.
type listening struct {
	d      *testDriver
	mgr    *manager.Manager
	bus    *novaBus
	proxy  *proxy
	log    *syncLog
	ready  chan struct{}
	seen   chan Seen
	lead   atomic.Bool
	asked  chan bool // the lead's answers, while the test listens to them
	asking atomic.Bool
	lease  string
	who    climate.Identity
	m      *Monitor
}

func newListening(t *testing.T) *listening {
	t.Helper()
	return newListeningWith(t, nil)
}

// newListeningWith is newListening with the listener's configuration changed by set.
func newListeningWith(t *testing.T, set func(*ListenerConfig)) *listening {
	t.Helper()
	url, addr := amqp.TestURL(t)
	e := &listening{d: newTestDriver(t, "c1", "c2"), log: &syncLog{}, ready: make(chan struct{}, 10), seen: make(chan Seen, 100), asked: make(chan bool, 100),
		who: climate.Identity{UserID: "u", ProjectID: "proj", Roles: []string{"member"}}}
	e.log.lines = make(chan string, 1000)
	e.d.cfg.Logger = slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.d.nova.hypervisors = []string{"c1", "c2"}
	e.d.nova.down, e.d.nova.disabled = map[string]bool{}, map[string]bool{}
	e.mgr = manager.New(e.d.cfg.Store, clock.NewFake(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)), manager.Config{})
	e.bus = newNovaBus(t, url)
	e.proxy = newProxy(t, addr)
	e.lead.Store(true)
	e.m = &Monitor{Driver: e.d.Driver, Hosts: e.mgr, Maintenance: e.mgr, Leader: func(context.Context) (bool, error) {
		lead := e.lead.Load()
		if e.asking.Load() {
			e.asked <- lead
		}
		return lead, nil
	}}
	// The URL goes through the proxy, with the broker's user and password.
	uri, _ := amqp091.ParseURI(url)
	uri.Host, uri.Port = "127.0.0.1", e.proxy.ln.Addr().(*net.TCPAddr).Port
	cfg := ListenerConfig{URL: uri.String(), Exchange: e.bus.exchange, Topics: []string{"versioned_notifications", " other "},
		Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, LeadEvery: 20 * time.Millisecond,
		Ready: func() { e.ready <- struct{}{} }, Seen: func(s Seen) { e.seen <- s }}
	if set != nil {
		set(&cfg)
	}
	l, err := NewListener(e.m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.String(); strings.Contains(got, ":"+uri.Password+"@") || !strings.Contains(got, "routing keys versioned_notifications.info,other.info") {
		t.Fatalf("String() = %q", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if uri.Password != "" && strings.Contains(e.log.String(), ":"+uri.Password+"@") {
			t.Errorf("the log shows the broker's password:\n%s", e.log)
		}
		if strings.Contains(e.log.String(), "secret-token") {
			t.Errorf("the log shows a message's body:\n%s", e.log)
		}
	})
	one := 1
	empty := ""
	lease, err := e.mgr.CreateLease(ctx, e.who, climate.LeaseRequest{Name: "l",
		Start: climate.Date{Time: time.Date(2031, 1, 1, 1, 0, 0, 0, time.UTC)}, End: climate.Date{Time: time.Date(2031, 1, 1, 2, 0, 0, 0, time.UTC)},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one, HypervisorProperties: &empty, ResourceProperties: &empty}}})
	if err != nil {
		t.Fatal(err)
	}
	e.lease = lease.ID
	return e
}

func (e *listening) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-e.ready:
	case <-time.After(failAfter):
		t.Fatalf("the listener is not listening:\n%s", e.log)
	}
}

// handled waits for the listener to have taken the next message from its queue.
func (e *listening) handled(t *testing.T) Seen {
	t.Helper()
	select {
	case s := <-e.seen:
		return s
	case <-time.After(failAfter):
		t.Fatalf("no message handled:\n%s", e.log)
		return Seen{}
	}
}

// held returns the host the lease's reservation holds.
func (e *listening) held(t *testing.T) string {
	t.Helper()
	l, err := e.mgr.GetLease(context.Background(), e.who, e.lease)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range l.Reservations[0].Allocations {
		names = append(names, e.d.hosts[a.ResourceID])
	}
	if len(names) != 1 {
		t.Fatalf("the lease holds %v", names)
	}
	return names[0]
}

// windows returns the monitor's open windows, by host name.
func (e *listening) windows(t *testing.T) map[string]int {
	t.Helper()
	list, err := e.mgr.ListMaintenances(context.Background(), monitorWho, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, w := range list {
		if w.Reason == MonitorReason && w.UntilFurtherNotice() {
			got[e.d.hosts[w.HostID]]++
		}
	}
	return got
}

func other(h string) string {
	if h == "c1" {
		return "c2"
	}
	return "c1"
}

// Nova's service.update for the reserved host's nova-compute, disabled, takes the host
// out of service under the monitor's window (the lease healed onto the other host);
// enabled again, the window closes. Malformed messages, other events, other services and
// unknown hosts are skipped, the malformed ones with a log line, and the listener goes on.
func TestListenerFollowsServiceUpdates(t *testing.T) {
	e := newListening(t)
	e.waitReady(t)
	failed := e.held(t)

	for _, m := range []struct {
		key  string
		body []byte
	}{
		{"versioned_notifications.info", []byte("not json")},
		{"versioned_notifications.info", []byte(`{"oslo.version": "2.0", "oslo.message": "{\"event_type\": "}`)},
		{"versioned_notifications.info", []byte(`{"oslo.version": "2.0", "oslo.message": "{\"event_type\": \"service.update\", \"payload\": {\"nova_object.data\": {\"host\": \"` + failed + `\"}}}"}`)},
		{"versioned_notifications.info", []byte(`{"oslo.version": "2.0", "oslo.message": "{\"event_type\": \"instance.create.end\", \"payload\": {}}"}`)},
		{"versioned_notifications.info", serviceUpdate(t, failed, "nova-scheduler", true, false)},
		{"other.info", serviceUpdate(t, "c9", "nova-compute", true, false)}, // not Climate's
	} {
		e.bus.publish(t, m.key, m.body)
		if s := e.handled(t); s.Ignored == "" && s.Host != "c9" || s.Err != nil {
			t.Fatalf("%s: %+v", m.body, s)
		}
	}
	if w := e.windows(t); len(w) != 0 || e.held(t) != failed {
		t.Fatalf("after messages to skip: windows %v, the lease on %s", w, e.held(t))
	}
	if n := strings.Count(e.log.String(), "ignoring a malformed message"); n != 3 {
		t.Fatalf("%d log lines for 3 malformed messages:\n%s", n, e.log)
	}
	// Another priority's routing key is not bound (were it, the next message handled would
	// be this one, of the other host).
	e.bus.publish(t, "versioned_notifications.error", serviceUpdate(t, other(failed), "nova-compute", true, false))

	e.bus.publish(t, "versioned_notifications.info", serviceUpdate(t, failed, "nova-compute", true, false))
	if s := e.handled(t); s.Host != failed || !s.Down || s.Ignored != "" || s.Err != nil {
		t.Fatalf("disabled: %+v", s)
	}
	if w := e.windows(t); len(w) != 1 || w[failed] != 1 {
		t.Fatalf("disabled: the monitor's windows %v, want one on %s", w, failed)
	}
	if got := e.held(t); got != other(failed) {
		t.Fatalf("disabled: the lease holds %s, want it healed onto %s", got, other(failed))
	}
	// Forced down too: once per failure.
	e.bus.publish(t, "versioned_notifications.info", serviceUpdate(t, failed, "nova-compute", true, true))
	e.handled(t)
	if w := e.windows(t); len(w) != 1 || w[failed] != 1 {
		t.Fatalf("disabled and forced down: the monitor's windows %v", w)
	}

	e.bus.publish(t, "versioned_notifications.info", serviceUpdate(t, failed, "nova-compute", false, false))
	if s := e.handled(t); s.Host != failed || s.Down {
		t.Fatalf("enabled: %+v", s)
	}
	if w := e.windows(t); len(w) != 0 {
		t.Fatalf("enabled: the monitor's windows %v, want none", w)
	}
	if !strings.Contains(e.log.String(), "via=notification") {
		t.Fatalf("the decision's log line does not say it came from a notification:\n%s", e.log)
	}
}

// The connection cut, the listener connects again; what changed meanwhile (no message
// for it) is caught up by the resync round with Nova's state, and notifications work
// again.
func TestListenerReconnectsAndResyncs(t *testing.T) {
	e := newListening(t)
	e.waitReady(t)
	failed := e.held(t)
	e.d.nova.mu.Lock()
	e.d.nova.disabled[failed] = true // while nobody listens
	e.d.nova.mu.Unlock()
	e.proxy.cut()
	e.waitReady(t)
	if w := e.windows(t); w[failed] != 1 || e.held(t) != other(failed) {
		t.Fatalf("after the resync: windows %v, the lease on %s", w, e.held(t))
	}
	if !strings.Contains(e.log.String(), "connecting again") || !strings.Contains(e.log.String(), "via=resync") {
		t.Fatalf("no log lines for the lost connection and the resync:\n%s", e.log)
	}
	e.d.nova.mu.Lock()
	e.d.nova.disabled[failed] = false
	e.d.nova.mu.Unlock()
	e.bus.publish(t, "versioned_notifications.info", serviceUpdate(t, failed, "nova-compute", false, false))
	e.handled(t)
	if w := e.windows(t); len(w) != 0 {
		t.Fatalf("enabled after the reconnection: windows %v", w)
	}
}

// Only the leader listens: losing the lead closes the connection (its queue goes with
// it), and the lead regained, the listener connects again.
func TestListenerOnlyWhileLeading(t *testing.T) {
	e := newListening(t)
	e.waitReady(t)
	e.proxy.waitOpen(t, 1)
	e.lead.Store(false)
	e.proxy.waitOpen(t, 0)
	// It keeps asking, and does not connect while it does not lead.
	e.asking.Store(true)
	for range 3 {
		select {
		case lead := <-e.asked:
			if lead {
				t.Fatal("lead while it should not")
			}
		case <-time.After(failAfter):
			t.Fatal("the listener stopped asking for the lead")
		}
	}
	select {
	case <-e.ready:
		t.Fatal("listening without the lead")
	default:
	}
	e.asking.Store(false)
	e.lead.Store(true)
	e.waitReady(t)
	failed := e.held(t)
	e.bus.publish(t, "versioned_notifications.info", serviceUpdate(t, failed, "nova-compute", true, false))
	e.handled(t)
	if w := e.windows(t); w[failed] != 1 {
		t.Fatalf("after the lead came back: windows %v", w)
	}
}

// A broker that refuses the credentials is retried with backoff, and the log names the
// broker without the password.
func TestListenerBadCredentials(t *testing.T) {
	url, _ := amqp.TestURL(t)
	uri, _ := amqp091.ParseURI(url)
	uri.Password = "not-the-password-s3cret"
	d := newTestDriver(t)
	log := &syncLog{lines: make(chan string, 100)}
	d.cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	m := &Monitor{Driver: d.Driver, Hosts: stubList{}, Maintenance: &stubMaintenance{}}
	l, err := NewListener(m, ListenerConfig{URL: uri.String(), Backoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	// Two attempts logged, then stop.
	for n := 0; n < 2; {
		select {
		case line := <-log.lines:
			if strings.Contains(line, "connecting again") {
				n++
			}
		case <-time.After(failAfter):
			t.Fatalf("no retries logged:\n%s", log)
		}
	}
	cancel()
	<-done
	if strings.Contains(log.String(), "s3cret") {
		t.Fatalf("the log shows the password:\n%s", log)
	}
	if !strings.Contains(log.String(), "broker=amqp://"+uri.Username+"@") {
		t.Fatalf("the log does not name the broker:\n%s", log)
	}
}

func TestNewListenerChecks(t *testing.T) {
	m := &Monitor{}
	for _, u := range []string{"", "http://x/", "amqp://user:pa ss@host/", "amqp://", "rabbit://u:pa ss@h1:5672,u:pa ss@h2:5672/"} {
		if _, err := NewListener(m, ListenerConfig{URL: u}); err == nil {
			t.Errorf("%q: no error", u)
		} else if strings.Contains(err.Error(), "pa ss") {
			t.Errorf("%q: the error shows the password: %v", u, err)
		}
	}
	l, err := NewListener(m, ListenerConfig{URL: "amqp://u:p@h/"})
	if err != nil {
		t.Fatal(err)
	}
	if l.cfg.Exchange != "nova" || len(l.cfg.Topics) != 1 || l.cfg.Topics[0] != "versioned_notifications" {
		t.Fatalf("defaults: %+v", l.cfg)
	}
	if l, err := NewListener(m, ListenerConfig{URL: "rabbit://u:p@h:5672/v"}); err != nil || l.String() != "amqp://u@h:5672/v exchange nova, routing keys versioned_notifications.info" {
		t.Fatalf("oslo's rabbit:// URL: %v, %v", l, err)
	}
}

// waitLog waits for a log line containing want.
func waitLog(t *testing.T, log *syncLog, want string) {
	t.Helper()
	for {
		select {
		case line := <-log.lines:
			if strings.Contains(line, want) {
				return
			}
		case <-time.After(failAfter):
			t.Fatalf("no log line with %q:\n%s", want, log)
		}
	}
}

// Nova not up yet (its exchange not declared): the listener says so and tries again,
// without declaring it (its flags are Nova's to choose); once Nova has declared it, the
// listener binds.
func TestListenerWaitsForNovasExchange(t *testing.T) {
	var later string
	e := newListeningWith(t, func(c *ListenerConfig) {
		later = c.Exchange + "_later"
		c.Exchange = later
	})
	waitLog(t, e.log, `exchange \"`+later+`\" is not on the broker`)
	waitLog(t, e.log, `exchange \"`+later+`\" is not on the broker`) // and again
	if err := e.bus.ch.ExchangeDeclare(later, "topic", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.bus.ch.ExchangeDelete(later, false, false) })
	e.waitReady(t)
	failed := e.held(t)
	if err := e.bus.ch.PublishWithContext(context.Background(), later, "versioned_notifications.info", false, false,
		amqp091.Publishing{Body: serviceUpdate(t, failed, "nova-compute", true, false)}); err != nil {
		t.Fatal(err)
	}
	e.handled(t)
	if w := e.windows(t); w[failed] != 1 {
		t.Fatalf("windows %v", w)
	}
}

// With the poll running too, both feed the one decision: what either says first opens
// the window, the other finds it open (one window per failure), and either closes it.
func TestMonitorPollAndNotificationsAgree(t *testing.T) {
	e := newListening(t)
	e.waitReady(t)
	failed := e.held(t)
	ctx := context.Background()
	poll := func() {
		t.Helper()
		if err := e.m.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	set := func(disabled bool) {
		e.d.nova.mu.Lock()
		e.d.nova.disabled[failed] = disabled
		e.d.nova.mu.Unlock()
	}
	// Disabled: the notification first, then rounds.
	set(true)
	e.bus.publish(t, "versioned_notifications.info", serviceUpdate(t, failed, "nova-compute", true, false))
	e.handled(t)
	poll()
	poll()
	if w := e.windows(t); len(w) != 1 || w[failed] != 1 {
		t.Fatalf("disabled, told twice: windows %v", w)
	}
	// Enabled: the round first, then the notification, which finds nothing to do.
	set(false)
	poll()
	if w := e.windows(t); len(w) != 0 {
		t.Fatalf("enabled, polled: windows %v", w)
	}
	e.bus.publish(t, "versioned_notifications.info", serviceUpdate(t, failed, "nova-compute", false, false))
	if s := e.handled(t); s.Err != nil {
		t.Fatal(s.Err)
	}
	// Concurrently, many times: never two windows for one host.
	set(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			poll()
		}
	}()
	for i := range 20 {
		e.bus.publish(t, "versioned_notifications.info", serviceUpdate(t, failed, "nova-compute", true, i%2 == 0))
	}
	for range 20 {
		e.handled(t)
	}
	<-done
	if w := e.windows(t); len(w) != 1 || w[failed] != 1 {
		t.Fatalf("disabled, told 40 times at once: windows %v", w)
	}
}
