// Package amqp is the notify.Destination "amqp": it publishes each notification to RabbitMQ
// (AMQP 0-9-1) as oslo.messaging's notifier does, so OpenStack consumers (ceilometer, any
// oslo.messaging notification listener) read Climate's notifications as Blazar's.
//
// # What is published
//
// One message per notification, to the topic exchange Config.Exchange (default
// "openstack", oslo.messaging's control_exchange) with routing key
// "<Config.Topic>.info" (default "notifications.info"). The body is oslo.messaging's
// 2.0 envelope:
//
//	{"oslo.version": "2.0", "oslo.message": "<the message, as a JSON string>"}
//
// and the message is
//
//	{"message_id": "<the notification's ID>",
//	 "publisher_id": "blazar.lease",                 (Config.PublisherID)
//	 "event_type": "lease.create",                   (lease.update, lease.event.start_lease, …)
//	 "priority": "INFO",
//	 "payload": {"lease_id": "…", "id": "…", …},     (the lease as the API shows it)
//	 "timestamp": "2031-01-01 00:00:00.000000",      (when the change was committed, UTC)
//	 "_unique_id": "<the notification's ID, hex>",
//	 "_context_project_id": "…", "_context_user_id": "…"}
//
// The payload is the notification's (Blazar's lease payload, with lease_id). When the
// notification's Error is set (a lease.event.* whose action failed), the payload gains a
// key "error" with the message; event_type stays the event's. The timestamp always has
// six fractional digits (Python's str(datetime) drops them at .000000; oslo's parsers
// accept both). _unique_id is what oslo.messaging's listener de-duplicates redeliveries
// on: Climate delivers at least once, and a repeated notification carries the same
// _unique_id and message_id. The _context_ keys are the request context oslo listeners
// hand to their endpoints (Blazar sends its trust's; Climate the lease's project and user).
//
// Messages are persistent (delivery mode 2), application/json, utf-8, with the AMQP
// message-id property set to the notification's ID.
//
// # Topology
//
// Like oslo.messaging's RabbitMQ driver (amqp_durable_queues=False, amqp_auto_delete=False,
// its defaults), the destination declares the exchange (type topic, not durable, not
// auto-delete) and a queue named after the routing key ("notifications.info"), bound with
// that key, so notifications published before any consumer exists are kept for it. oslo
// listeners declare the same with the same flags, so neither side's declaration fails with
// PRECONDITION_FAILED. An exchange or queue that already exists is used as it is, whatever
// its flags (it is first declared passively): a deployment that made them durable, or
// quorum queues, keeps working. Config.Durable declares them durable when Climate is the
// first to declare them (for listeners configured with amqp_durable_queues=True).
//
// # Delivery
//
// Deliver returns nil only after the broker confirmed the message (publisher confirms). A
// nack, a lost connection or no confirm within Config.Timeout (default 10 s) is an error,
// and the notify worker retries. The connection is opened at the first Deliver, kept
// between deliveries, and opened again after any error; a connection the broker closed
// while idle is replaced within the next Deliver (which then publishes once more on the
// new one). Deliveries are serialized, so order is kept. Close closes the connection.
//
// The URL's password never appears in errors: they name the broker as
// scheme://user@host:port/vhost.
package amqp

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"climate"
	"climate/amqpurl"
)

// Defaults of Config's fields.
const (
	DefaultExchange    = "openstack"     // oslo.messaging's control_exchange
	DefaultTopic       = "notifications" // oslo.messaging's [oslo_messaging_notifications] topics
	DefaultPublisherID = "blazar.lease"  // Blazar's [notifications] publisher_id
	DefaultTimeout     = 10 * time.Second
)

// Config configures a Destination. Only URL is required.
type Config struct {
	// URL is the broker: amqp://user:password@host:5672/vhost or amqps://… (TLS). The
	// default vhost is "/" (amqp://host/ means vhost "", percent-encode "/" as %2F).
	URL string
	// Exchange is the topic exchange published to (default "openstack").
	Exchange string
	// Topic is the notification topic; messages go with routing key "<Topic>.info"
	// (default "notifications").
	Topic string
	// PublisherID is the message's publisher_id (default "blazar.lease").
	PublisherID string
	// Durable declares the exchange and the topic's queue durable when they do not exist
	// yet, as oslo.messaging does with amqp_durable_queues=True (default false, oslo's
	// default).
	Durable bool
	// Timeout bounds one Deliver: connecting, declaring, publishing and waiting for the
	// broker's confirm (default 10 s). The caller's context may cut it shorter.
	Timeout time.Duration
	// TLS is the TLS configuration for amqps:// URLs (nil: the system's roots, and the
	// server name from the URL).
	TLS *tls.Config
}

// Destination publishes notifications to RabbitMQ. Its methods are safe for concurrent
// use; deliveries are serialized.
type Destination struct {
	cfg        Config
	url        string // with the password: only ever given to the AMQP library
	addr       string // the URL without its password, for errors
	password   string
	routingKey string

	mu       sync.Mutex // serializes deliveries and guards the fields below
	closed   bool
	conn     *amqp091.Connection
	ch       *amqp091.Channel
	deadline time.Time // the current delivery's

	// raw is the current connection's socket, closed to abandon the connection at once
	// when a delivery runs out of time (the library's calls take no context).
	rawMu sync.Mutex
	raw   net.Conn
}

var _ interface {
	Name() string
	Accepts(*climate.Notification) bool
	Deliver(context.Context, *climate.Notification) error
} = (*Destination)(nil)

// ErrClosed is returned by Deliver after Close.
var ErrClosed = errors.New("amqp: destination closed")

// New checks cfg and returns the destination; it connects at the first Deliver.
func New(cfg Config) (*Destination, error) {
	addr, password, err := amqpurl.Check(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Exchange == "" {
		cfg.Exchange = DefaultExchange
	}
	if cfg.Topic == "" {
		cfg.Topic = DefaultTopic
	}
	if cfg.PublisherID == "" {
		cfg.PublisherID = DefaultPublisherID
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	for _, s := range []struct{ name, v string }{{"exchange", cfg.Exchange}, {"topic", cfg.Topic}} {
		// AMQP short strings: exchange and queue names are at most 255 bytes.
		if len(s.v)+len(".info") > 255 {
			return nil, fmt.Errorf("amqp: %s name longer than 250 bytes", s.name)
		}
	}
	if cfg.TLS != nil {
		cfg.TLS = cfg.TLS.Clone()
	}
	return &Destination{cfg: cfg, url: cfg.URL, addr: addr, password: password,
		routingKey: cfg.Topic + ".info"}, nil
}

// Name is the destination's cursor name, "amqp".
func (d *Destination) Name() string { return "amqp" }

// Accepts reports true: every notification is published.
func (d *Destination) Accepts(*climate.Notification) bool { return true }

// String describes the destination without secrets, for logs:
// "amqp://guest@127.0.0.1:5672/ exchange openstack, routing key notifications.info".
func (d *Destination) String() string {
	return fmt.Sprintf("%s exchange %s, routing key %s", d.addr, d.cfg.Exchange, d.routingKey)
}

// Deliver publishes n and waits for the broker's confirm.
func (d *Destination) Deliver(ctx context.Context, n *climate.Notification) error {
	body, err := Envelope(n, d.cfg.PublisherID)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("amqp: %w", err) // leave the connection alone
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	d.deadline, _ = ctx.Deadline()
	// The library's calls block without a context: when ctx ends, close the socket so they
	// return at once.
	stop := context.AfterFunc(ctx, d.abort)
	defer stop()
	for attempt := 0; ; attempt++ {
		reused := d.ch != nil && !d.ch.IsClosed() && !d.conn.IsClosed()
		if !reused {
			d.drop()
			if err := d.connect(); err != nil {
				d.drop()
				return d.fail(ctx, "connect to "+d.addr, err)
			}
		}
		err := d.publish(ctx, n.ID, body)
		if err == nil {
			return nil
		}
		lost := d.conn.IsClosed() || d.ch.IsClosed()
		d.drop()
		if lost && reused && attempt == 0 && d.expired(ctx) == nil {
			// The connection had died since the last delivery (a broker restart, an idle
			// connection cut): publish once more on a new one.
			continue
		}
		return d.fail(ctx, "publish to "+d.addr, err)
	}
}

// fail wraps err for Deliver's caller: as a timeout when ctx ended (the socket was closed
// under the library), and without the password in any case.
func (d *Destination) fail(ctx context.Context, what string, err error) error {
	if cerr := d.expired(ctx); cerr != nil {
		err = fmt.Errorf("%w (%v)", cerr, err)
	}
	msg := err.Error()
	if d.password != "" && strings.Contains(msg, d.password) {
		return fmt.Errorf("amqp: %s: %s", what, strings.ReplaceAll(msg, d.password, "xxxxx"))
	}
	return fmt.Errorf("amqp: %s: %w", what, err)
}

// expired returns ctx's error, or DeadlineExceeded once its deadline has passed: the
// socket's deadline is the same instant, and an I/O timeout may come back before ctx's
// own timer has fired.
func (d *Destination) expired(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !d.deadline.IsZero() && !time.Now().Before(d.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// connect opens the connection and a channel in confirm mode, and declares the topology.
func (d *Destination) connect() error {
	conn, err := amqp091.DialConfig(d.url, amqp091.Config{
		Dial:            d.dial,
		TLSClientConfig: d.cfg.TLS.Clone(),
		Properties:      connectionProperties(),
	})
	if err != nil {
		return err
	}
	d.conn = conn
	ch, err := d.declare()
	if err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("confirm mode: %w", err)
	}
	d.ch = ch
	return nil
}

func connectionProperties() amqp091.Table {
	p := amqp091.NewConnectionProperties()
	p.SetClientConnectionName("climate notify")
	return p
}

// dial opens the socket; the delivery's deadline bounds it and the TLS and AMQP handshakes
// (the library clears it once the connection is open).
func (d *Destination) dial(network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{Deadline: d.deadline}).Dial(network, addr)
	if err != nil {
		return nil, err
	}
	if err := c.SetDeadline(d.deadline); err != nil {
		c.Close()
		return nil, err
	}
	d.rawMu.Lock()
	d.raw = c
	d.rawMu.Unlock()
	return c, nil
}

// abort closes the current socket, so a blocked library call returns.
func (d *Destination) abort() {
	d.rawMu.Lock()
	defer d.rawMu.Unlock()
	if d.raw != nil {
		d.raw.Close()
	}
}

// declare declares the exchange and the topic's queue as oslo.messaging does, using
// either as it is when it exists already (a passive declaration first), and binds the
// queue. It returns an open channel.
func (d *Destination) declare() (*amqp091.Channel, error) {
	ch, err := d.conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.ExchangeDeclarePassive(d.cfg.Exchange, "topic", d.cfg.Durable, false, false, false, nil); err != nil {
		if !notFound(err) {
			return nil, fmt.Errorf("exchange %s: %w", d.cfg.Exchange, err)
		}
		// A failed passive declaration closes the channel.
		if ch, err = d.conn.Channel(); err != nil {
			return nil, err
		}
		if err := ch.ExchangeDeclare(d.cfg.Exchange, "topic", d.cfg.Durable, false, false, false, nil); err != nil {
			return nil, fmt.Errorf("declare exchange %s: %w", d.cfg.Exchange, err)
		}
	}
	if _, err := ch.QueueDeclarePassive(d.routingKey, d.cfg.Durable, false, false, false, nil); err != nil {
		if !notFound(err) {
			return nil, fmt.Errorf("queue %s: %w", d.routingKey, err)
		}
		if ch, err = d.conn.Channel(); err != nil {
			return nil, err
		}
		if _, err := ch.QueueDeclare(d.routingKey, d.cfg.Durable, false, false, false, nil); err != nil {
			return nil, fmt.Errorf("declare queue %s: %w", d.routingKey, err)
		}
	}
	// The queue may exist bound to other exchanges only (every OpenStack service publishes
	// to notifications.info on its own exchange): bind it to ours. Binding is idempotent.
	if err := ch.QueueBind(d.routingKey, d.routingKey, d.cfg.Exchange, false, nil); err != nil {
		return nil, fmt.Errorf("bind queue %s to exchange %s: %w", d.routingKey, d.cfg.Exchange, err)
	}
	return ch, nil
}

func notFound(err error) bool {
	var e *amqp091.Error
	return errors.As(err, &e) && e.Code == amqp091.NotFound
}

// publish sends one message and waits for its confirm.
func (d *Destination) publish(ctx context.Context, id string, body []byte) error {
	dc, err := d.ch.PublishWithDeferredConfirmWithContext(ctx, d.cfg.Exchange, d.routingKey, false, false,
		amqp091.Publishing{
			ContentType:     "application/json",
			ContentEncoding: "utf-8",
			DeliveryMode:    amqp091.Persistent,
			MessageId:       id,
			Body:            body,
		})
	if err != nil {
		return err
	}
	acked, err := dc.WaitContext(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("no confirm from the broker: %w", err)
	case acked:
		return nil
	case d.ch.IsClosed() || d.conn.IsClosed():
		// Pending confirms are nacked when the channel closes.
		return errors.New("the connection closed before the broker confirmed")
	default:
		return errors.New("the broker refused the message (nack)")
	}
}

// drop closes the current connection, if any.
func (d *Destination) drop() {
	if d.conn != nil {
		// Politely, but not for long: a broker that stopped answering gets 1 s.
		_ = d.conn.CloseDeadline(time.Now().Add(time.Second))
	}
	d.abort()
	d.rawMu.Lock()
	d.raw = nil
	d.rawMu.Unlock()
	d.conn, d.ch = nil, nil
}

// Close closes the connection; Deliver then returns ErrClosed. It waits for a delivery in
// progress (at most Timeout).
func (d *Destination) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	d.drop()
	return nil
}

// message is oslo.messaging's notification message, in the order of oslo's dict.
type message struct {
	MessageID   string          `json:"message_id"`
	PublisherID string          `json:"publisher_id"`
	EventType   string          `json:"event_type"`
	Priority    string          `json:"priority"`
	Payload     json.RawMessage `json:"payload"`
	Timestamp   string          `json:"timestamp"`
	UniqueID    string          `json:"_unique_id"`
	ProjectID   string          `json:"_context_project_id,omitempty"`
	UserID      string          `json:"_context_user_id,omitempty"`
}

// TimestampFormat is oslo.messaging's notification timestamp (str of a naive UTC
// datetime), with the fraction always present.
const TimestampFormat = "2006-01-02 15:04:05.000000"

// Envelope returns the AMQP body Deliver publishes for n: oslo.messaging's 2.0 envelope
// around the notification message (see the package documentation).
func Envelope(n *climate.Notification, publisherID string) ([]byte, error) {
	payload := bytes.TrimSpace(n.Payload)
	if len(payload) == 0 {
		payload = []byte("{}")
	}
	if payload[0] != '{' || !json.Valid(payload) {
		return nil, fmt.Errorf("amqp: notification %s: the payload is not a JSON object", n.ID)
	}
	var who struct {
		UserID string `json:"user_id"`
	}
	_ = json.Unmarshal(payload, &who) // valid JSON; a user_id of another type is left out
	if n.Error != "" {
		payload = withError(payload, n.Error)
	}
	m := message{
		MessageID:   n.ID,
		PublisherID: publisherID,
		EventType:   n.EventType,
		Priority:    "INFO",
		Payload:     payload,
		Timestamp:   n.CreatedAt.UTC().Format(TimestampFormat),
		UniqueID:    strings.ReplaceAll(n.ID, "-", ""),
		ProjectID:   n.ProjectID,
		UserID:      who.UserID,
	}
	inner, err := marshal(m)
	if err != nil {
		return nil, fmt.Errorf("amqp: notification %s: %w", n.ID, err)
	}
	return marshal(struct {
		Version string `json:"oslo.version"`
		Message string `json:"oslo.message"`
	}{"2.0", string(inner)})
}

// withError returns the JSON object payload with the key "error" added (or replaced, as
// the last key wins in every JSON decoder that matters here: Python's and Go's).
func withError(payload []byte, msg string) []byte {
	quoted, _ := marshal(msg) // a string always marshals
	out := make([]byte, 0, len(payload)+len(quoted)+10)
	out = append(out, payload[:len(payload)-1]...) // without the closing brace
	if len(bytes.TrimSpace(out)) > 1 {             // more than "{": a key precedes
		out = append(out, ',')
	}
	out = append(out, `"error":`...)
	out = append(out, quoted...)
	return append(out, '}')
}

// marshal is json.Marshal without HTML escaping (<, >, & stay as they are, as Python's
// json.dumps writes them).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
