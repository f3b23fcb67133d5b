package notify

import (
	"context"
	"log/slog"
	"time"

	"climate"
)

// Config tunes a Worker.
type Config struct {
	// Destinations returns the destinations to serve; it is called every round, so
	// destinations added at run time (webhooks) are picked up.
	Destinations func(ctx context.Context) ([]Destination, error)
	// Lead, when set, reports whether this process may deliver now (on PostgreSQL, a
	// leader row held by one replica at a time); nil means this is the only deliverer.
	Lead func(ctx context.Context) (bool, error)
	// MaxSleep bounds a sleep without a wake-up: needed when other processes commit
	// notifications and cannot wake this one, and to renew Lead. Default 30 s.
	MaxSleep time.Duration
	// Backoff is the first retry delay after a failed delivery; it doubles per attempt up
	// to MaxBackoff. Defaults 1 s and 1 h.
	Backoff, MaxBackoff time.Duration
	// GiveUpAfter is how long after a notification's creation a destination stops
	// retrying it and moves on. Default 24 h.
	GiveUpAfter time.Duration
	// Observe, when set, is told of every delivery attempt.
	Observe func(Attempt)
	Logger  *slog.Logger
}

// Attempt describes one delivery attempt, for logs, tests and benchmarks.
type Attempt struct {
	Destination  string
	Notification climate.Notification
	At           time.Time
	Err          error
	GaveUp       bool
}

// Worker sends the outbox to the destinations.
type Worker struct {
	store climate.Store
	clock climate.Clock
	cfg   Config
	wake  chan struct{}
}

// batch is how many notifications one round reads per destination.
const batch = 100

// NewWorker returns a worker; call Run to start it.
func NewWorker(store climate.Store, clock climate.Clock, cfg Config) *Worker {
	if cfg.MaxSleep <= 0 {
		cfg.MaxSleep = 30 * time.Second
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Hour
	}
	if cfg.GiveUpAfter <= 0 {
		cfg.GiveUpAfter = 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Worker{store: store, clock: clock, cfg: cfg, wake: make(chan struct{}, 1)}
}

// Wake makes the worker look at the outbox now (after a commit that wrote to it). It
// never blocks.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx is done.
func (w *Worker) Run(ctx context.Context) error {
	for {
		next := w.cfg.MaxSleep
		if d, err := w.Round(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			w.cfg.Logger.Error("notification delivery: store error, retrying", "err", err, "in", time.Second)
			next = time.Second
		} else if d >= 0 && d < next {
			next = d
		}
		t := w.clock.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-w.wake:
		case <-t.C():
		}
		t.Stop()
	}
}

// Round serves every destination once, delivering whatever is due, and returns how long
// until a destination is due for a retry (-1: none waits). Run calls it on every wake-up.
func (w *Worker) Round(ctx context.Context) (time.Duration, error) {
	if w.cfg.Lead != nil {
		if lead, err := w.cfg.Lead(ctx); err != nil || !lead {
			return -1, err
		}
	}
	dests, err := w.cfg.Destinations(ctx)
	if err != nil {
		return -1, err
	}
	wait := time.Duration(-1)
	for _, d := range dests {
		retryAt, err := w.serve(ctx, d)
		if err != nil {
			return -1, err
		}
		if !retryAt.IsZero() {
			if d := max(retryAt.Sub(w.clock.Now()), 0); wait < 0 || d < wait {
				wait = d
			}
		}
	}
	return wait, nil
}

// serve delivers what d has not had yet, in order, until it is caught up or a delivery
// fails; it returns when d is to be retried (zero when it is caught up).
func (w *Worker) serve(ctx context.Context, d Destination) (time.Time, error) {
	for {
		var cur climate.DeliveryCursor
		var pending []climate.Notification
		err := w.store.View(ctx, func(tx climate.Tx) error {
			var ok bool
			var err error
			if cur, ok, err = tx.DeliveryCursor(ctx, d.Name()); err != nil || !ok {
				cur = climate.DeliveryCursor{Destination: d.Name()} // new: from the oldest kept
			}
			if err == nil {
				pending, err = tx.Notifications(ctx, cur.Position, batch)
			}
			return err
		})
		if err != nil || len(pending) == 0 {
			return time.Time{}, err
		}
		if now := w.clock.Now(); cur.NextAttempt.After(now) {
			return cur.NextAttempt, nil
		}
		skipped := cur.Position
		for i := range pending {
			n := &pending[i]
			if !d.Accepts(n) {
				skipped = n.Seq
				continue
			}
			if skipped != cur.Position { // record what was skipped before delivering
				cur.Position = skipped
				if err := w.save(ctx, &cur); err != nil {
					return time.Time{}, err
				}
			}
			retryAt, err := w.deliver(ctx, d, n, &cur)
			if err != nil || !retryAt.IsZero() {
				return retryAt, err
			}
			skipped = cur.Position
		}
		if skipped != cur.Position {
			cur.Position = skipped
			if err := w.save(ctx, &cur); err != nil {
				return time.Time{}, err
			}
		}
		if len(pending) < batch {
			return time.Time{}, nil
		}
	}
}

// deliver makes one attempt at n and records its outcome in cur; it returns when to retry
// (zero when n is done with: delivered, or given up on).
func (w *Worker) deliver(ctx context.Context, d Destination, n *climate.Notification, cur *climate.DeliveryCursor) (time.Time, error) {
	err := d.Deliver(ctx, n)
	now := w.clock.Now()
	a := Attempt{Destination: d.Name(), Notification: *n, At: now, Err: err}
	var retryAt time.Time
	switch {
	case err == nil:
		cur.Position, cur.Attempts, cur.NextAttempt, cur.LastError = n.Seq, 0, time.Time{}, ""
	case now.Sub(n.CreatedAt) >= w.cfg.GiveUpAfter:
		a.GaveUp = true
		w.cfg.Logger.Error("notification not delivered: giving up", "destination", d.Name(), "notification", n.ID,
			"event_type", n.EventType, "lease", n.LeaseID, "attempts", cur.Attempts+1, "err", err)
		cur.Position, cur.Attempts, cur.NextAttempt, cur.LastError = n.Seq, 0, time.Time{}, err.Error()
	default:
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err() // shutting down: not the destination's failure
		}
		cur.Attempts++
		cur.LastError = err.Error()
		retryAt = now.Add(w.backoff(cur.Attempts))
		cur.NextAttempt = retryAt
		w.cfg.Logger.Warn("notification delivery failed; retrying", "destination", d.Name(), "notification", n.ID,
			"attempts", cur.Attempts, "retry_at", retryAt, "err", err)
	}
	if w.cfg.Observe != nil {
		w.cfg.Observe(a)
	}
	return retryAt, w.save(ctx, cur)
}

// backoff is the delay before attempt number attempts+1: Backoff doubled per failure.
func (w *Worker) backoff(attempts int) time.Duration {
	d := w.cfg.Backoff
	for i := 1; i < attempts && d < w.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, w.cfg.MaxBackoff)
}

func (w *Worker) save(ctx context.Context, cur *climate.DeliveryCursor) error {
	cur.UpdatedAt = w.clock.Now().UTC().Truncate(time.Microsecond)
	return w.store.Update(ctx, func(tx climate.Tx) error { return tx.SaveDeliveryCursor(ctx, cur) })
}

// Log is the destination that writes one structured line per notification: the default
// when nothing else is configured.
type Log struct{ Logger *slog.Logger }

// Name implements Destination.
func (Log) Name() string { return "log" }

// Accepts implements Destination: the log takes everything.
func (Log) Accepts(*climate.Notification) bool { return true }

// Deliver implements Destination.
func (l Log) Deliver(_ context.Context, n *climate.Notification) error {
	attrs := []any{"event_type", n.EventType, "lease", n.LeaseID, "project", n.ProjectID, "id", n.ID, "seq", n.Seq}
	if n.Error != "" {
		attrs = append(attrs, "error", n.Error)
		l.Logger.Warn("notification", attrs...)
		return nil
	}
	l.Logger.Info("notification", attrs...)
	return nil
}
