package notify

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
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
	// MinRound is the least time from the start of one round to the next after a
	// wake-up: under load one round then serves what several commits wrote (the outbox
	// read, the lead renewed and the webhooks listed once for them all), while an idle
	// worker still answers a wake-up at once. Default 50 ms (at 250 creations/s on
	// PostgreSQL, 10 ms made 0.55 more transactions a creation); negative: none.
	MinRound time.Duration
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
	// Number counts the attempts at this notification, this one included.
	Number int
	// Started and At are when the attempt began and ended.
	Started, At time.Time
	Err         error
	// RetryAt is when the next attempt is due after a failure (zero otherwise).
	RetryAt time.Time
	GaveUp  bool
}

// Recorder is implemented by destinations that keep their own record of attempts (a
// webhook's deliveries): Record runs in the transaction that moves the destination's
// cursor, so the two agree.
type Recorder interface {
	Record(ctx context.Context, tx climate.Tx, a Attempt) error
}

// Worker sends the outbox to the destinations.
type Worker struct {
	store climate.Store
	clock climate.Clock
	cfg   Config
	wake  chan struct{}

	mu     sync.Mutex
	replay map[string]*replayState // by Replayable destination
}

// replayState is how far a Replayable destination has been delivered beyond its saved
// cursor. Its cursor is saved once replaySaveEvery has passed since the last save, or
// once a batch is owed, rather than every round: at low load a round is one lease
// creation, and the save a write transaction (on PostgreSQL a commit of its own).
type replayState struct {
	cur     climate.DeliveryCursor // delivered up to cur.Position
	owed    int                    // deliveries since the last save
	savedAt time.Time
}

// replaySaveEvery bounds how long a Replayable destination's delivered position stays
// unsaved.
const replaySaveEvery = time.Second

// DefaultGiveUpAfter is how long a destination retries a notification by default.
const DefaultGiveUpAfter = 24 * time.Hour

// batch is how many notifications one round reads per destination.
const batch = 100

// NewWorker returns a worker; call Run to start it.
func NewWorker(store climate.Store, clock climate.Clock, cfg Config) *Worker {
	if cfg.MaxSleep <= 0 {
		cfg.MaxSleep = 30 * time.Second
	}
	if cfg.MinRound == 0 {
		cfg.MinRound = 50 * time.Millisecond
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Hour
	}
	if cfg.GiveUpAfter <= 0 {
		cfg.GiveUpAfter = DefaultGiveUpAfter
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

// Run delivers until ctx is done. Each destination is served by a goroutine of its own, so
// a slow or failing one (a webhook waiting out its timeout) never delays the others; Run
// itself re-reads the destinations on every wake-up (and every MaxSleep), starts and stops
// their goroutines, and passes the wake-up on.
func (w *Worker) Run(ctx context.Context) error {
	loops := map[string]*destLoop{}
	var wg sync.WaitGroup
	defer func() {
		for _, l := range loops {
			l.stop()
		}
		wg.Wait()
	}()
	for {
		started := time.Now() // real time: MinRound spaces out work, not scheduled events
		next := w.cfg.MaxSleep
		dests, err := w.current(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			w.cfg.Logger.Error("notification delivery: store error, retrying", "err", err, "in", time.Second)
			next = time.Second
		} else {
			seen := make(map[string]bool, len(dests))
			for _, d := range dests {
				seen[d.Name()] = true
				l := loops[d.Name()]
				if l == nil {
					l = newDestLoop(ctx)
					l.dest.Store(&d) // before the goroutine reads it
					loops[d.Name()] = l
					wg.Add(1)
					go func() { defer wg.Done(); w.loop(l) }()
				}
				l.dest.Store(&d)
				l.poke()
			}
			for name, l := range loops {
				if !seen[name] { // deleted, disabled, or this replica lost the lead
					l.stop()
					delete(loops, name)
				}
			}
		}
		t := w.clock.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-w.wake:
			if !sleep(ctx, w.cfg.MinRound-time.Since(started)) {
				t.Stop()
				return nil
			}
		case <-t.C():
		}
		t.Stop()
	}
}

// sleep waits d (nothing if d <= 0) and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// destLoop is the goroutine serving one destination.
type destLoop struct {
	ctx  context.Context
	stop context.CancelFunc
	dest atomic.Pointer[Destination] // its latest version (a webhook's URL may change)
	wake chan struct{}
}

func newDestLoop(parent context.Context) *destLoop {
	ctx, cancel := context.WithCancel(parent)
	return &destLoop{ctx: ctx, stop: cancel, wake: make(chan struct{}, 1)}
}

func (l *destLoop) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// loop serves l's destination whenever poked, and when a retry falls due.
func (w *Worker) loop(l *destLoop) {
	for {
		var timer <-chan time.Time
		retryAt, err := w.serve(l.ctx, *l.dest.Load())
		switch {
		case l.ctx.Err() != nil:
			return
		case err != nil:
			w.cfg.Logger.Error("notification delivery: store error, retrying", "destination", (*l.dest.Load()).Name(), "err", err, "in", time.Second)
			retryAt = w.clock.Now().Add(time.Second)
		}
		var t climate.Timer
		if !retryAt.IsZero() {
			t = w.clock.NewTimer(max(retryAt.Sub(w.clock.Now()), 0))
			timer = t.C()
		}
		select {
		case <-l.ctx.Done():
		case <-l.wake:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		if l.ctx.Err() != nil {
			return
		}
	}
}

// current returns the destinations to serve now: none while another replica leads.
func (w *Worker) current(ctx context.Context) ([]Destination, error) {
	if w.cfg.Lead != nil {
		if lead, err := w.cfg.Lead(ctx); err != nil || !lead {
			return nil, err
		}
	}
	return w.cfg.Destinations(ctx)
}

// Round serves every destination once, concurrently, delivering whatever is due, and
// returns how long until a destination is due for a retry (-1: none waits). Tests drive
// the worker with it; Run serves each destination on its own schedule instead.
func (w *Worker) Round(ctx context.Context) (time.Duration, error) {
	dests, err := w.current(ctx)
	if err != nil {
		return -1, err
	}
	retries := make([]time.Time, len(dests))
	errs := make([]error, len(dests))
	var wg sync.WaitGroup
	for i, d := range dests {
		wg.Go(func() { retries[i], errs[i] = w.serve(ctx, d) })
	}
	wg.Wait()
	wait := time.Duration(-1)
	for _, retryAt := range retries {
		if !retryAt.IsZero() {
			if d := max(retryAt.Sub(w.clock.Now()), 0); wait < 0 || d < wait {
				wait = d
			}
		}
	}
	return wait, errors.Join(errs...)
}

// serve delivers what d has not had yet, in order, until it is caught up or a delivery
// fails; it returns when d is to be retried (zero when it is caught up).
func (w *Worker) serve(ctx context.Context, d Destination) (time.Time, error) {
	_, replayable := d.(Replayable)
	for {
		var cur climate.DeliveryCursor
		var pending []climate.Notification
		err := w.store.View(ctx, func(tx climate.Tx) error {
			var ok bool
			var err error
			if cur, ok, err = tx.DeliveryCursor(ctx, d.Name()); err != nil || !ok {
				cur = climate.DeliveryCursor{Destination: d.Name()} // new: from the oldest kept
			}
			if replayable {
				w.replayedAhead(&cur)
			}
			if err == nil {
				pending, err = tx.Notifications(ctx, cur.Position, batch)
			}
			return err
		})
		if err != nil {
			return time.Time{}, err
		}
		if len(pending) == 0 {
			if replayable {
				return w.settleReplayed(ctx, cur, 0)
			}
			return time.Time{}, nil
		}
		if now := w.clock.Now(); cur.NextAttempt.After(now) {
			return cur.NextAttempt, nil
		}
		saved := cur.Position // what the store holds
		for i := range pending {
			n := &pending[i]
			if !d.Accepts(n) {
				cur.Position = n.Seq
				continue
			}
			if cur.Position != saved && !replayable { // record what was skipped before delivering
				if err := w.save(ctx, &cur); err != nil {
					return time.Time{}, err
				}
				saved = cur.Position
			}
			retryAt, gaveUp, err := w.deliver(ctx, d, n, &cur, !replayable)
			if err != nil || !retryAt.IsZero() {
				return retryAt, err
			}
			if gaveUp {
				// Giving up may have disabled the destination (a webhook): let Run
				// re-read the destinations before this one goes on.
				w.Wake()
				return time.Time{}, nil
			}
			if !replayable {
				saved = cur.Position
			}
		}
		if replayable {
			retryAt, err := w.settleReplayed(ctx, cur, len(pending))
			if err != nil || len(pending) < batch {
				return retryAt, err
			}
			continue
		}
		if cur.Position != saved {
			if err := w.save(ctx, &cur); err != nil {
				return time.Time{}, err
			}
		}
		if len(pending) < batch {
			return time.Time{}, nil
		}
	}
}

// replayedAhead moves cur, a Replayable destination's saved cursor, to where this worker
// has delivered it since, when that is further.
func (w *Worker) replayedAhead(cur *climate.DeliveryCursor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st := w.replay[cur.Destination]; st != nil && st.cur.Position > cur.Position {
		*cur = st.cur
	}
}

// settleReplayed records that a Replayable destination was delivered n more
// notifications, up to cur, and saves its cursor when that is due (replayState); it
// returns when an unsaved cursor falls due (zero when none is owed).
func (w *Worker) settleReplayed(ctx context.Context, cur climate.DeliveryCursor, n int) (time.Time, error) {
	w.mu.Lock()
	if w.replay == nil {
		w.replay = map[string]*replayState{}
	}
	st := w.replay[cur.Destination]
	if st == nil {
		st = &replayState{}
		w.replay[cur.Destination] = st
	}
	if n > 0 {
		st.cur = cur
		st.owed += n
	}
	now, owed, due := w.clock.Now(), st.owed, st.savedAt.Add(replaySaveEvery)
	save := st.cur
	w.mu.Unlock()
	if owed == 0 {
		return time.Time{}, nil
	}
	if owed < batch && now.Before(due) {
		return due, nil
	}
	if err := w.save(ctx, &save); err != nil {
		return time.Time{}, err
	}
	w.mu.Lock()
	st.owed -= owed // what was delivered meanwhile stays owed
	st.savedAt = now
	w.mu.Unlock()
	return time.Time{}, nil
}

// deliver makes one attempt at n and records its outcome in cur (and, for a Recorder, in
// the same transaction); it returns when to retry (zero when n is done with: delivered, or
// given up on, which gaveUp reports). Without save, a delivery that succeeded is left for
// the caller to save with the next ones.
func (w *Worker) deliver(ctx context.Context, d Destination, n *climate.Notification, cur *climate.DeliveryCursor, save bool) (retryAt time.Time, gaveUp bool, err error) {
	started := w.clock.Now()
	derr := d.Deliver(ctx, n)
	now := w.clock.Now()
	a := Attempt{Destination: d.Name(), Notification: *n, Number: cur.Attempts + 1, Started: started, At: now, Err: derr}
	switch {
	case derr == nil:
		cur.Position, cur.Attempts, cur.NextAttempt, cur.LastError = n.Seq, 0, time.Time{}, ""
	case now.Sub(n.CreatedAt) >= w.cfg.GiveUpAfter:
		a.GaveUp = true
		w.cfg.Logger.Error("notification not delivered: giving up", "destination", d.Name(), "notification", n.ID,
			"event_type", n.EventType, "lease", n.LeaseID, "attempts", a.Number, "err", derr)
		cur.Position, cur.Attempts, cur.NextAttempt, cur.LastError = n.Seq, 0, time.Time{}, derr.Error()
	default:
		if ctx.Err() != nil {
			return time.Time{}, false, ctx.Err() // shutting down: not the destination's failure
		}
		cur.Attempts++
		cur.LastError = derr.Error()
		retryAt = now.Add(w.backoff(cur.Attempts))
		a.RetryAt = retryAt
		cur.NextAttempt = retryAt
		w.cfg.Logger.Warn("notification delivery failed; retrying", "destination", d.Name(), "notification", n.ID,
			"attempts", cur.Attempts, "retry_at", retryAt, "err", derr)
	}
	cur.UpdatedAt = now.UTC().Truncate(time.Microsecond)
	if derr == nil && !save {
		if w.cfg.Observe != nil {
			w.cfg.Observe(a)
		}
		return time.Time{}, false, nil
	}
	rec, _ := d.(Recorder)
	err = w.store.Update(ctx, func(tx climate.Tx) error {
		if err := tx.SaveDeliveryCursor(ctx, cur); err != nil || rec == nil {
			return err
		}
		return rec.Record(ctx, tx, a)
	})
	if err == nil && w.cfg.Observe != nil {
		w.cfg.Observe(a)
	}
	return retryAt, a.GaveUp, err
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

// Replayable implements Replayable: a line logged again after a crash costs nothing.
func (Log) Replayable() {}

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
