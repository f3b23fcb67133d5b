package main

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"climate"
	"climate/notify"
	"climate/notify/amqp"
	"climate/notify/webhook"
	"climate/postgres"
)

// notifyOptions configure where notifications go besides the log.
type notifyOptions struct {
	amqp    amqp.Config
	webhook struct {
		allowPrivate bool
		timeout      time.Duration
	}
}

func addNotifyFlags(f *pflag.FlagSet, o *notifyOptions) {
	f.StringVar(&o.amqp.URL, "amqp-url", "", "send notifications to RabbitMQ in oslo.messaging's format: amqp://USER:PASSWORD@HOST:5672/VHOST (prefer CLIMATE_AMQP_URL: a flag's value shows in ps)")
	f.StringVar(&o.amqp.Exchange, "amqp-exchange", "openstack", "topic exchange for notifications (oslo's control_exchange)")
	f.StringVar(&o.amqp.Topic, "amqp-topic", "notifications", "notification topic: messages go with routing key TOPIC.info")
	f.StringVar(&o.amqp.PublisherID, "amqp-publisher-id", "blazar.lease", "publisher_id of the notifications")
	f.BoolVar(&o.amqp.Durable, "amqp-durable", false, "declare the exchange and queue durable when they do not exist (oslo's amqp_durable_queues)")
	f.BoolVar(&o.webhook.allowPrivate, "webhook-allow-private", false, "let webhooks reach loopback, private and link-local addresses (by default only public ones: tenants choose webhook URLs)")
	f.DurationVar(&o.webhook.timeout, "webhook-timeout", webhook.DefaultTimeout, "how long one webhook delivery attempt may take (connect, send, answer)")
}

// webhookSender returns the sender of webhook deliveries and creation pings.
func (o *notifyOptions) webhookSender(clk climate.Clock) *webhook.Sender {
	return webhook.NewSender(webhook.Guard{AllowPrivate: o.webhook.allowPrivate}, clk, o.webhook.timeout)
}

// destinations returns the configured destinations besides the log, and a function that
// closes them once delivery has stopped.
func (o *notifyOptions) destinations(log *slog.Logger) ([]notify.Destination, func(), error) {
	var out []notify.Destination
	closers := []func(){}
	if o.amqp.URL != "" {
		d, err := amqp.New(o.amqp)
		if err != nil {
			return nil, nil, err
		}
		log.Info("notifications to AMQP", "broker", d.String(), "exchange", o.amqp.Exchange, "routing_key", o.amqp.Topic+".info")
		out = append(out, d)
		closers = append(closers, func() { _ = d.Close() })
	}
	return out, func() {
		for _, c := range closers {
			c()
		}
	}, nil
}

// Notification delivery on PostgreSQL: one replica at a time delivers, holding the
// "deliver" leader row. A round runs at least every deliverMaxSleep and renews the row
// once a third of deliverLeadTTL has passed (postgres.Lead), so it is renewed within
// deliverLeadTTL/3 + deliverMaxSleep, well before it expires.
const (
	deliverLeadTTL  = 10 * time.Second
	deliverMaxSleep = 3 * time.Second
)

// newDeliverer returns the worker that sends the outbox to the destinations: the log,
// whatever else is configured, and the enabled webhooks, read from the store on every
// round. pg is nil on SQLite, where the one engine process delivers.
func newDeliverer(st climate.Store, pg *postgres.Store, clk climate.Clock, log *slog.Logger, role string, dests []notify.Destination, hooks *webhook.Sender, observe func(notify.Attempt)) *notify.Worker {
	webhooks := hooks.Destinations(st, notify.DefaultGiveUpAfter)
	cfg := notify.Config{
		Destinations: func(ctx context.Context) ([]notify.Destination, error) {
			w, err := webhooks(ctx)
			return append(slices.Clip(dests), w...), err
		},
		MaxSleep: engineMaxSleep(role), // 0 (no bound) unless another process commits
		Observe:  observe,
		Logger:   log,
	}
	if pg != nil {
		// Asked on every wake-up: renewed (written) only every third of the ttl.
		cfg.Lead = pg.NewLead("deliver", climate.NewID(), deliverLeadTTL).Try
		cfg.MaxSleep = deliverMaxSleep
	}
	return notify.NewWorker(st, clk, cfg)
}
