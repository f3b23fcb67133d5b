package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// eventsChannel is the NOTIFY channel of the events trigger; payloads name the schema.
const eventsChannel = "climate_events"

// Reconnection back-off of WatchEvents: doubles from the first to the last.
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 10 * time.Second
)

// WatchEvents calls wake whenever a transaction of any process commits an UNDONE event,
// or moves or hands back one, in this store's schema: the event engine's Wake, so an
// engine sleeps until its next event yet hears of earlier ones committed elsewhere. It
// holds one dedicated connection that LISTENs, reconnects after errors (backing off) and
// calls wake after each (re)connection, since notifications sent meanwhile are lost. It
// returns nil once ctx is done.
func (s *Store) WatchEvents(ctx context.Context, wake func()) error {
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
func (s *Store) listen(ctx context.Context, wake func()) bool {
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
	wake()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		if n.Payload == s.schema {
			wake()
		}
	}
}
