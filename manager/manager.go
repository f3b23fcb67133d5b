// Package manager holds Climate's use-cases: creating, changing and deleting leases and
// inventory. Each write follows the same shape: validate, take a snapshot, plan outside
// any transaction, then commit inside one write transaction that re-checks the plan
// (inventory revision unchanged, chosen resources still free) and re-plans on conflict.
package manager

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"climate"
	"climate/policy"
	"climate/resource"
	"climate/resource/builtin"
)

// Manager runs lease and inventory use-cases against a store.
type Manager struct {
	store climate.Store
	clock climate.Clock
	cfg   Config

	// mu guards avail and pending: planners hold it for reading while they plan, commits
	// hold it for writing while they apply their change to the index.
	mu      sync.RWMutex
	avail   *resource.View
	pending map[int64]pendingCommit
	// refreshMu lets one refresh of the index run at a time.
	refreshMu sync.Mutex
	// commitGate is held shared by each commit, and exclusively by a healing pass that
	// must plan and write with no commit of this manager in between.
	commitGate sync.RWMutex
	// committing counts this manager's commits in flight: while there are some, planning
	// starts its scan of equally good hosts at a random offset, so concurrent requests do
	// not all choose, lock and then lose the same hosts.
	committing atomic.Int64
	// inFlight is what those commits are writing (planLease's avoid).
	inFlight inFlight
	// catchingUp says a commit's read of the allocation log is in flight, readsSent
	// numbers those reads, and unread holds the commits that read nothing until a read
	// sent after them is applied (commitThenCatchUp).
	catchingUp atomic.Bool
	readsSent  atomic.Int64
	unreadMu   sync.Mutex
	unread     []unreadCommit
	// rebuilds and catchUps count how the view was refreshed (for tests and benchmarks).
	rebuilds, catchUps atomic.Int64
	// currentAt is when (wall time, UnixNano) the index was last known to be as the store:
	// a check found it so, or a commit caught it up (commitGated). A plan's first
	// attempt trusts it without a check for trustIndexFor after that (planView).
	currentAt atomic.Int64
	// retryWake wakes RunRetries (WakeRetries): capacity may have freed.
	retryWake chan struct{}
	// freed records what the index lost since; refusedAt, under waitMu, when each waiting
	// lease with a fixed window was last refused (RetryWaiting).
	freed     freedLog
	waitMu    sync.Mutex
	refusedAt map[string]int64
	// queue holds the waiting leases by id as of outbox position queueSeq (nil: not read
	// yet), under waitMu (waitingQueue).
	queue    map[string]climate.Lease
	queueSeq int64
}

// Config tunes the manager.
type Config struct {
	// BeforeEnd is how long before a lease's end the before_end_lease event fires when the
	// request names no before_end_date; 0 disables the default event. Blazar: 60 minutes.
	BeforeEnd time.Duration
	// BeforeStart is how long before a lease's start the before_start_lease heads-up fires
	// when the request names no before_start_date; 0 disables it. The event is not created
	// when the start is nearer than that.
	BeforeStart time.Duration
	// Cleaning is how long a host is kept free after each of its allocations (whole or
	// instance slots) ends, before another may start: Blazar's [physical:host]
	// cleaning_time. 0, the default, allows back-to-back leases. Floating IPs get none.
	Cleaning time.Duration
	// Enforcement is the fair-use rules on lease durations; zero: none.
	Enforcement Enforcement
	// Projects, when set, tells which projects exist (Keystone's), so limits are not set
	// on a mistyped one.
	Projects ProjectDirectory
	// PreemptionNotice is how long before a host is taken back from a preemptible lease
	// its lease.preempted notice is sent: a lease may take back hosts only for a start at
	// least this (and the cleaning time) away, and a preemptible lease holds each host at
	// least this long.
	PreemptionNotice time.Duration
	// EventsChanged, when set, is called after a commit that added, moved or removed
	// events, with the earliest of them still to fire (zero when not known), so the
	// engine can wake up before its timer if an event is now due earlier, or what it
	// slept for is gone (engine.Engine.WakeFor).
	EventsChanged func(earliest time.Time)
	// Notified, when set, is called after a commit that wrote notifications to the outbox,
	// so the delivery worker sends them at once.
	Notified func()
	// Types are the resource types leases may reserve; nil means every built-in one.
	Types resource.Types
	// Policy decides who may do what (package policy); nil means Blazar's defaults,
	// policy.Default().
	Policy climate.Policy
	// Trusts, with Keystone, delegates each lease's owner's roles to Climate: a lease is
	// created with a trust (its trust_id) and deleting it deletes the trust. nil: none.
	Trusts climate.Trusts
	// Log receives what a caller cannot be told (a trust left behind); nil discards it.
	Log *slog.Logger
	// Observer is told how long planning and commits take, and of commits that lost a
	// race and are planned again (metrics); nil: nobody.
	Observer Observer
}

// Observer receives the manager's timings and conflicts.
type Observer interface {
	// Planned: one lease planned on the availability view (each attempt).
	Planned(time.Duration)
	// Committed: one write transaction with its re-check, waiting for the lock included.
	Committed(time.Duration)
	// Conflict: a commit's re-check failed (climate.ErrConflictRetry: a concurrent write,
	// or PostgreSQL's serialization or exclusion conflict); it is planned again.
	Conflict()
	// Refreshed: the availability index was brought up to what another process (or a
	// host change) wrote: rebuilt whole from the store (the first build too), or caught
	// up from the allocation log.
	Refreshed(rebuilt bool)
}

type noObserver struct{}

func (noObserver) Planned(time.Duration)   {}
func (noObserver) Committed(time.Duration) {}
func (noObserver) Conflict()               {}
func (noObserver) Refreshed(bool)          {}

// DefaultBeforeEnd is Blazar's default minutes_before_end_lease.
const DefaultBeforeEnd = 60 * time.Minute

// commitAttempts bounds re-planning when concurrent writers keep taking what we planned.
const commitAttempts = 8

// New returns a manager.
func New(store climate.Store, clock climate.Clock, cfg Config) *Manager {
	m := &Manager{store: store, clock: clock, cfg: cfg, retryWake: make(chan struct{}, 1), refusedAt: map[string]int64{}}
	if m.cfg.Log == nil {
		m.cfg.Log = slog.New(slog.DiscardHandler)
	}
	if m.cfg.Types == nil {
		m.cfg.Types = builtin.Types(m.flavor)
	}
	if m.cfg.Policy == nil {
		m.cfg.Policy = policy.Default()
	}
	if m.cfg.Observer == nil {
		m.cfg.Observer = noObserver{}
	}
	return m
}

// allow checks a policy rule for who on target (climate.Forbidden when refused).
func (m *Manager) allow(who climate.Identity, rule string, target climate.Target) error {
	return m.cfg.Policy.Check(who, rule, target)
}

// leaseTarget is a lease's project and user, for the rules checked once it is read.
func leaseTarget(l *climate.Lease) climate.Target {
	return climate.Target{ProjectID: l.ProjectID, UserID: l.UserID}
}

// now returns the current time at the store's precision.
func (m *Manager) now() time.Time { return m.clock.Now().UTC().Truncate(time.Microsecond) }

// eventsChanged tells EventsChanged of l's events still to fire (nil l: not known).
func (m *Manager) eventsChanged(l *climate.Lease) {
	if m.cfg.EventsChanged == nil {
		return
	}
	var earliest time.Time
	if l != nil {
		for _, e := range l.Events {
			if e.Status == climate.EventUndone && (earliest.IsZero() || e.Time.Before(earliest)) {
				earliest = e.Time
			}
		}
	}
	m.cfg.EventsChanged(earliest)
}

// notified runs Notified after a commit that wrote a notification.
func (m *Manager) notified() {
	if m.cfg.Notified != nil {
		m.cfg.Notified()
	}
}

// flavor reads a flavor for a flavor:instance reservation.
func (m *Manager) flavor(ctx context.Context, id string) (*climate.Flavor, error) {
	var f *climate.Flavor
	err := m.store.View(ctx, func(tx climate.Tx) error {
		var err error
		f, err = tx.GetFlavor(ctx, id)
		return err
	})
	return f, err
}

// inFlight lists the allocations this manager's commits in flight are writing, so that
// planning steers concurrent requests to other hosts: on the same hosts they would only
// wait for each other's locks (PostgreSQL) and then lose the re-check.
type inFlight struct {
	mu     sync.Mutex
	next   int
	allocs map[int][]climate.Allocation
}

// add records allocs until the returned done is called.
func (f *inFlight) add(allocs []climate.Allocation) (done func()) {
	if len(allocs) == 0 {
		return func() {}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.allocs == nil {
		f.allocs = map[int][]climate.Allocation{}
	}
	f.next++
	id := f.next
	f.allocs[id] = allocs
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.allocs, id)
	}
}

// overlapping returns what is in flight now over [from, to): all a plan over that window
// could conflict with, and usually none of it (a copy of everything in flight was a
// quarter of the bytes a creation allocated at 16 clients).
func (f *inFlight) overlapping(from, to time.Time) []climate.Allocation {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []climate.Allocation
	for _, allocs := range f.allocs {
		for _, a := range allocs {
			if a.Start.Before(to) && from.Before(a.End) {
				out = append(out, a)
			}
		}
	}
	return out
}
