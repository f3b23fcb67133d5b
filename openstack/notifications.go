package openstack

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"climate"
	"climate/amqpurl"
)

// Defaults of ListenerConfig's fields.
const (
	// DefaultNovaExchange is Nova's control_exchange, the topic exchange its notifications
	// go to.
	DefaultNovaExchange = "nova"
	// DefaultNovaTopic is Nova's [notifications] versioned_notifications_topics: Nova
	// emits service.update only as a versioned notification.
	DefaultNovaTopic     = "versioned_notifications"
	DefaultListenBackoff = time.Second
	DefaultListenMax     = 30 * time.Second
	DefaultLeadEvery     = 10 * time.Second
)

// ServiceUpdate is the event type of Nova's compute service changes the listener acts on.
const ServiceUpdate = "service.update"

// ListenerConfig configures a Listener. Only URL is required.
type ListenerConfig struct {
	// URL is the broker Nova notifies on (its [oslo_messaging_notifications]
	// transport_url, or its transport_url): amqp://user:password@host:5672/vhost or
	// amqps://…; oslo's rabbit://user:password@host:5672/vhost is taken as amqp://, with
	// one host.
	URL string
	// Exchange is Nova's control_exchange (default "nova").
	Exchange string
	// Topics are Nova's versioned notification topics (default "versioned_notifications");
	// the queue is bound with "<topic>.info" for each, the priority of service.update.
	Topics []string
	// TLS is the TLS configuration for amqps:// URLs (nil: the system's roots).
	TLS *tls.Config
	// Backoff is the first wait before connecting again after a failure (default 1 s),
	// doubled after each failure up to MaxBackoff (default 30 s).
	Backoff, MaxBackoff time.Duration
	// LeadEvery is how often the monitor's Leader is asked: by the leader to renew its
	// lead while it listens, by another replica to take over (default 10 s).
	LeadEvery time.Duration
	// Ready, when set, is called each time the listener is consuming: bound, and the
	// resync round done.
	Ready func()
	// Seen, when set, is called after each message taken from the queue, with what came
	// of it.
	Seen func(Seen)
}

// Seen is what the listener made of one message.
type Seen struct {
	EventType string // "" when the message is not an oslo.messaging notification
	Host      string // service.update's compute service host
	Down      bool   // disabled or forced down
	// Ignored says why the message was not acted on ("" when it was): another event
	// type, another service's binary, or what is malformed.
	Ignored string
	// Malformed: not an oslo.messaging notification, or a service.update without what
	// the decision needs (logged and skipped).
	Malformed bool
	// Err is the decision's failure (the listener then connects again and resyncs).
	Err error
}

// Listener is Blazar's notification monitor: it consumes Nova's versioned notifications
// from RabbitMQ and hands each service.update of a nova-compute service to the Monitor's
// decision (Observe): disabled or forced down takes its host out of service, enabled and
// not forced down puts it back.
//
// Climate binds a queue of its own to Nova's exchange, so Nova's default queue
// ("versioned_notifications.info") and whoever consumes it are left alone: oslo's
// notifications fan out to every queue bound with the routing key. The queue is
// exclusive and auto-deleted (named climate-nova-monitor-<random>): it lives as long as
// the listener's connection, so no backlog piles up on the broker when Climate is gone,
// and no stale backlog is replayed when it comes back (an old "disabled" replayed would
// heal reservations off a host that is fine by now). What happens while it is not
// connected is caught up instead by a resync round (Check: Nova's current state) each
// time it connects, after binding and before consuming, and by the poll when it runs too.
//
// Only the leader (Monitor.Leader) connects; it asks again every LeadEvery and
// disconnects when it no longer leads. A lost connection (the broker restarted, a
// network cut, heartbeats missed) or a failed decision is retried with backoff. Message
// bodies are never logged (oslo's carry the request context, tokens included), nor the
// URL's password.
type Listener struct {
	m        *Monitor
	cfg      ListenerConfig
	addr     string // the URL without its password
	password string
}

// NewListener checks cfg and returns m's listener; Run connects.
func NewListener(m *Monitor, cfg ListenerConfig) (*Listener, error) {
	if rest, ok := strings.CutPrefix(cfg.URL, "rabbit://"); ok {
		cfg.URL = "amqp://" + rest // oslo.messaging's transport_url, one host
	}
	if strings.Contains(cfg.URL, ",") {
		return nil, errors.New("amqp: one broker only (oslo's transport_url may list several, separated by commas: give one)")
	}
	addr, password, err := amqpurl.Check(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Exchange == "" {
		cfg.Exchange = DefaultNovaExchange
	}
	var topics []string
	for _, t := range cfg.Topics {
		if t = strings.TrimSpace(t); t != "" {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		topics = []string{DefaultNovaTopic}
	}
	cfg.Topics = topics
	for _, name := range append([]string{cfg.Exchange}, topics...) {
		if len(name)+len(".info") > 255 {
			return nil, errors.New("exchange and topic names are at most 250 bytes")
		}
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultListenBackoff
	}
	if cfg.MaxBackoff < cfg.Backoff {
		cfg.MaxBackoff = max(DefaultListenMax, cfg.Backoff)
	}
	if cfg.LeadEvery <= 0 {
		cfg.LeadEvery = DefaultLeadEvery
	}
	if cfg.TLS != nil {
		cfg.TLS = cfg.TLS.Clone()
	}
	return &Listener{m: m, cfg: cfg, addr: addr, password: password}, nil
}

// String describes the listener without secrets, for logs.
func (l *Listener) String() string {
	keys := make([]string, len(l.cfg.Topics))
	for i, t := range l.cfg.Topics {
		keys[i] = t + ".info"
	}
	return fmt.Sprintf("%s exchange %s, routing keys %s", l.addr, l.cfg.Exchange, strings.Join(keys, ","))
}

// errNotLeader ends a session whose replica no longer leads.
var errNotLeader = errors.New("no longer the monitor's leader")

// Run listens until ctx is done, connecting again with backoff after any failure.
func (l *Listener) Run(ctx context.Context) {
	log := l.m.Driver.cfg.Logger
	backoff := l.cfg.Backoff
	for ctx.Err() == nil {
		lead, err := l.m.lead(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("nova notifications: asking for the monitor's lead failed; asking again", "err", err, "in", l.cfg.LeadEvery)
		}
		if err != nil || !lead {
			if sleep(ctx, l.cfg.LeadEvery) != nil {
				return
			}
			continue
		}
		ready, err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errNotLeader) {
			log.Info("nova notifications: another replica leads the monitor; stopped listening", "broker", l.addr)
			continue
		}
		if ready {
			backoff = l.cfg.Backoff // it had worked: start again from the first wait
		}
		log.Warn("nova notifications: not listening; connecting again", "broker", l.addr, "err", l.scrub(err), "in", backoff)
		if sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, l.cfg.MaxBackoff)
	}
}

// scrub returns err's message without the URL's password.
func (l *Listener) scrub(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if l.password != "" {
		msg = strings.ReplaceAll(msg, l.password, "xxxxx")
	}
	return msg
}

// session connects, binds the queue, resyncs and consumes until the connection is lost,
// a decision fails, the lead is lost or ctx is done. ready says it got to consuming.
func (l *Listener) session(ctx context.Context) (ready bool, err error) {
	log := l.m.Driver.cfg.Logger
	props := amqp091.NewConnectionProperties()
	props.SetClientConnectionName("climate nova monitor")
	conn, err := amqp091.DialConfig(l.cfg.URL, amqp091.Config{
		Dial:            dialer(ctx),
		TLSClientConfig: l.cfg.TLS.Clone(),
		Properties:      props,
	})
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() }) // unblocks the library's calls
	defer stop()
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		return false, err
	}
	queue := "climate-nova-monitor-" + strings.ReplaceAll(climate.NewID(), "-", "")[:12]
	// Exclusive and auto-delete: see Listener.
	if _, err := ch.QueueDeclare(queue, false, true, true, false, nil); err != nil {
		return false, fmt.Errorf("declare queue %s: %w", queue, err)
	}
	for _, t := range l.cfg.Topics {
		if err := ch.QueueBind(queue, t+".info", l.cfg.Exchange, false, nil); err != nil {
			var e *amqp091.Error
			if errors.As(err, &e) && e.Code == amqp091.NotFound {
				// Nova declares its exchange when it starts; Climate does not, so as not to
				// declare it with flags other than Nova's (amqp_durable_queues).
				return false, fmt.Errorf("exchange %q is not on the broker (is Nova running on this broker and vhost, with this control_exchange?): %w", l.cfg.Exchange, err)
			}
			return false, fmt.Errorf("bind queue %s to exchange %s with %s.info: %w", queue, l.cfg.Exchange, t, err)
		}
	}
	if err := ch.Qos(32, 0, false); err != nil {
		return false, err
	}
	deliveries, err := ch.Consume(queue, "climate-nova-monitor", false, true, false, false, nil)
	if err != nil {
		return false, fmt.Errorf("consume from %s: %w", queue, err)
	}
	// Bound: from here on every change is in the queue. What changed before is in Nova's
	// state, which the resync round reads; the queue holds the rest until the round is done.
	if err := l.m.check(ctx, "resync"); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		log.Warn("nova notifications: the resync round with Nova's hypervisors failed; listening all the same", "err", Message(err))
	}
	log.Info("nova notifications: listening", "broker", l.addr, "exchange", l.cfg.Exchange, "topics", strings.Join(l.cfg.Topics, ","), "queue", queue)
	if l.cfg.Ready != nil {
		l.cfg.Ready()
	}
	lead := time.NewTicker(l.cfg.LeadEvery)
	defer lead.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case e := <-closed:
			if e == nil {
				return true, errors.New("the connection closed")
			}
			return true, fmt.Errorf("the connection closed: %w", e)
		case <-lead.C:
			if ok, err := l.m.lead(ctx); err != nil || !ok {
				if err != nil {
					return true, fmt.Errorf("asking for the monitor's lead: %w", err)
				}
				return true, errNotLeader
			}
		case d, ok := <-deliveries:
			if !ok {
				return true, errors.New("the broker ended the consumer")
			}
			seen := l.handle(ctx, d.Body)
			if l.cfg.Seen != nil {
				l.cfg.Seen(seen)
			}
			if seen.Err != nil {
				// Start again: the resync round after binding redoes what failed.
				return true, fmt.Errorf("acting on %s of %s: %w", seen.EventType, seen.Host, seen.Err)
			}
			if err := d.Ack(false); err != nil {
				return true, fmt.Errorf("ack: %w", err)
			}
		}
	}
}

// dialer bounds the connection and the AMQP handshake (ctx's end closes a connection
// once it is open).
func dialer(ctx context.Context) func(network, addr string) (net.Conn, error) {
	return func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: 10 * time.Second}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// The handshake's deadline; the library clears it once the connection is open.
		if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}

// handle parses one message and, for a nova-compute service.update, applies it.
func (l *Listener) handle(ctx context.Context, body []byte) Seen {
	s := parseNotification(body)
	log := l.m.Driver.cfg.Logger
	switch {
	case s.Malformed:
		// Logged (never the body), skipped.
		log.Warn("nova notifications: ignoring a malformed message", "event_type", s.EventType, "problem", s.Ignored, "bytes", len(body))
		return s
	case s.Ignored != "":
		return s // another event, or another service's: not the monitor's
	}
	s.Err = l.m.Observe(ctx, s.Host, s.Down, "notification")
	if s.Err != nil && ctx.Err() == nil {
		log.Warn("nova notifications: acting on a compute service's change failed; connecting again to resync", "host", s.Host, "down", s.Down, "err", Message(s.Err))
	}
	return s
}

// parseNotification reads an oslo.messaging notification: the 2.0 envelope
// {"oslo.version": "2.0", "oslo.message": "<JSON>"} or the bare message (1.0), whose
// event_type and payload matter. For service.update the payload is Nova's
// ServiceStatusPayload: {"nova_object.name": "ServiceStatusPayload", "nova_object.data":
// {"host": …, "binary": "nova-compute", "disabled": …, "forced_down": …, …}}.
func parseNotification(body []byte) Seen {
	var envelope struct {
		Message *string `json:"oslo.message"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil {
		return Seen{Ignored: "not a JSON object", Malformed: true}
	}
	msg := body
	if envelope.Message != nil {
		msg = []byte(*envelope.Message)
	}
	var m struct {
		EventType *string         `json:"event_type"`
		Payload   json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return Seen{Ignored: "oslo.message is not a JSON object", Malformed: true}
	}
	if m.EventType == nil || *m.EventType == "" {
		return Seen{Ignored: "no event_type", Malformed: true}
	}
	s := Seen{EventType: *m.EventType}
	if s.EventType != ServiceUpdate {
		s.Ignored = "not " + ServiceUpdate
		return s
	}
	var p struct {
		Name *string `json:"nova_object.name"`
		Data *struct {
			Host       *string `json:"host"`
			Binary     *string `json:"binary"`
			Disabled   *bool   `json:"disabled"`
			ForcedDown *bool   `json:"forced_down"`
		} `json:"nova_object.data"`
	}
	switch err := json.Unmarshal(m.Payload, &p); {
	case len(m.Payload) == 0 || string(m.Payload) == "null":
		s.Ignored = "no payload"
	case err != nil:
		s.Ignored = "the payload is not a ServiceStatusPayload: " + err.Error()
	case p.Name != nil && *p.Name != "ServiceStatusPayload":
		s.Ignored = "the payload is a " + *p.Name + ", not a ServiceStatusPayload"
	case p.Data == nil:
		s.Ignored = "no nova_object.data (an unversioned notification?)"
	case p.Data.Host == nil || *p.Data.Host == "":
		s.Ignored = "no host"
	case p.Data.Disabled == nil || p.Data.ForcedDown == nil:
		s.Ignored = "no disabled or forced_down"
	}
	if s.Ignored != "" {
		s.Malformed = true
		return s
	}
	s.Host = *p.Data.Host
	s.Down = *p.Data.Disabled || *p.Data.ForcedDown
	if p.Data.Binary == nil || *p.Data.Binary != "nova-compute" {
		s.Ignored = "not a nova-compute service"
	}
	return s
}
