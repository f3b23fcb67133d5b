package main

import (
	"context"
	"log/slog"
	"time"

	"climate"
	"climate/notify"
	"climate/postgres"
)

// Notification delivery on PostgreSQL: one replica at a time delivers, holding the
// "deliver" leader row, renewed at least every deliverMaxSleep.
const (
	deliverLeadTTL  = 10 * time.Second
	deliverMaxSleep = 3 * time.Second
)

// newDeliverer returns the worker that sends the outbox to the destinations: the log, and
// whatever else is configured. pg is nil on SQLite, where the one engine process delivers.
func newDeliverer(st climate.Store, pg *postgres.Store, clk climate.Clock, log *slog.Logger, role string, dests []notify.Destination) *notify.Worker {
	cfg := notify.Config{
		Destinations: func(context.Context) ([]notify.Destination, error) { return dests, nil },
		MaxSleep:     engineMaxSleep(role), // 0 (no bound) unless another process commits
		Logger:       log,
	}
	if pg != nil {
		holder := climate.NewID()
		cfg.Lead = func(ctx context.Context) (bool, error) { return pg.TryLead(ctx, "deliver", holder, deliverLeadTTL) }
		cfg.MaxSleep = deliverMaxSleep
	}
	return notify.NewWorker(st, clk, cfg)
}
