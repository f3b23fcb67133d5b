// Package power powers hosts off while no lease needs them and on again before one does.
//
// A planning round reads every host's recorded power state, the allocations over a
// horizon and the leases under way, decides which hosts to switch (Decide), and sleeps
// until the next instant a host may need switching: the moment a lease's lead time
// begins, the end of a lease holding a host, or the horizon. It plans again sooner when
// woken (a lease committed, an event handled). Nothing polls.
//
// A switch is recorded before its command runs (powering_on, powering_off) and after
// (on, off, or unknown when the command failed), in write transactions: the first one
// re-checks that the host still needs the switch, so a lease committed meanwhile is seen.
// Within a process, a per-host lock keeps a switch and the engine's power-on at lease start
// (EnsureOn) apart; a start that finds its host off, or being powered off, powers it on
// first, so a lease never starts on a host that is off. Across processes, EnsureOn waits
// for another process's switch to be recorded as done (polling the store, every second).
//
// Time powered off is kept per host (climate.HostPower): from the moment a power-off
// command succeeded until a power-on command starts.
package power

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"climate"
)

// Defaults.
const (
	DefaultRetryAfter = time.Minute
	DefaultParallel   = 8
	DefaultStale      = 15 * time.Minute
	// leaderRetry is how often a process that does not lead asks again.
	leaderRetry = 10 * time.Second
	// errorBackoff is the wait after a store error.
	errorBackoff = 5 * time.Second
	// waitPoll is how often EnsureOn re-reads a host another process is switching.
	waitPoll = time.Second
)

// Config tunes a Manager.
type Config struct {
	// Lead is how long before a lease starts its hosts are powered on.
	Lead time.Duration
	// Idle: a free host is powered off when no lease starts on it within Idle (at least
	// Lead).
	Idle time.Duration
	// Switch powers a host on (on is true) or off, and returns when that is done: the
	// operator's command, with its retries.
	Switch func(ctx context.Context, h *climate.Host, on bool) error
	// RetryAfter is how long a host whose switch failed is left before it is tried again.
	RetryAfter time.Duration
	// Parallel bounds how many switches run at once.
	Parallel int
	// Stale is how long a recorded switch may last: one older is taken as a dead
	// process's, and the host's state as unknown.
	Stale time.Duration
	// Sole says no other process switches hosts on this store (SQLite, where the engine's
	// lock is held): switches recorded before New are a dead run's.
	Sole bool
	// Leader, when set, says whether this process may run planning rounds now (and
	// renews its lead); nil: it always may. PostgreSQL replicas elect one.
	Leader func(ctx context.Context) (bool, error)
	// MaxSleep, when positive, bounds a sleep between rounds: to renew a lead, and to see
	// other processes' commits that cannot wake this one.
	MaxSleep time.Duration
	// MinInterval, when positive, is the least time between two rounds: under a stream of
	// commits, each waking it, planning (a read of the inventory and the timeline) runs
	// at most this often. Switches may start up to this late.
	MinInterval time.Duration
	Logger      *slog.Logger
	// Observe, when set, is told about every round (tests, metrics).
	Observe func(Round)
}

// Round reports one planning round.
type Round struct {
	At       time.Time
	Switches []Decision // switches started
	Next     time.Time  // when the next round is due (zero: only when woken)
}

// Manager runs power management over a store.
type Manager struct {
	store   climate.Store
	clock   climate.Clock
	cfg     Config
	wake    chan struct{}
	started time.Time // when New made it

	locks sync.Map // host id → *sync.Mutex: one switch at a time per host, in this process
	sem   chan struct{}
	wg    sync.WaitGroup

	mu      sync.Mutex
	retryAt map[string]time.Time // hosts whose last switch failed
}

// New returns a Manager; call Run to start planning. EnsureOn works without Run.
func New(store climate.Store, clock climate.Clock, cfg Config) *Manager {
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.Stale <= 0 {
		cfg.Stale = DefaultStale
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Idle = max(cfg.Idle, cfg.Lead)
	return &Manager{store: store, clock: clock, cfg: cfg, wake: make(chan struct{}, 1), started: clock.Now(),
		sem: make(chan struct{}, cfg.Parallel), retryAt: map[string]time.Time{}}
}

// Wake makes the manager plan again now (after a commit, or an event handled). It never
// blocks.
func (m *Manager) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run plans rounds until ctx is done, then waits for the switches under way.
func (m *Manager) Run(ctx context.Context) error {
	defer m.wg.Wait()
	m.cfg.Logger.Info("power management running", "lead", m.cfg.Lead, "idle", m.cfg.Idle)
	var last time.Time
	for {
		if d := last.Add(m.cfg.MinInterval).Sub(m.clock.Now()); m.cfg.MinInterval > 0 && !last.IsZero() && d > 0 {
			if !m.pause(ctx, d) {
				return nil
			}
		}
		last = m.clock.Now()
		var wait time.Duration // 0: until woken
		lead, err := true, error(nil)
		if m.cfg.Leader != nil {
			lead, err = m.cfg.Leader(ctx)
		}
		if err == nil && lead {
			var next time.Time
			next, err = m.round(ctx)
			if !next.IsZero() {
				wait = max(next.Sub(m.clock.Now()), time.Millisecond)
			}
		} else if err == nil {
			wait = leaderRetry
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			m.cfg.Logger.Error("power management: store error, retrying", "err", err, "in", errorBackoff)
			wait = errorBackoff
		}
		if mx := m.cfg.MaxSleep; mx > 0 && (wait == 0 || wait > mx) {
			wait = mx
		}
		if !m.sleep(ctx, wait) {
			return nil
		}
	}
}

// sleep waits d (until woken when 0), a wake-up, or ctx; false on ctx done.
func (m *Manager) sleep(ctx context.Context, d time.Duration) bool {
	var timerC <-chan time.Time
	if d > 0 {
		t := m.clock.NewTimer(d)
		defer t.Stop()
		timerC = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-m.wake:
	case <-timerC:
	}
	return true
}

// round plans once and starts the switches due; it returns when to plan next.
func (m *Manager) round(ctx context.Context) (time.Time, error) {
	now := m.clock.Now()
	switches, next, err := m.plan(ctx, now)
	if err != nil {
		return time.Time{}, err
	}
	started, err := m.start(ctx, now, switches)
	if m.cfg.Observe != nil {
		m.cfg.Observe(Round{At: now, Switches: started, Next: next})
	}
	return next, err
}

// plan reads the timeline at now and decides: the switches due, and when to plan next.
func (m *Manager) plan(ctx context.Context, now time.Time) ([]Decision, time.Time, error) {
	var hosts []Timeline
	err := m.store.View(ctx, func(tx climate.Tx) error {
		allocs, err := tx.ListAllocations(ctx, m.horizon(now, nil))
		if err != nil {
			return err
		}
		hosts, err = m.timelines(ctx, tx, now, nil, allocs)
		return err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	switches, next := Decide(now, hosts, m.cfg.Lead, m.cfg.Idle)
	if horizon := now.Add(m.cfg.Idle); next.IsZero() || next.After(horizon) {
		next = horizon // what starts beyond the horizon was not read
	}
	return switches, next, nil
}

// start re-checks the decided switches in one write transaction, records them as under
// way, and runs each in the background. Hosts locked by a switch under way are skipped:
// the next round sees how it ended.
func (m *Manager) start(ctx context.Context, now time.Time, decided []Decision) ([]Decision, error) {
	if len(decided) == 0 {
		return nil, nil
	}
	only := map[string]bool{}
	var locked []*sync.Mutex
	for _, d := range decided {
		mu := m.lock(d.HostID)
		if mu.TryLock() {
			only[d.HostID] = true
			locked = append(locked, mu)
		}
	}
	type run struct {
		d    Decision
		host *climate.Host
		mu   *sync.Mutex
	}
	var runs []run
	read, err := m.readHorizon(ctx, now, only)
	if err != nil {
		for _, mu := range locked {
			mu.Unlock()
		}
		return nil, err
	}
	err = m.store.Update(ctx, func(tx climate.Tx) error {
		runs = runs[:0]
		allocs, err := read(tx)
		if err != nil {
			return err
		}
		hosts, err := m.timelines(ctx, tx, now, only, allocs)
		if err != nil {
			return err
		}
		again, _ := Decide(now, hosts, m.cfg.Lead, m.cfg.Idle)
		for _, d := range again {
			h, err := tx.GetHost(ctx, d.HostID)
			if err != nil {
				return err
			}
			state := climate.PowerSwitchingOff
			if d.On {
				state = climate.PowerSwitchingOn
			}
			p := m.recorded(h, now).Next(state, now)
			if err := tx.SetHostPower(ctx, &p); err != nil {
				return err
			}
			h.Power = &p
			runs = append(runs, run{d: d, host: h, mu: m.lock(d.HostID)})
		}
		return nil
	})
	if err != nil {
		for _, mu := range locked {
			mu.Unlock()
		}
		return nil, err
	}
	keep := map[*sync.Mutex]bool{}
	started := make([]Decision, 0, len(runs))
	for _, r := range runs {
		keep[r.mu] = true
		started = append(started, r.d)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer r.mu.Unlock()
			m.sem <- struct{}{}
			defer func() { <-m.sem }()
			m.switchHost(ctx, r.host, r.d.On)
		}()
	}
	for _, mu := range locked {
		if !keep[mu] {
			mu.Unlock()
		}
	}
	return started, nil
}

// switchHost runs a recorded switch and records its outcome; the caller holds the lock.
func (m *Manager) switchHost(ctx context.Context, h *climate.Host, on bool) {
	verb := map[bool]string{true: "power on", false: "power off"}[on]
	err := m.cfg.Switch(ctx, h, on)
	done := climate.PowerOff
	if on {
		done = climate.PowerOn
	}
	if err != nil {
		done = climate.PowerUnknown
		m.mu.Lock()
		m.retryAt[h.ID] = m.clock.Now().Add(m.cfg.RetryAfter)
		m.mu.Unlock()
		m.cfg.Logger.Error("power management: "+verb+" failed", "host", h.HypervisorHostname, "err", err, "retry_in", m.cfg.RetryAfter)
	} else {
		m.mu.Lock()
		delete(m.retryAt, h.ID)
		m.mu.Unlock()
		m.cfg.Logger.Info("power management: host powered "+string(done), "host", h.HypervisorHostname)
	}
	if rerr := m.record(context.WithoutCancel(ctx), h, done); rerr != nil {
		m.cfg.Logger.Error("power management: recording the power state failed", "host", h.HypervisorHostname, "state", done, "err", rerr)
	}
	m.Wake()
}

// record writes a host's new state, carrying its time off over.
func (m *Manager) record(ctx context.Context, h *climate.Host, state climate.PowerState) error {
	return m.store.Update(ctx, func(tx climate.Tx) error {
		cur, err := tx.GetHost(ctx, h.ID)
		if err != nil {
			return err
		}
		now := m.clock.Now()
		p := m.recorded(cur, now).Next(state, now)
		return tx.SetHostPower(ctx, &p)
	})
}

// recorded returns a host's power record, unknown when none was recorded.
func (m *Manager) recorded(h *climate.Host, now time.Time) climate.HostPower {
	if h.Power == nil {
		return climate.HostPower{HostID: h.ID, State: climate.PowerUnknown, ChangedAt: now}
	}
	return *h.Power
}

// state is a host's power as planning sees it: a switch recorded long ago, or by a dead
// run, that never finished leaves the host's state unknown.
func (m *Manager) state(p *climate.HostPower, now time.Time) climate.PowerState {
	if p == nil {
		return climate.PowerUnknown
	}
	if p.State == climate.PowerSwitchingOn || p.State == climate.PowerSwitchingOff {
		if now.Sub(p.ChangedAt) > m.cfg.Stale || (m.cfg.Sole && p.ChangedAt.Before(m.started)) {
			return climate.PowerUnknown
		}
	}
	return p.State
}

func (m *Manager) lock(hostID string) *sync.Mutex {
	mu, _ := m.locks.LoadOrStore(hostID, &sync.Mutex{})
	return mu.(*sync.Mutex)
}

// underWay are the lease statuses in which a lease holds its hosts whatever its window
// says: it has started (or is starting) and has not ended.
var underWay = []climate.LeaseStatus{climate.LeaseStarting, climate.LeaseActive, climate.LeaseTerminating}

// horizon asks for the allocations planning at now reads (on the hosts in only, when
// set): windows overlapping [now, now + 2 × idle). Planning happens again at now + idle
// at the latest, and a start after the read part is then more than idle ≥ lead away.
func (m *Manager) horizon(now time.Time, only map[string]bool) climate.AllocationFilter {
	f := climate.AllocationFilter{From: now, To: now.Add(2 * m.cfg.Idle)}
	if only != nil {
		f.ResourceIDs = []string{}
		for id := range only {
			f.ResourceIDs = append(f.ResourceIDs, id)
		}
		sort.Strings(f.ResourceIDs)
	}
	return f
}

// readHorizon returns how the switches' write transaction reads the horizon's
// allocations on the hosts in only. On a store whose writes take turns (SQLite, which
// has no index by resource: a search of every allocation ending after now, some 200 ms
// at H=5,000) they are read before, in a read transaction, and the write transaction
// only checks in the log that nothing changed there since; otherwise it reads them.
func (m *Manager) readHorizon(ctx context.Context, now time.Time, only map[string]bool) (func(climate.Tx) ([]climate.Allocation, error), error) {
	f := m.horizon(now, only)
	inTx := func(tx climate.Tx) ([]climate.Allocation, error) { return tx.ListAllocations(ctx, f) }
	if !climate.WritesTakeTurns(m.store) {
		return inTx, nil
	}
	var allocs []climate.Allocation
	var since int64
	err := m.store.View(ctx, func(tx climate.Tx) error {
		var err error
		if since, err = tx.AllocationRevision(ctx); err != nil {
			return err
		}
		allocs, err = tx.ListAllocations(ctx, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	return func(tx climate.Tx) ([]climate.Allocation, error) {
		lg, ok := tx.(climate.SerialLog)
		if !ok {
			return inTx(tx)
		}
		changes, ok, err := lg.AllocationChangesOn(ctx, since, f.ResourceIDs, f.From, f.To)
		if err != nil {
			return nil, err
		}
		if !ok || len(changes) > 0 {
			return inTx(tx)
		}
		return allocs, nil
	}, nil
}

// timelines builds the hosts' timelines (only those in only, when set) as planning sees
// them at now, with allocs, the horizon's allocations.
func (m *Manager) timelines(ctx context.Context, tx climate.Tx, now time.Time, only map[string]bool, allocs []climate.Allocation) ([]Timeline, error) {
	hosts, err := tx.ListHosts(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*Timeline{}
	out := make([]Timeline, 0, len(hosts))
	for i := range hosts {
		h := &hosts[i]
		if only != nil && !only[h.ID] {
			continue
		}
		out = append(out, Timeline{HostID: h.ID, State: m.state(h.Power, now), Reservable: h.Reservable})
	}
	for i := range out {
		byID[out[i].HostID] = &out[i]
	}
	busy := func(hostID string, until time.Time) {
		if t := byID[hostID]; t != nil {
			t.Busy = true
			if until.After(t.FreeAt) {
				t.FreeAt = until
			}
		}
	}
	for _, a := range allocs {
		t := byID[a.ResourceID]
		if t == nil {
			continue
		}
		if !a.Start.After(now) {
			busy(a.ResourceID, a.End)
		} else if t.NextStart.IsZero() || a.Start.Before(t.NextStart) {
			t.NextStart = a.Start
		}
	}
	leases, err := tx.ListLeases(ctx, climate.LeaseFilter{Statuses: underWay})
	if err != nil {
		return nil, err
	}
	for _, l := range leases {
		for _, r := range l.Reservations {
			for _, a := range r.Allocations {
				busy(a.ResourceID, time.Time{})
			}
		}
	}
	m.mu.Lock()
	for i := range out {
		out[i].RetryAt = m.retryAt[out[i].HostID]
	}
	m.mu.Unlock()
	return out, nil
}

// EnsureOn powers h on before lease l starts on it, unless it is on: a lease never starts
// on a host that is off, or being powered off. It waits for a switch under way.
func (m *Manager) EnsureOn(ctx context.Context, l *climate.Lease, h *climate.Host) error {
	mu := m.lock(h.ID)
	mu.Lock()
	defer mu.Unlock()
	for {
		var cur *climate.Host
		var elsewhere bool
		err := m.store.Update(ctx, func(tx climate.Tx) error {
			var err error
			if cur, err = tx.GetHost(ctx, h.ID); err != nil {
				return err
			}
			now := m.clock.Now()
			switch m.state(cur.Power, now) {
			case climate.PowerOn:
				return errDone
			case climate.PowerSwitchingOn, climate.PowerSwitchingOff:
				// Another process runs a switch (this one's would hold the lock).
				elsewhere = true
				return nil
			}
			p := m.recorded(cur, now).Next(climate.PowerSwitchingOn, now)
			return tx.SetHostPower(ctx, &p)
		})
		if errors.Is(err, errDone) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("power on: %w", err)
		}
		if elsewhere {
			if !m.pause(ctx, waitPoll) {
				return fmt.Errorf("power on: %w", context.Cause(ctx))
			}
			continue
		}
		m.cfg.Logger.Info("power management: powering on a host for a lease starting on it", "host", cur.HypervisorHostname, "lease", l.ID)
		err = m.cfg.Switch(ctx, cur, true)
		state := climate.PowerOn
		if err != nil {
			state = climate.PowerUnknown
		}
		if rerr := m.record(context.WithoutCancel(ctx), cur, state); rerr != nil && err == nil {
			err = rerr
		}
		m.Wake()
		if err != nil {
			return fmt.Errorf("power on: %w", err)
		}
		return nil
	}
}

var errDone = errors.New("nothing to do")

// pause waits d on the clock, or until ctx is done (false).
func (m *Manager) pause(ctx context.Context, d time.Duration) bool {
	t := m.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
