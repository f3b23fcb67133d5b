// Package engine fires lease events on time. It sleeps until the earliest due event (no
// polling), wakes early when a commit adds an earlier one, claims due events atomically
// through the store, and runs each in order: a lease's start before its other events,
// and within one instant end_lease before start_lease so a host can be handed from one
// lease to the next.
//
// Delivery is at least once. Each run of an engine has an instance id and claims events in
// its name for ClaimTTL, renewing its claims every ClaimTTL/3 while it handles them, so
// the claims of a process that died lapse within ClaimTTL and another engine takes them
// over; an engine told it is the only one (Sole) hands back every claim when it starts,
// since their holder is dead. Handlers are therefore idempotent: each re-reads the lease
// and does nothing unless its event is still IN_PROGRESS in this run's name.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"climate"
	"climate/notify"
	"climate/usage"
)

// Actions are the side effects of lease events on real infrastructure (a driver). Nil
// means standalone: statuses change, nothing else happens.
type Actions interface {
	OnStart(ctx context.Context, l *climate.Lease) error
	OnEnd(ctx context.Context, l *climate.Lease) error
	BeforeEnd(ctx context.Context, l *climate.Lease) error
}

// Report describes one handled event, for logs, metrics and tests.
type Report struct {
	Event   climate.Event
	Handled time.Time // when the handler started
	Status  climate.LeaseStatus
	Err     error
}

// DefaultClaimTTL is how long a claim lasts unless renewed: short, so a dead replica's
// events are taken over within seconds, and three renewal periods long, so a live engine
// keeps its claims through a slow write or two.
const DefaultClaimTTL = 3 * time.Second

// Config tunes the engine.
type Config struct {
	// ClaimTTL is how long a claim lasts, unless renewed, before another run may take the
	// event over (default DefaultClaimTTL). It must exceed the clock skew between replicas.
	ClaimTTL time.Duration
	// Sole says no other engine runs on the store (the caller holds a lock that ensures
	// it): claims held by anyone else are a dead run's, handed back when Run starts.
	Sole bool
	// BatchSize bounds how many events one claim takes.
	BatchSize int
	Actions   Actions
	// Notified, when set, is called after an event's outcome (and its notification, written
	// in the same transaction) is committed, so the delivery worker sends it at once.
	Notified func()
	// Observe, when set, is called after each handled event.
	Observe func(Report)
	// Claimed, when set, is told of each claim of due events: how many were claimed, and
	// how many of those (or of the claims a Sole engine hands back when it starts) were
	// another run's claims taken over.
	Claimed func(claimed, takenOver int)
	// MaxSleep, when positive, bounds how long the engine sleeps without re-reading the
	// next event time: needed when other processes commit events and cannot wake it.
	MaxSleep time.Duration
	// PreemptionNotice is the manager's (manager.Config): a preempt_lease event's
	// lease.preempted lists the hosts taken back within it.
	PreemptionNotice time.Duration
	Logger           *slog.Logger
}

// Engine runs due events.
type Engine struct {
	store    climate.Store
	clock    climate.Clock
	cfg      Config
	wake     chan struct{}
	instance string // this run's name on its claims
	released bool   // Sole: the dead runs' claims were handed back
	running  atomic.Bool
	// While Run sleeps: until when (zero: until woken), so that WakeFor can let it sleep.
	sleepMu  sync.Mutex
	sleeping bool
	until    time.Time
}

// New returns an engine; call Run to start it.
func New(store climate.Store, clock climate.Clock, cfg Config) *Engine {
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = DefaultClaimTTL
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Engine{store: store, clock: clock, cfg: cfg, wake: make(chan struct{}, 1), instance: climate.NewID()}
}

// Wake makes a sleeping engine look at events again (after a commit that added or moved
// events). It never blocks.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// WakeFor is Wake for a commit whose earliest new or moved event is due at t (zero: not
// known). An engine asleep until before t sleeps on: its timer comes first, and its next
// look at the store sees the event. Lease creations, whose events are mostly hours away,
// then cost the engine nothing.
func (e *Engine) WakeFor(t time.Time) {
	e.sleepMu.Lock()
	asleep := e.sleeping && !t.IsZero() && !e.until.IsZero() && !t.Before(e.until)
	e.sleepMu.Unlock()
	if !asleep {
		e.Wake()
	}
}

// errorBackoff is how long the engine waits after a store error before trying again.
const errorBackoff = time.Second

// Running reports whether Run is running (readiness).
func (e *Engine) Running() bool { return e.running.Load() }

// Run fires events until ctx is done.
func (e *Engine) Run(ctx context.Context) error {
	e.running.Store(true)
	defer e.running.Store(false)
	e.cfg.Logger.Info("event engine running", "instance", e.instance, "claim_ttl", e.cfg.ClaimTTL, "sole", e.cfg.Sole)
	for {
		wait, err := e.runDue(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			e.cfg.Logger.Error("event engine: store error, retrying", "err", err, "in", errorBackoff)
			wait = wakeAt{d: errorBackoff, ok: true}
		}
		if m := e.cfg.MaxSleep; m > 0 && (!wait.ok || wait.d > m) {
			wait = wakeAt{d: m, ok: true}
		}
		if !e.sleep(ctx, wait.d, wait.ok) {
			return nil
		}
	}
}

type wakeAt struct {
	d  time.Duration
	ok bool
}

// sleep waits for d (forever when !ok), a wake-up, or ctx; it reports false on ctx done.
func (e *Engine) sleep(ctx context.Context, d time.Duration, ok bool) bool {
	var timerC <-chan time.Time
	var until time.Time
	if ok {
		t := e.clock.NewTimer(d)
		defer t.Stop()
		timerC, until = t.C(), e.clock.Now().Add(d)
	}
	e.sleepMu.Lock()
	e.sleeping, e.until = true, until
	e.sleepMu.Unlock()
	defer func() {
		e.sleepMu.Lock()
		e.sleeping = false
		e.sleepMu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return false
	case <-e.wake:
	case <-timerC:
	}
	return true
}

// runDue claims and handles events until none is due, then says how long to sleep.
func (e *Engine) runDue(ctx context.Context) (wakeAt, error) {
	if e.cfg.Sole && !e.released {
		var n int
		err := e.store.Update(ctx, func(tx climate.Tx) (err error) {
			n, err = tx.ReleaseClaims(ctx)
			return err
		})
		if err != nil {
			return wakeAt{}, err
		}
		e.released = true
		e.countClaims(0, n)
		if n > 0 {
			e.cfg.Logger.Info("event engine: took back events a previous run held when it stopped", "events", n)
		}
	}
	for {
		now := e.clock.Now()
		var events []climate.Event
		err := e.store.Update(ctx, func(tx climate.Tx) error {
			var err error
			events, err = tx.ClaimDueEvents(ctx, e.instance, now, now.Add(e.cfg.ClaimTTL), e.cfg.BatchSize)
			return err
		})
		if err != nil {
			return wakeAt{}, err
		}
		if len(events) == 0 {
			break
		}
		taken := 0
		for _, ev := range events {
			if ev.TakenOver {
				taken++
			}
		}
		e.countClaims(len(events), taken)
		stop := e.keepClaims(ctx)
		for _, ev := range startsFirst(events) {
			e.handle(ctx, ev)
		}
		stop()
	}
	var next time.Time
	var ok bool
	err := e.store.View(ctx, func(tx climate.Tx) error {
		var err error
		next, ok, err = tx.NextEventTime(ctx)
		return err
	})
	if err != nil {
		return wakeAt{}, err
	}
	return wakeAt{d: next.Sub(e.clock.Now()), ok: ok}, nil
}

func (e *Engine) countClaims(n, takenOver int) {
	if e.cfg.Claimed != nil && (n > 0 || takenOver > 0) {
		e.cfg.Claimed(n, takenOver)
	}
}

// keepClaims renews this run's claims every ClaimTTL/3 until stop is called, so they
// outlast a slow action and lapse within ClaimTTL of the process dying. stop returns once
// no renewal is under way.
func (e *Engine) keepClaims(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	every := e.cfg.ClaimTTL / 3
	t := e.clock.NewTimer(every) // armed before the batch runs, so tests can wait for it
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			err := e.store.Update(ctx, func(tx climate.Tx) error {
				_, err := tx.RenewClaims(ctx, e.instance, e.clock.Now().Add(e.cfg.ClaimTTL))
				return err
			})
			if err != nil && ctx.Err() == nil {
				e.cfg.Logger.Warn("event engine: renewing claims failed; retrying", "err", err, "in", every)
			}
			t = e.clock.NewTimer(every)
		}
	}()
	return func() { cancel(); <-done }
}

// startsFirst reorders a claimed batch so that a lease's start_lease comes before that
// lease's other events (a before_end clamped to the start shares its instant), except its
// before_start_lease heads-up, which stays before it.
func startsFirst(events []climate.Event) []climate.Event {
	out := make([]climate.Event, 0, len(events))
	done := make([]bool, len(events))
	for i, ev := range events {
		if done[i] {
			continue
		}
		if ev.Type != climate.EventStartLease && ev.Type != climate.EventBeforeStartLease {
			for j := i + 1; j < len(events); j++ {
				if !done[j] && events[j].LeaseID == ev.LeaseID && events[j].Type == climate.EventStartLease {
					out = append(out, events[j])
					done[j] = true
				}
			}
		}
		out = append(out, ev)
		done[i] = true
	}
	return out
}

// errSkip means the event needs no work: its lease is gone or someone else finished it.
var errSkip = errors.New("event already handled")

// errLater means the event cannot run yet; its claim is left to expire so it is retried.
var errLater = errors.New("event must wait")

func (e *Engine) handle(ctx context.Context, ev climate.Event) {
	rep := Report{Event: ev, Handled: e.clock.Now()}
	var l *climate.Lease
	switch ev.Type {
	case climate.EventStartLease:
		l, rep.Err = e.transition(ctx, ev, climate.LeaseStarting, climate.ReservationActive, e.onStart)
	case climate.EventEndLease:
		l, rep.Err = e.transition(ctx, ev, climate.LeaseTerminating, climate.ReservationDeleted, e.onEnd)
	case climate.EventBeforeEndLease:
		l, rep.Err = e.transition(ctx, ev, "", "", e.beforeEnd)
	case climate.EventBeforeStartLease:
		l, rep.Err = e.transition(ctx, ev, "", "", noAction) // a heads-up: its notification is the point
	case climate.EventPreemptLease:
		l, rep.Err = e.transition(ctx, ev, "", "", noAction) // the notice is the point
	case climate.EventRetryDeadline:
		// A waiting lease that never fitted gives up (one that fitted lost this event).
		l, rep.Err = e.finish(ctx, ev, climate.ReservationDeleted, nil)
	default:
		l, rep.Err = e.finish(ctx, ev, "", fmt.Errorf("unknown event type %q", ev.Type))
	}
	if errors.Is(rep.Err, errSkip) {
		return
	}
	if errors.Is(rep.Err, errLater) {
		// Not a failure and nothing changed: the claim expires and the event runs again.
		e.cfg.Logger.Debug("event deferred", "event", ev.Type, "lease", ev.LeaseID, "reason", rep.Err)
		return
	}
	if errors.Is(rep.Err, context.Canceled) && ctx.Err() != nil {
		// The engine is stopping, not the event failing: its outcome was not written, so
		// its claim lapses and another engine (or the next run) handles it.
		e.cfg.Logger.Info("event interrupted: the engine is stopping", "event", ev.Type, "lease", ev.LeaseID, "err", rep.Err)
		return
	}
	if l != nil {
		rep.Status = l.Status
	}
	log := e.cfg.Logger.With("event", ev.Type, "lease", ev.LeaseID, "due", ev.Time, "late", rep.Handled.Sub(ev.Time))
	if rep.Err != nil {
		log.Error("event failed", "err", rep.Err, "status", rep.Status)
	} else {
		log.Info("event fired", "status", rep.Status)
	}
	if l != nil && e.cfg.Notified != nil {
		e.cfg.Notified()
	}
	if e.cfg.Observe != nil {
		e.cfg.Observe(rep)
	}
}

func noAction(context.Context, *climate.Lease) error { return nil }

func (e *Engine) onStart(ctx context.Context, l *climate.Lease) error {
	if e.cfg.Actions == nil {
		return nil
	}
	return e.cfg.Actions.OnStart(ctx, l)
}

func (e *Engine) onEnd(ctx context.Context, l *climate.Lease) error {
	if e.cfg.Actions == nil {
		return nil
	}
	return e.cfg.Actions.OnEnd(ctx, l)
}

func (e *Engine) beforeEnd(ctx context.Context, l *climate.Lease) error {
	if e.cfg.Actions == nil {
		return nil
	}
	return e.cfg.Actions.BeforeEnd(ctx, l)
}

// transition runs one lease event in three steps: write the transitional status (so it is
// visible while the action runs), run the action outside any transaction, then write the
// outcome. transitional is empty for events that leave the status alone.
func (e *Engine) transition(ctx context.Context, ev climate.Event, transitional climate.LeaseStatus, target climate.ReservationStatus, action func(context.Context, *climate.Lease) error) (*climate.Lease, error) {
	var l *climate.Lease
	var over bool
	err := e.store.Update(ctx, func(tx climate.Tx) error {
		var err error
		if l, err = e.claimed(ctx, tx, ev); err != nil {
			return err
		}
		if now := e.clock.Now().Truncate(time.Microsecond); ev.Type == climate.EventStartLease && windowOver(l, now) {
			over = true
			before := climate.LeaseAuditSummary(l)
			endUnstarted(l, now)
			if err := tx.UpdateLease(ctx, l); err != nil {
				return err
			}
			if _, err := usage.Sync(ctx, tx, l, usage.Updated, now); err != nil {
				return err
			}
			if err := climate.Audit(ctx, tx, climate.BySystem("its end passed before its start was handled: ended without starting"),
				climate.NotifyEvent(climate.EventEndLease), climate.LeaseAuditTarget(l), before, climate.LeaseAuditSummary(l), now); err != nil {
				return err
			}
			// The lease reached its end state; nothing started, so nothing else is told.
			return notify.Add(ctx, tx, climate.NotifyEvent(climate.EventEndLease), l, nil, now)
		}
		if ev.Type == climate.EventEndLease {
			if s := l.Event(climate.EventStartLease); s != nil && (s.Status == climate.EventUndone || s.Status == climate.EventInProgress) {
				// The start is still to run (claimed elsewhere); leave this claim to expire
				// and be retried rather than end a lease that has not started.
				return fmt.Errorf("%w: lease %s has not started yet", errLater, l.ID)
			}
		}
		if transitional == "" || l.Status == transitional {
			return nil // nothing to mark, or resuming after a crash
		}
		if !l.Status.CanTransition(transitional) {
			return fmt.Errorf("lease %s is %s and cannot become %s", l.ID, l.Status, transitional)
		}
		l.Status = transitional
		l.UpdatedAt = e.clock.Now().Truncate(time.Microsecond)
		return tx.UpdateLease(ctx, l) // a transitional status changes no usage
	})
	if err != nil {
		if errors.Is(err, errSkip) || errors.Is(err, errLater) {
			return nil, err
		}
		return e.finish(ctx, ev, target, err)
	}
	if over {
		e.cfg.Logger.Info("lease ended without starting: its end passed before its start was handled", "lease", l.ID, "end", l.End)
		return l, nil
	}
	return e.finish(ctx, ev, target, action(ctx, l))
}

// windowOver reports whether a lease whose start is being handled has already reached its
// end and nothing of its start has run: a restart or takeover came too late to start it.
// A lease already STARTING is not: an earlier attempt may have begun the driver's start,
// so it starts and then ends through the driver as usual.
func windowOver(l *climate.Lease, now time.Time) bool {
	end := l.Event(climate.EventEndLease)
	return l.Status == climate.LeasePending && end != nil &&
		(end.Status == climate.EventUndone || end.Status == climate.EventInProgress) && !end.Time.After(now)
}

// endUnstarted takes a lease whose window is over straight to its end state: every
// unfinished event DONE, reservations deleted, TERMINATED; no driver action runs, as
// nothing was started. A handler of another of its events claimed meanwhile then finds
// it no longer IN_PROGRESS and does nothing.
func endUnstarted(l *climate.Lease, now time.Time) {
	for i := range l.Events {
		ev := &l.Events[i]
		if ev.Status == climate.EventUndone || ev.Status == climate.EventInProgress {
			ev.Status, ev.UpdatedAt = climate.EventDone, now
		}
	}
	for i := range l.Reservations {
		r := &l.Reservations[i]
		if r.Status != climate.ReservationDeleted {
			r.Status, r.UpdatedAt = climate.ReservationDeleted, now
		}
	}
	l.Status = climate.DeriveLeaseStatus(l)
	l.UpdatedAt = now
}

// finish records an event's outcome: reservations move to target (or error), the event
// becomes DONE (or ERROR), and the lease status is derived from its events.
func (e *Engine) finish(ctx context.Context, ev climate.Event, target climate.ReservationStatus, actionErr error) (*climate.Lease, error) {
	var l *climate.Lease
	err := e.store.Update(ctx, func(tx climate.Tx) error {
		var err error
		if l, err = e.claimed(ctx, tx, ev); err != nil {
			return err
		}
		now := e.clock.Now().Truncate(time.Microsecond)
		before := climate.LeaseAuditSummary(l)
		for i := range l.Reservations {
			r := &l.Reservations[i]
			to := target
			if actionErr != nil {
				to = climate.ReservationError
			}
			if to == "" || r.Status == to {
				continue
			}
			if !r.Status.CanTransition(to) {
				to = climate.ReservationError
			}
			r.Status, r.UpdatedAt = to, now
		}
		evp := findEvent(l, ev.ID)
		evp.Status, evp.UpdatedAt = climate.EventDone, now
		if actionErr != nil {
			evp.Status = climate.EventError
		}
		switch {
		case ev.Type == climate.EventStartLease || ev.Type == climate.EventEndLease:
			l.Status = climate.DeriveLeaseStatus(l)
		case ev.Type == climate.EventRetryDeadline && l.Status == l.Type.WaitingStatus():
			l.Status = l.Type.GaveUpStatus()
		}
		l.UpdatedAt = now
		if err := tx.UpdateLease(ctx, l); err != nil {
			return err
		}
		if _, err := usage.Sync(ctx, tx, l, usage.Updated, now); err != nil {
			return err
		}
		reason := string(ev.Type) + " event handled"
		if actionErr != nil {
			reason = string(ev.Type) + " event failed: " + actionErr.Error()
		}
		if err := climate.Audit(ctx, tx, climate.BySystem(reason), climate.NotifyEvent(ev.Type), climate.LeaseAuditTarget(l),
			before, climate.LeaseAuditSummary(l), now); err != nil {
			return err
		}
		if ev.Type == climate.EventPreemptLease && actionErr == nil {
			return notify.AddPreempted(ctx, tx, l, e.cfg.PreemptionNotice, now)
		}
		return notify.Add(ctx, tx, climate.NotifyEvent(ev.Type), l, actionErr, now)
	})
	if err != nil {
		return l, err
	}
	return l, actionErr
}

// claimed loads ev's lease and checks that ev is still claimed (IN_PROGRESS) by this run:
// a run whose claim lapsed and was taken over must leave the event to its new holder.
func (e *Engine) claimed(ctx context.Context, tx climate.Tx, ev climate.Event) (*climate.Lease, error) {
	l, err := tx.GetLease(ctx, ev.LeaseID)
	if climate.ErrorCode(err) == climate.CodeNotFound {
		return nil, errSkip
	}
	if err != nil {
		return nil, err
	}
	if cur := findEvent(l, ev.ID); cur == nil || cur.Status != climate.EventInProgress || cur.ClaimedBy != e.instance {
		return nil, errSkip
	}
	return l, nil
}

func findEvent(l *climate.Lease, id string) *climate.Event {
	for i := range l.Events {
		if l.Events[i].ID == id {
			return &l.Events[i]
		}
	}
	return nil
}
