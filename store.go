package climate

import (
	"context"
	"time"
)

// Store persists Climate's state. All reads and writes happen inside a transaction, so a
// use-case can re-check what it planned and write it atomically.
type Store interface {
	// View runs fn in a read-only transaction that sees one consistent snapshot.
	View(ctx context.Context, fn func(Tx) error) error
	// Update runs fn in a write transaction; write transactions are serialized (SQLite: one
	// writer, BEGIN IMMEDIATE). If fn returns an error, nothing it wrote is kept. fn must not
	// call View or Update itself: with one writer, a nested Update deadlocks.
	Update(ctx context.Context, fn func(Tx) error) error
	Close() error
}

// Tx is the set of operations available inside a transaction. Methods return *Error with
// CodeNotFound for unknown ids and CodeConflict for uniqueness violations.
type Tx interface {
	// GetLease returns a lease with its reservations (each with its allocations) and events.
	GetLease(ctx context.Context, id string) (*Lease, error)
	// ListLeases returns leases (with children) matching f, ordered by creation time then id
	// (list order), at most f.Limit of them when it is set.
	ListLeases(ctx context.Context, f LeaseFilter) ([]Lease, error)
	// InsertLease writes a lease with its reservations, their allocations and its events.
	// Children take their lease and reservation ids from the structs that contain them.
	InsertLease(ctx context.Context, l *Lease) error
	// UpdateLease writes the lease row and syncs its children by id: children absent from
	// l are deleted, new ones inserted, existing ones updated.
	UpdateLease(ctx context.Context, l *Lease) error
	// DeleteLease deletes a lease and, in the same transaction, its reservations,
	// allocations and events.
	DeleteLease(ctx context.Context, id string) error

	// ListAllocations returns allocations matching f, ordered by resource id then start.
	ListAllocations(ctx context.Context, f AllocationFilter) ([]Allocation, error)
	// AllocationRevision increases whenever an allocation is added, changed or removed, so
	// an in-memory availability index can tell whether it is current.
	AllocationRevision(ctx context.Context) (int64, error)

	// InsertHost registers a host; when h.ID is empty it assigns the decimal string of a
	// never-reused increasing integer (Blazar's clients treat numeric strings as host ids).
	// Extra capability names are registered as resource properties on first use.
	InsertHost(ctx context.Context, h *Host) error
	GetHost(ctx context.Context, id string) (*Host, error)
	// ListHosts returns every host, ordered by creation time, then registration order.
	ListHosts(ctx context.Context) ([]Host, error)
	// UpdateHost rewrites a host row and replaces its extra capabilities.
	UpdateHost(ctx context.Context, h *Host) error
	DeleteHost(ctx context.Context, id string) error
	// SetHostPower records a host's power state (CodeNotFound when the host is gone). It
	// does not change the inventory revision: power is not a property leases plan on.
	SetHostPower(ctx context.Context, p *HostPower) error
	// InventoryRevision increases on every change to hosts or their capabilities, so a
	// cache of the inventory can tell when it is stale.
	InventoryRevision(ctx context.Context) (int64, error)

	// ListResourceProperties returns the properties known for a resource type, by name.
	ListResourceProperties(ctx context.Context, resourceType string) ([]ResourceProperty, error)
	// UpdateResourceProperty sets Private (and UpdatedAt) of the property p.ResourceType/p.Name.
	UpdateResourceProperty(ctx context.Context, p *ResourceProperty) error

	// NextEventTime returns when the engine must next look at events: the earliest time
	// of an UNDONE event or of an expiring IN_PROGRESS claim. ok is false when none.
	NextEventTime(ctx context.Context) (t time.Time, ok bool, err error)
	// ClaimDueEvents marks up to limit events IN_PROGRESS, claimed by owner (an engine
	// run's instance id) until claimUntil, and returns them ordered by time (ties: end_lease,
	// before_end_lease, start_lease, then id). Due events are UNDONE ones with Time <= now
	// and IN_PROGRESS ones whose claim has expired (their claimer died or stalled). limit
	// must be positive.
	ClaimDueEvents(ctx context.Context, owner string, now, claimUntil time.Time, limit int) ([]Event, error)
	// RenewClaims moves to claimUntil the expiry of every claim owner holds (its
	// heartbeat) and returns how many it renewed. A claim taken over by another owner is
	// no longer owner's and is left alone.
	RenewClaims(ctx context.Context, owner string, claimUntil time.Time) (int, error)
	// ReleaseClaims hands every IN_PROGRESS event back (UNDONE, due at its own time) and
	// returns how many: for an engine that knows every claimer but itself is dead, as the
	// only engine on an SQLite database is when it starts.
	ReleaseClaims(ctx context.Context) (int, error)

	// The notification outbox, written in the transactions of the changes it reports.
	Outbox
	// Webhooks and their latest deliveries.
	WebhookStore
	// The floating IP inventory.
	FloatingIPStore
	// The flavors flavor:instance reservations name.
	FlavorStore
	// Hosts' maintenance windows.
	MaintenanceStore
	// The audit trail, written in the transactions of the changes it records.
	AuditStore
	// Usage records, project limits and budget charges.
	UsageStore
}

// LeaseFilter selects leases. Zero fields match everything.
type LeaseFilter struct {
	ProjectID string
	Name      string
	Statuses  []LeaseStatus // any of these
	// After keeps the leases after this one in list order: a keyset position (its
	// CreatedAt and ID), so the lease need not exist any more.
	After *Lease
	// Limit is the most leases returned; 0 means no limit.
	Limit int
}

// AllocationFilter selects allocations. Zero fields match everything.
type AllocationFilter struct {
	// ResourceIDs and LeaseIDs, when not nil, keep the allocations of those resources or
	// leases (none when empty).
	ResourceIDs    []string
	LeaseIDs       []string
	LeaseID        string
	ReservationID  string
	ExcludeLeaseID string
	// From and To, when non-zero, keep allocations overlapping [From, To); To zero means
	// unbounded.
	From, To time.Time
}

// AllocationChange is one entry of a store's allocation change log: an allocation that was
// added or removed by the write that moved AllocationRevision to Revision. A changed row is
// a removal of the old allocation then an addition of the new one (at one revision on
// PostgreSQL, at two on SQLite).
type AllocationChange struct {
	Revision   int64
	Removed    bool // false: added
	Allocation Allocation
}

// AllocationLog is implemented by the Tx of stores that log allocation changes, so an
// availability index in another process (a replica) catches up on the deltas instead of
// rebuilding from every allocation.
type AllocationLog interface {
	// AllocationChanges returns the changes with since < Revision, ordered by revision
	// (within one revision, removals first). ok is false when the log no longer reaches back
	// to since (it was pruned); the caller must then rebuild.
	AllocationChanges(ctx context.Context, since int64) (changes []AllocationChange, ok bool, err error)
}

// SerialLog is implemented by the Tx of stores whose write transactions run one at a
// time and read their own allocation changes in the log (SQLite): the log after a
// revision is then every change made since, this transaction's earlier writes included,
// and nothing else can be. The manager re-checks a plan made on an index at revision
// since against the index's holds and these changes, where it would otherwise read the
// chosen resources' allocations (which then needs no index by resource in the store).
type SerialLog interface {
	// AllocationChangesOn is AllocationChanges for the changes of allocations on the
	// resources ids that overlap [from, to) (end after from, start before to).
	AllocationChangesOn(ctx context.Context, since int64, ids []string, from, to time.Time) (changes []AllocationChange, ok bool, err error)
}

// RevisionsReader is implemented by the Tx of stores that read AllocationRevision and
// InventoryRevision in one statement (SQLite): a commit reads both after its write, and
// each statement is work for SQLite's one writer.
type RevisionsReader interface {
	Revisions(ctx context.Context) (allocation, inventory int64, err error)
}

// WritesTakeTurns reports whether s's write transactions run one at a time and read their
// own revisions (SQLite, whose Tx is a SerialLog), rather than side by side with
// revisions stamped at commit (CommitStamped: PostgreSQL).
func WritesTakeTurns(s Store) bool {
	_, stamped := s.(CommitStamped)
	return !stamped
}

// CommitStamped is implemented by stores whose write transactions give their allocation
// changes revisions only at commit (PostgreSQL, so that writers run side by side): a
// write transaction cannot see its own, so the manager reads none in it and brings its
// index up to date from the log after the commit (CommitReader) or on its next request,
// as with another replica's writes.
type CommitStamped interface {
	StampsAtCommit()
}

// CommitReader is implemented by CommitStamped stores that can read the allocation
// changes after a revision (as RevisionReader's ChangesSince) in the round trip of a write
// transaction's COMMIT, in a snapshot taken after it: a manager's index then follows the
// manager's own commits, revisions included, with no read of its own. since is called
// just before COMMIT is sent, so the read leaves out what the caller caught up with while
// its write waited and ran; it may decline the read (want false). A request committed in
// the same transaction as one that asked gets that read too. ok is false when there was
// no read, it failed or the log no longer reaches back to since; err is the write's alone.
type CommitReader interface {
	UpdateThenChanges(ctx context.Context, since func() (rev int64, want bool), fn func(Tx) error) (inventory, allocation int64, changes []AllocationChange, ok bool, err error)
}

// RevisionReader is implemented by stores that read their revisions, or their allocation
// log after a revision, in a single statement: a planner checking whether its index is
// current, or catching it up, then costs the database one round trip, not a View's four
// to six. Each call reads one snapshot.
type RevisionReader interface {
	// Revisions returns the inventory and allocation revisions.
	Revisions(ctx context.Context) (inventory, allocation int64, err error)
	// ChangesSince returns the revisions and, as AllocationLog's AllocationChanges, the
	// allocation changes after since (ok false: rebuild).
	ChangesSince(ctx context.Context, since int64) (inventory, allocation int64, changes []AllocationChange, ok bool, err error)
}
