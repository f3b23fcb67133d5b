package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// eventsChannel is the NOTIFY channel of the events' and the outbox's triggers; a payload
// is "<due, µs since the epoch>:<schema>" for an event, "outbox:<schema>" for the outbox
// (migration 0023).
const eventsChannel = "climate_events"

// Change is what a notification on the events' channel says was committed.
type Change struct {
	// Due is when an UNDONE event inserted, moved or handed back is due; zero when not
	// known (after a reconnection, notifications may have been missed).
	Due time.Time
	// Outbox: a notification was written to the outbox, and no event.
	Outbox bool
}

// Reconnection back-off of WatchEvents: doubles from the first to the last.
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 10 * time.Second
)

// WatchEvents calls wake whenever a transaction of any process commits an UNDONE event,
// or moves or hands back one, in this store's schema, with the time the event is due (for
// the event engine's WakeFor, so an engine sleeps until its next event yet hears of
// earlier ones committed elsewhere), and whenever one writes to the outbox (for the
// delivery workers). Commits through this Store's own connections are passed over: the
// code that committed them wakes what it changed (the manager's EventsChanged and
// Notified, the engine's own loop). It holds one dedicated connection that LISTENs,
// reconnects after errors (backing off) and calls wake with the zero Change after each
// (re)connection, since notifications sent meanwhile are lost. It returns nil once ctx
// is done.
func (s *Store) WatchEvents(ctx context.Context, wake func(Change)) error {
	backoff := watchBackoffMin
	for {
		listening := s.listen(ctx, wake)
		if ctx.Err() != nil {
			return nil
		}
		if listening {
			backoff = watchBackoffMin // it worked for a while: retry at once-ish
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, watchBackoffMax)
	}
}

// listen runs one LISTEN session until it fails or ctx is done. It reports whether the
// session got as far as listening.
func (s *Store) listen(ctx context.Context, wake func(Change)) bool {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return false
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		return false
	}
	wake(Change{})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		what, schema, ok := strings.Cut(n.Payload, ":")
		if !ok || schema != s.schema {
			continue
		}
		if _, mine := s.own.Load(n.PID); mine {
			continue // committed through this store: its callers were woken then
		}
		if what == "outbox" {
			wake(Change{Outbox: true})
		} else if due, err := strconv.ParseInt(what, 10, 64); err == nil {
			wake(Change{Due: time.UnixMicro(due).UTC()})
		} else {
			wake(Change{})
		}
	}
}
