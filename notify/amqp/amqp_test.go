package amqp_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"climate"
	"climate/notify"
	"climate/notify/amqp"
)

// The broker the tests use, and how to require it.
const (
	python = "/usr/bin/python3" // Debian's, with python3-oslo.messaging
)

// failAfter bounds every wait for the broker or the listener: reaching it is a failure,
// never part of a passing run.
const failAfter = 60 * time.Second

func randomName(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "climate_test_" + hex.EncodeToString(b[:])
}

// broker is a test's own connection, with an exchange and a topic of its own (the topic's
// queue name, "<topic>.info", is per vhost, so it must be unique too), both deleted when
// the test ends.
type broker struct {
	url, exchange, topic string
	conn                 *amqp091.Connection
	ch                   *amqp091.Channel
}

func newBroker(t testing.TB) *broker {
	t.Helper()
	url, _ := amqp.TestURL(t)
	b := &broker{url: url, exchange: randomName(t), topic: randomName(t)}
	var err error
	if b.conn, err = amqp091.Dial(b.url); err != nil {
		t.Fatalf("connect to the test broker: %v", err)
	}
	if b.ch, err = b.conn.Channel(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A channel error (the queue or exchange never declared) closes the channel: use a
		// fresh one for each deletion.
		for _, del := range []func(*amqp091.Channel) error{
			func(ch *amqp091.Channel) error {
				_, err := ch.QueueDelete(b.topic+".info", false, false, false)
				return err
			},
			func(ch *amqp091.Channel) error { return ch.ExchangeDelete(b.exchange, false, false) },
		} {
			if ch, err := b.conn.Channel(); err == nil {
				_ = del(ch)
				ch.Close()
			}
		}
		b.conn.Close()
	})
	return b
}

// destination returns a destination publishing to b's exchange and topic through url.
func (b *broker) destination(t testing.TB, url string) *amqp.Destination {
	t.Helper()
	d, err := amqp.New(amqp.Config{URL: url, Exchange: b.exchange, Topic: b.topic, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// consume returns the deliveries of queue q.
func (b *broker) consume(t testing.TB, q string) <-chan amqp091.Delivery {
	t.Helper()
	ds, err := b.ch.Consume(q, "", true, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume %s: %v", q, err)
	}
	return ds
}

func receive(t testing.TB, ds <-chan amqp091.Delivery, n int) []amqp091.Delivery {
	t.Helper()
	var got []amqp091.Delivery
	timeout := time.NewTimer(failAfter)
	defer timeout.Stop()
	for len(got) < n {
		select {
		case d, ok := <-ds:
			if !ok {
				t.Fatalf("the consumer stopped after %d of %d messages", len(got), n)
			}
			got = append(got, d)
		case <-timeout.C:
			t.Fatalf("received %d of %d messages in %v", len(got), n, failAfter)
		}
	}
	return got
}

var t0 = time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)

func sampleLease() *climate.Lease {
	id := climate.NewID()
	r := climate.Reservation{ID: climate.NewID(), LeaseID: id, ResourceType: climate.ResourceTypeHost,
		Status: climate.ReservationPending, Min: 1, Max: 2, ResourceProperties: `["==", "$gpu", "True"]`,
		BeforeEnd: "default", CreatedAt: t0}
	return &climate.Lease{ID: id, Name: "lease <&> 1", UserID: "user-1", ProjectID: "project-1", TrustID: "trust-1",
		Start: t0.Add(time.Hour), End: t0.Add(25 * time.Hour), Status: climate.LeasePending, CreatedAt: t0,
		Reservations: []climate.Reservation{r},
		Events: []climate.Event{
			{ID: climate.NewID(), LeaseID: id, Type: climate.EventStartLease, Time: t0.Add(time.Hour),
				Status: climate.EventUndone, CreatedAt: t0},
			{ID: climate.NewID(), LeaseID: id, Type: climate.EventEndLease, Time: t0.Add(25 * time.Hour),
				Status: climate.EventUndone, CreatedAt: t0},
		}}
}

// notifications returns, for one lease: lease.create, lease.update, and a start_lease that
// failed (Error set), a microsecond apart.
func notifications(t testing.TB) []*climate.Notification {
	t.Helper()
	l := sampleLease()
	var ns []*climate.Notification
	for i, c := range []struct {
		typ string
		err error
	}{
		{climate.NotifyLeaseCreate, nil},
		{climate.NotifyLeaseUpdate, nil},
		{climate.NotifyEvent(climate.EventStartLease), errors.New(`nova said "no" <500>`)},
	} {
		n, err := notify.New(c.typ, l, c.err, t0.Add(time.Duration(i)*1234567*time.Nanosecond))
		if err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
	}
	return ns
}

// expectedPayload is n's payload as a consumer decodes it: Blazar's lease payload, with
// "error" when n.Error is set.
func expectedPayload(t testing.TB, n *climate.Notification) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(n.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if n.Error != "" {
		p["error"] = n.Error
	}
	return p
}

// decode decodes an envelope as oslo.messaging does: the outer object has exactly the two
// envelope keys, and oslo.message is a string holding the message's JSON object.
func decode(t testing.TB, body []byte) map[string]any {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, body)
	}
	if len(env) != 2 || env["oslo.version"] != "2.0" {
		t.Fatalf("envelope: want exactly oslo.version \"2.0\" and oslo.message, got %s", body)
	}
	inner, ok := env["oslo.message"].(string)
	if !ok {
		t.Fatalf("oslo.message is not a string: %s", body)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(inner), &m); err != nil {
		t.Fatalf("oslo.message is not a JSON object: %v: %s", err, inner)
	}
	return m
}

func TestEnvelope(t *testing.T) {
	for _, n := range notifications(t) {
		body, err := amqp.Envelope(n, "climate.test")
		if err != nil {
			t.Fatal(err)
		}
		got := decode(t, body)
		want := map[string]any{
			"message_id":          n.ID,
			"publisher_id":        "climate.test",
			"event_type":          n.EventType,
			"priority":            "INFO",
			"payload":             expectedPayload(t, n),
			"timestamp":           n.CreatedAt.Format("2006-01-02 15:04:05.000000"),
			"_unique_id":          strings.ReplaceAll(n.ID, "-", ""),
			"_context_project_id": "project-1",
			"_context_user_id":    "user-1",
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", n.EventType, got, want)
		}
		if p := got["payload"].(map[string]any); p["lease_id"] != n.LeaseID || p["id"] != n.LeaseID {
			t.Errorf("%s: payload lease_id %v, id %v; want %s", n.EventType, p["lease_id"], p["id"], n.LeaseID)
		}
	}
	// oslo's format, with the fraction when it is zero too.
	ns := notifications(t)
	if got := decode(t, must(amqp.Envelope(ns[0], "p")))["timestamp"]; got != "2031-01-02 03:04:05.000000" {
		t.Errorf("timestamp %v, want 2031-01-02 03:04:05.000000", got)
	}
	if got := decode(t, must(amqp.Envelope(ns[1], "p")))["timestamp"]; got != "2031-01-02 03:04:05.001234" {
		t.Errorf("timestamp %v, want 2031-01-02 03:04:05.001234", got)
	}
	// An error with an empty payload, and a payload that is not an object.
	n := &climate.Notification{ID: "x", EventType: "lease.event.end_lease", Error: "boom", CreatedAt: t0}
	if got := decode(t, must(amqp.Envelope(n, "p")))["payload"]; !reflect.DeepEqual(got, map[string]any{"error": "boom"}) {
		t.Errorf("payload %v, want {error: boom}", got)
	}
	n.Payload = []byte(`[1]`)
	if _, err := amqp.Envelope(n, "p"); err == nil {
		t.Error("a payload that is not a JSON object was published")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestDeliver publishes notifications and reads them back as a consumer with its own
// queue does, and from the topic's queue the destination declares as oslo does.
func TestDeliver(t *testing.T) {
	b := newBroker(t)
	// Declared first as an oslo listener would: the destination must accept it as is.
	if err := b.ch.ExchangeDeclare(b.exchange, "topic", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q, err := b.ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ch.QueueBind(q.Name, b.topic+".info", b.exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	d := b.destination(t, b.url)
	if d.Name() != "amqp" {
		t.Errorf("Name() = %q", d.Name())
	}
	ns := append(notifications(t), notifications(t)...)
	ctx := context.Background()
	for _, n := range ns {
		if !d.Accepts(n) {
			t.Errorf("%s not accepted", n.EventType)
		}
		if err := d.Deliver(ctx, n); err != nil {
			t.Fatalf("Deliver %s: %v", n.EventType, err)
		}
	}
	got := receive(t, b.consume(t, q.Name), len(ns))
	for i, m := range got {
		n := ns[i] // in order
		if m.Exchange != b.exchange || m.RoutingKey != b.topic+".info" {
			t.Errorf("%d: published to %q with key %q", i, m.Exchange, m.RoutingKey)
		}
		if m.ContentType != "application/json" || m.ContentEncoding != "utf-8" ||
			m.DeliveryMode != amqp091.Persistent || m.MessageId != n.ID {
			t.Errorf("%d: content type %q, encoding %q, delivery mode %d, message id %q", i,
				m.ContentType, m.ContentEncoding, m.DeliveryMode, m.MessageId)
		}
		msg := decode(t, m.Body)
		want := map[string]any{
			"message_id": n.ID, "publisher_id": "blazar.lease", "event_type": n.EventType, "priority": "INFO",
			"payload": expectedPayload(t, n), "timestamp": n.CreatedAt.Format("2006-01-02 15:04:05.000000"),
			"_unique_id": strings.ReplaceAll(n.ID, "-", ""), "_context_project_id": "project-1",
			"_context_user_id": "user-1",
		}
		if !reflect.DeepEqual(msg, want) {
			t.Errorf("%d:\n got %v\nwant %v", i, msg, want)
		}
	}
	// The topic's own queue, declared by the destination as oslo's notifier does, keeps
	// every notification for consumers that are not there yet.
	tq, err := b.ch.QueueDeclarePassive(b.topic+".info", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("the destination declared no queue %s.info: %v", b.topic, err)
	}
	if tq.Messages != len(ns) {
		t.Errorf("queue %s holds %d messages, want %d", tq.Name, tq.Messages, len(ns))
	}
}

// TestExistingDurableTopology: a deployment whose services run with
// amqp_durable_queues=True made the exchange and the queue durable; a destination
// configured with oslo's default (not durable) uses them as they are instead of failing
// with PRECONDITION_FAILED.
func TestExistingDurableTopology(t *testing.T) {
	b := newBroker(t)
	if err := b.ch.ExchangeDeclare(b.exchange, "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q, err := b.ch.QueueDeclare(b.topic+".info", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ch.QueueBind(q.Name, q.Name, b.exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	d := b.destination(t, b.url)
	ns := notifications(t)
	for _, n := range ns {
		if err := d.Deliver(context.Background(), n); err != nil {
			t.Fatalf("Deliver to a durable exchange and queue: %v", err)
		}
	}
	for i, m := range receive(t, b.consume(t, q.Name), len(ns)) {
		if id := decode(t, m.Body)["message_id"]; id != ns[i].ID {
			t.Errorf("%d: message_id %v, want %s", i, id, ns[i].ID)
		}
	}
}

// TestWrongPassword: the broker refuses the login; the error says so without the password.
func TestWrongPassword(t *testing.T) {
	b := newBroker(t)
	uri, err := amqp091.ParseURI(b.url)
	if err != nil {
		t.Fatal(err)
	}
	uri.Password = "wr0ng-s3cret"
	d := b.destination(t, uri.String())
	err = d.Deliver(context.Background(), notifications(t)[0])
	if err == nil {
		t.Fatal("Deliver succeeded with a wrong password")
	}
	if strings.Contains(err.Error(), "wr0ng-s3cret") {
		t.Errorf("the error shows the password: %v", err)
	}
	t.Logf("the error: %v", err)
}

// TestOsloListener delivers to oslo.messaging's own notification listener, the one
// ceilometer uses: one notification before the listener exists, two after it started.
func TestOsloListener(t *testing.T) {
	b := newBroker(t)
	if err := exec.Command(python, "-c", "import oslo_messaging").Run(); err != nil {
		if os.Getenv(amqp.TestRequiredEnv) == "1" {
			t.Fatalf("%s cannot import oslo_messaging (%v): install python3-oslo.messaging", python, err)
		}
		t.Skipf("%s cannot import oslo_messaging (%v): install python3-oslo.messaging", python, err)
	}
	d := b.destination(t, b.url)
	ns := notifications(t)
	ctx := context.Background()
	// Before any listener: the destination declares the exchange and the queue, and the
	// listener must accept both as they are (no PRECONDITION_FAILED) and get the message.
	if err := d.Deliver(ctx, ns[0]); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(ctx, 2*failAfter)
	defer cancel()
	transportURL := "rabbit://" + strings.TrimPrefix(b.url, "amqp://")
	cmd := exec.CommandContext(ctx, python, "testdata/oslo_listener.py", transportURL, b.exchange, b.topic,
		strconv.Itoa(len(ns)))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	defer func() {
		if !exited {
			stdin.Close() // the listener exits when its input closes
			cmd.Wait()
		}
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(stdout)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the listener exited: %v\n%s", cmd.Wait(), stderr.String())
			}
			return l
		case <-ctx.Done():
			t.Fatalf("no answer from the listener in %v\n%s", 2*failAfter, stderr.String())
		}
		return ""
	}
	if l := next(); l != "ready" {
		t.Fatalf("listener: %s\n%s", l, stderr.String())
	}
	for _, n := range ns[1:] {
		if err := d.Deliver(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	type line struct {
		Ctxt        map[string]any    `json:"ctxt"`
		PublisherID string            `json:"publisher_id"`
		EventType   string            `json:"event_type"`
		Payload     map[string]any    `json:"payload"`
		Metadata    map[string]string `json:"metadata"`
	}
	// The listener's threading executor may print two messages in either order: match
	// them by message id.
	byID := map[string]line{}
	for range ns {
		var got line
		l := next()
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatalf("listener line %q: %v", l, err)
		}
		byID[got.Metadata["message_id"]] = got
	}
	for i, n := range ns {
		got, ok := byID[n.ID]
		if !ok {
			t.Errorf("%d: message %s never arrived", i, n.ID)
			continue
		}
		if got.PublisherID != "blazar.lease" || got.EventType != n.EventType {
			t.Errorf("%d: publisher_id %q, event_type %q; want blazar.lease, %s", i, got.PublisherID, got.EventType, n.EventType)
		}
		if !reflect.DeepEqual(got.Payload, expectedPayload(t, n)) {
			t.Errorf("%d: payload\n got %v\nwant %v", i, got.Payload, expectedPayload(t, n))
		}
		if got.Payload["lease_id"] != n.LeaseID || got.Payload["name"] != "lease <&> 1" {
			t.Errorf("%d: payload lease_id %v, name %v", i, got.Payload["lease_id"], got.Payload["name"])
		}
		wantMeta := map[string]string{"message_id": n.ID, "timestamp": n.CreatedAt.Format("2006-01-02 15:04:05.000000")}
		if !reflect.DeepEqual(got.Metadata, wantMeta) {
			t.Errorf("%d: metadata %v, want %v", i, got.Metadata, wantMeta)
		}
		if got.Ctxt["project_id"] != "project-1" || got.Ctxt["user_id"] != "user-1" {
			t.Errorf("%d: context %v, want project_id project-1 and user_id user-1", i, got.Ctxt)
		}
	}
	exited = true
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("listener: %v\n%s", err, stderr.String())
	}
}

// TestBrokerDown: nothing listens at the URL's port; Deliver fails, promptly, without the
// password in the error, and does not leave the destination broken.
func TestBrokerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	d, err := amqp.New(amqp.Config{URL: "amqp://climate:s3cretpassw0rd@" + addr + "/", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	n := notifications(t)[0]
	for range 2 {
		err := d.Deliver(context.Background(), n)
		if err == nil {
			t.Fatal("Deliver succeeded with no broker")
		}
		if strings.Contains(err.Error(), "s3cretpassw0rd") {
			t.Errorf("the error shows the password: %v", err)
		}
		if !strings.Contains(err.Error(), "amqp://climate@"+addr+"/") {
			t.Errorf("the error does not name the broker: %v", err)
		}
	}
	if s := d.String(); strings.Contains(s, "s3cretpassw0rd") {
		t.Errorf("String() shows the password: %s", s)
	}
	// The caller's context bounds Deliver too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Deliver(ctx, n); !errors.Is(err, context.Canceled) {
		t.Errorf("Deliver with a canceled context: %v", err)
	}
}

// TestBrokerHangs: a server accepts the connection and never answers; Deliver gives up
// when its context ends.
func TestBrokerHangs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	d, err := amqp.New(amqp.Config{URL: "amqp://guest:guest@" + ln.Addr().String() + "/"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := d.Deliver(ctx, notifications(t)[0]); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Deliver to a server that never answers: %v, want a deadline error", err)
	}
}

// proxy forwards TCP connections to the broker; down cuts them and refuses new ones, as a
// broker that stopped would; pause holds back what the broker sends (its confirms).
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	open   chan struct{} // closed unless paused
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}, open: make(chan struct{})}
	close(p.open)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.setDown(true)
		p.resume()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = make(chan struct{})
}

func (p *proxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

func (p *proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.wg.Add(2)
		p.mu.Unlock()
		pipe := func(dst, src net.Conn, gated bool) {
			defer p.wg.Done()
			defer dst.Close()
			defer src.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					if gated {
						<-p.gate()
					}
					if _, err := dst.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}
		go pipe(up, c, false)
		go pipe(c, up, true)
	}
}

// setDown sets whether the broker is down; going down closes every connection.
func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		p.cutAll()
	}
}

// cutAll closes every connection (the broker closing them); p.mu is held.
func (p *proxy) cutAll() {
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutAll()
}

// TestReconnect: the broker goes away and comes back; Deliver fails while it is away and
// works again, with nothing lost or repeated, once it is back. A connection the broker
// cut while idle is replaced within the next Deliver.
func TestReconnect(t *testing.T) {
	b := newBroker(t)
	uri, err := amqp091.ParseURI(b.url)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)))
	uri.Host, uri.Port = "127.0.0.1", p.ln.Addr().(*net.TCPAddr).Port
	d := b.destination(t, uri.String())
	ns := append(notifications(t), notifications(t)...)
	ctx := context.Background()

	if err := d.Deliver(ctx, ns[0]); err != nil {
		t.Fatal(err)
	}
	p.setDown(true)
	for range 2 {
		if err := d.Deliver(ctx, ns[1]); err == nil {
			t.Fatal("Deliver succeeded while the broker was down")
		}
	}
	p.setDown(false)
	if err := d.Deliver(ctx, ns[1]); err != nil {
		t.Fatalf("Deliver once the broker was back: %v", err)
	}
	if err := d.Deliver(ctx, ns[2]); err != nil {
		t.Fatal(err)
	}
	// Cut while idle, and back at once: the next Deliver succeeds (whether or not the
	// client noticed the cut before it).
	for _, n := range ns[3:] {
		p.cut()
		if err := d.Deliver(ctx, n); err != nil {
			t.Fatalf("Deliver after the connection was cut: %v", err)
		}
	}
	var ids []string
	for _, m := range receive(t, b.consume(t, b.topic+".info"), len(ns)) {
		ids = append(ids, decode(t, m.Body)["message_id"].(string))
	}
	want := make([]string, len(ns))
	for i, n := range ns {
		want[i] = n.ID
	}
	if !slices.Equal(ids, want) {
		t.Errorf("received %v\nwant     %v", ids, want)
	}
	tq, err := b.ch.QueueDeclarePassive(b.topic+".info", false, false, false, false, nil)
	if err != nil || tq.Messages != 0 {
		t.Errorf("after the %d expected messages the queue holds %d more (%v)", len(ns), tq.Messages, err)
	}
}

// TestNoConfirm: the broker receives the message but its confirm never arrives; Deliver
// fails when its context ends, and the notification is delivered again on a new
// connection: at least once, so the consumer sees it twice.
func TestNoConfirm(t *testing.T) {
	b := newBroker(t)
	uri, err := amqp091.ParseURI(b.url)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)))
	uri.Host, uri.Port = "127.0.0.1", p.ln.Addr().(*net.TCPAddr).Port
	d := b.destination(t, uri.String())
	ns := notifications(t)
	if err := d.Deliver(context.Background(), ns[0]); err != nil {
		t.Fatal(err)
	}
	msgs := b.consume(t, b.topic+".info")
	next := func() string { return decode(t, receive(t, msgs, 1)[0].Body)["message_id"].(string) }
	if id := next(); id != ns[0].ID {
		t.Fatalf("received %s, want %s", id, ns[0].ID)
	}
	p.pause()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := d.Deliver(ctx, ns[1]); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Deliver without a confirm: %v, want a deadline error", err)
	}
	if id := next(); id != ns[1].ID { // the broker had it
		t.Fatalf("received %s, want %s", id, ns[1].ID)
	}
	p.resume()
	for _, n := range ns[1:] {
		if err := d.Deliver(context.Background(), n); err != nil {
			t.Fatal(err)
		}
		if id := next(); id != n.ID {
			t.Fatalf("received %s, want %s", id, n.ID)
		}
	}
}

func TestClose(t *testing.T) {
	b := newBroker(t)
	d := b.destination(t, b.url)
	n := notifications(t)[0]
	if err := d.Deliver(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Deliver(context.Background(), n); !errors.Is(err, amqp.ErrClosed) {
		t.Errorf("Deliver after Close: %v, want ErrClosed", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestNewChecksURL(t *testing.T) {
	const secret = "hunter2-secret"
	for _, u := range []string{
		"",
		"http://climate:" + secret + "@rabbit:5672/",
		"amqp://climate:" + secret + "@rabbit:notaport/",
		"amqp://climate:" + secret + "@rabbit:5672/?heartbeat=x y",
		"amqp://climate:" + secret + "@/",
		"amqp://climate:" + secret + "@[::1/",
		"amqp://climate:" + secret + "@rabbit:99999/",
	} {
		d, err := amqp.New(amqp.Config{URL: u})
		if err == nil {
			t.Errorf("New accepted %q (%s)", strings.ReplaceAll(u, secret, "…"), d)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	for _, u := range []string{"amqp://rabbit", "amqps://climate:" + secret + "@rabbit.example:5671/openstack"} {
		d, err := amqp.New(amqp.Config{URL: u})
		if err != nil {
			t.Errorf("New(%q): %v", strings.ReplaceAll(u, secret, "…"), err)
			continue
		}
		if strings.Contains(d.String(), secret) {
			t.Errorf("String() shows the password: %s", d)
		}
	}
	d, _ := amqp.New(amqp.Config{URL: "amqps://climate:" + secret + "@rabbit.example/openstack"})
	if got, want := d.String(), "amqps://climate@rabbit.example:5671/openstack exchange openstack, routing key notifications.info"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// BenchmarkDeliver reports the latency of one confirmed publish (p50, p99):
//
//	go test -run '^$' -bench Deliver -benchtime 1000x ./notify/amqp
func BenchmarkDeliver(b *testing.B) {
	br := newBroker(b)
	d := br.destination(b, br.url)
	ns := notifications(b)
	ctx := context.Background()
	if err := d.Deliver(ctx, ns[0]); err != nil { // connect and declare
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := d.Deliver(ctx, ns[i%len(ns)]); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op") // the percentiles say it better
}
