package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"climate"
	"climate/notify/stream"
	"climate/postgres"
)

// The event stream's hub re-reads the outbox at least this often while clients watch:
// on SQLite, other processes sharing the database (a --role engine or --role api
// process) commit notifications it is not told of; on PostgreSQL, LISTEN/NOTIFY tells it,
// and the re-read only covers a notification lost while the listener reconnects.
const (
	hubMaxSleep         = time.Second
	hubPostgresMaxSleep = 5 * time.Second
)

// newHub returns the hub that serves GET /v1/events/stream, to be woken after this
// process's commits that wrote notifications, then run with runHub. maxSleep, when not
// 0, replaces the default periodic re-read.
func newHub(st climate.Store, onPostgres bool, maxSleep time.Duration, log *slog.Logger, pol climate.Policy) *stream.Hub {
	cfg := stream.Config{MaxSleep: hubMaxSleep, Logger: log, Policy: pol}
	if onPostgres {
		cfg.MaxSleep = hubPostgresMaxSleep
	}
	if maxSleep > 0 {
		cfg.MaxSleep = maxSleep
	}
	return stream.New(st, cfg)
}

// runHub runs hub until ctx is done. On PostgreSQL, other replicas' commits wake it:
// through the engine's LISTEN when an engine runs here (its wake-up calls notified),
// else through one of its own.
func runHub(ctx context.Context, wg *sync.WaitGroup, hub *stream.Hub, pg *postgres.Store, engineListens bool) {
	wg.Add(1)
	go func() { defer wg.Done(); _ = hub.Run(ctx) }()
	if pg != nil && !engineListens {
		wg.Add(1)
		go func() { defer wg.Done(); _ = pg.WatchEvents(ctx, func(postgres.Change) { hub.Wake() }) }()
	}
}
