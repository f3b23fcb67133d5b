// Package manager holds Climate's use-cases: creating, changing and deleting leases and
// inventory. Each write follows the same shape: validate, take a snapshot, plan outside
// any transaction, then commit inside one write transaction that re-checks the plan
// (inventory revision unchanged, chosen resources still free) and re-plans on conflict.
package manager

import (
	"sync"
	"sync/atomic"
	"time"

	"climate"
	"climate/resource"
	"climate/resource/floatingip"
	"climate/resource/host"
)

// Manager runs lease and inventory use-cases against a store.
type Manager struct {
	store climate.Store
	clock climate.Clock
	cfg   Config

	// mu guards avail: planners hold it for reading while they plan, commits hold it for
	// writing while they apply their change to the index.
	mu    sync.RWMutex
	avail *resource.View
	// commitMu orders this manager's commits with their index updates and with refreshes.
	commitMu sync.Mutex
	// rebuilds and catchUps count how the view was refreshed (for tests and benchmarks).
	rebuilds, catchUps atomic.Int64
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
	// EventsChanged, when set, is called after a commit that added or moved events, so the
	// engine can wake up before its timer if an event is now due earlier.
	EventsChanged func()
	// Notified, when set, is called after a commit that wrote notifications to the outbox,
	// so the delivery worker sends them at once.
	Notified func()
	// Types are the resource types leases may reserve; nil means every built-in one.
	Types resource.Types
}

// DefaultBeforeEnd is Blazar's default minutes_before_end_lease.
const DefaultBeforeEnd = 60 * time.Minute

// commitAttempts bounds re-planning when concurrent writers keep taking what we planned.
const commitAttempts = 8

// New returns a manager.
func New(store climate.Store, clock climate.Clock, cfg Config) *Manager {
	if cfg.Types == nil {
		cfg.Types = resource.Types{host.Type{}, floatingip.Type{}}
	}
	return &Manager{store: store, clock: clock, cfg: cfg}
}

// now returns the current time at the store's precision.
func (m *Manager) now() time.Time { return m.clock.Now().UTC().Truncate(time.Microsecond) }

func (m *Manager) eventsChanged() {
	if m.cfg.EventsChanged != nil {
		m.cfg.EventsChanged()
	}
}

// notified runs Notified after a commit that wrote a notification.
func (m *Manager) notified() {
	if m.cfg.Notified != nil {
		m.cfg.Notified()
	}
}
