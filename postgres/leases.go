package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"climate"
	"climate/sqlcore"
)

// The lease list is sqlcore's.

// The inserts of a lease and its children: plain INSERTs, whose taken id aborts the
// transaction with a unique violation (taken reads it). They went with ON CONFLICT (id)
// DO NOTHING, which kept the transaction usable after a duplicate; but these statements
// are held and go with a later one (pipe.go), whose own result is then lost, so the
// transaction was not usable anyway, and each row paid for a speculative insertion: a
// look-up of the id before the row, and a second WAL record to confirm it (15 records of
// a 10-host creation's 196).
var (
	insertLease       = sqlcore.Rebind(sqlcore.InsertLease)
	insertReservation = sqlcore.Rebind(sqlcore.InsertReservation)
	insertAllocation  = sqlcore.Rebind(sqlcore.InsertAllocation)
	insertEvent       = sqlcore.Rebind(sqlcore.InsertEvent)
)

// InsertLease writes a lease and all its children. Children are written under their
// enclosing lease and reservation, whatever their own LeaseID and ReservationID say.
func (t *tx) InsertLease(ctx context.Context, l *climate.Lease) error {
	if err := t.Writable(); err != nil {
		return err
	}
	// The lease and all its children go with the transaction's next statement (pipe.go):
	// their only answer is an error (a taken id), which that statement returns.
	b := &pgx.Batch{}
	b.Queue(insertLease, dialect.LeaseArgs(l)...).Fn = taken("Lease " + l.ID)
	for i := range l.Reservations {
		r := &l.Reservations[i]
		queueReservation(b, l.ID, r)
		// A reservation's allocations in one statement, its lease's events in another:
		// a statement costs PostgreSQL about as much as a row.
		args := make([]any, 0, 11*len(r.Allocations))
		for j := range r.Allocations {
			args = dialect.AppendAllocationArgs(args, l.ID, r.ID, &r.Allocations[j])
		}
		queueRows(b, `INSERT INTO allocations (`+sqlcore.AllocationColumns+`)`, 11, args, "An allocation of reservation "+r.ID)
	}
	args := make([]any, 0, 7*len(l.Events))
	for i := range l.Events {
		args = dialect.AppendEventArgs(args, l.ID, &l.Events[i])
	}
	queueRows(b, `INSERT INTO events (`+sqlcore.EventInsertColumns+`)`, 7, args, "An event of lease "+l.ID)
	t.p.holdBatch(b)
	return nil
}

// rowsPerStatement bounds a multi-row statement (PostgreSQL takes at most 65,535
// parameters).
const rowsPerStatement = 500

// queueRows queues insert (its columns named) of args, rows of width values each, as
// multi-row statements; a taken id fails with "<what> already exists".
func queueRows(b *pgx.Batch, insert string, width int, args []any, what string) {
	for len(args) > 0 {
		n := min(len(args)/width, rowsPerStatement)
		q := insert + ` VALUES ` + sqlcore.ValuesRows(width, n)
		b.Queue(sqlcore.Rebind(q), args[:n*width]...).Fn = taken(what)
		args = args[n*width:]
	}
}

// taken reads the result of an insert of what: a unique violation (a taken id) is a
// conflict that names it.
func taken(what string) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		_, err := br.Exec()
		if sqlState(err) == sqlUniqueViolation {
			return &climate.Error{Code: climate.CodeConflict, Message: what + " already exists", Err: err}
		}
		return err
	}
}

func queueReservation(b *pgx.Batch, leaseID string, r *climate.Reservation) {
	b.Queue(insertReservation, dialect.ReservationArgs(leaseID, r)...).Fn = taken("Reservation " + r.ID)
}

func queueAllocation(b *pgx.Batch, leaseID, reservationID string, a *climate.Allocation) {
	b.Queue(insertAllocation, dialect.AppendAllocationArgs(make([]any, 0, 11), leaseID, reservationID, a)...).Fn =
		taken("Allocation " + a.ID)
}

func queueEvent(b *pgx.Batch, leaseID string, e *climate.Event) {
	b.Queue(insertEvent, dialect.AppendEventArgs(make([]any, 0, 7), leaseID, e)...).Fn = taken("Event " + e.ID)
}

// GetLease returns a lease with its children, in one round trip (sqlcore.LeaseQueries in
// a batch). In a write transaction it first locks the lease's row to commit, in the same
// batch, so that changes of one lease (the manager's update, each event's transitions,
// on any replica) take turns from their read to their commit: each statement of the
// batch takes its own snapshot, so the reads after the lock see the previous holder's
// commit, and nothing writes back a status or an event it read before another's change
// (see doc.go).
func (t *tx) GetLease(ctx context.Context, id string) (*climate.Lease, error) {
	b := &pgx.Batch{}
	if t.Write {
		b.Queue(`SELECT 1 FROM leases WHERE id = $1 FOR NO KEY UPDATE`, id)
	}
	for _, q := range sqlcore.LeaseQueries {
		b.Queue(rebinder.Rebind(q), id)
	}
	br := t.q.SendBatch(ctx, b)
	defer br.Close()
	if t.Write {
		if _, err := br.Exec(); err != nil {
			return nil, dbError(err)
		}
	}
	return dialect.LoadLease(id, func() (sqlcore.Rows, error) { return br.Query() })
}

// UpdateLease writes the lease row and syncs its children by id, writing only those that
// changed (sqlcore.SyncLease). The writes are held, in the order they are made, to go
// with the transaction's next statement (pipe.go).
func (t *tx) UpdateLease(ctx context.Context, l *climate.Lease) error {
	if err := t.Writable(); err != nil {
		return err
	}
	cur, err := t.GetLease(ctx, l.ID)
	if err != nil {
		return err
	}
	w := batchWriter{&pgx.Batch{}}
	if err := dialect.SyncLease(cur, l, w); err != nil {
		return err
	}
	t.p.holdBatch(w.b)
	return nil
}

// DeleteLease deletes a lease and, by cascade, its children. The statement is held to go
// with the transaction's next statement or its COMMIT (pipe.go), which returns
// CodeNotFound if it deleted nothing.
func (t *tx) DeleteLease(ctx context.Context, id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	t.p.hold(func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err == nil && tag.RowsAffected() == 0 {
			err = sqlcore.LeaseNotFound(id)
		}
		return err
	}, `DELETE FROM leases WHERE id = $1`, id)
	return nil
}

// batchWriter queues SyncLease's writes.
type batchWriter struct{ b *pgx.Batch }

func (w batchWriter) Exec(query string, args ...any) error {
	w.b.Queue(rebinder.Rebind(query), args...)
	return nil
}

func (w batchWriter) InsertReservation(leaseID string, r *climate.Reservation) error {
	queueReservation(w.b, leaseID, r)
	return nil
}

func (w batchWriter) InsertAllocation(leaseID, reservationID string, a *climate.Allocation) error {
	queueAllocation(w.b, leaseID, reservationID, a)
	return nil
}

func (w batchWriter) InsertEvent(leaseID string, e *climate.Event) error {
	queueEvent(w.b, leaseID, e)
	return nil
}

func (w batchWriter) DeleteIDs(table string, ids []string) error {
	q, arg := dialect.DeleteIDs(table, ids)
	return w.Exec(q, arg)
}

// ListAllocations returns the allocations matching f. A write transaction reads a
// resource's allocations to re-check it: it locks the resource first, in the same round
// trip, and holds it to commit (see doc.go).
func (t *tx) ListAllocations(ctx context.Context, f climate.AllocationFilter) ([]climate.Allocation, error) {
	if !t.Write || len(f.ResourceIDs) == 0 {
		return t.Tx.ListAllocations(ctx, f)
	}
	q, args := dialect.AllocationQuery(f)
	b := &pgx.Batch{}
	first, last := lockDays(f.From, f.To, len(f.ResourceIDs))
	keys, alone := resourceLocks(t.schema, f.ResourceIDs, first, last)
	b.Queue(lockResources, keys, alone)
	b.Queue(rebinder.Rebind(q), args...)
	// The inventory revision, which the manager reads next to notice a resource deleted
	// meanwhile, comes in the same round trip, after the locks (InventoryRevision).
	var inventory int64
	b.Queue(inventoryRevisionQuery).QueryRow(func(r pgx.Row) error { return r.Scan(&inventory) })
	br := t.q.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, dbError(err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, dbError(err)
	}
	allocs, err := dialect.ScanAllocations(rows)
	if err != nil {
		return nil, err
	}
	if err := br.Close(); err != nil {
		return nil, dbError(err)
	}
	t.inventory, t.inventoryAt = &inventory, t.p.sent
	return allocs, nil
}

const inventoryRevisionQuery = `SELECT value FROM meta WHERE key = 'inventory_revision'`

// InventoryRevision returns the inventory's change counter. Read right after a write
// transaction's ListAllocations, it is the value that read with the resources' locks,
// when nothing was sent since.
func (t *tx) InventoryRevision(ctx context.Context) (int64, error) {
	if t.inventory != nil && t.inventoryAt == t.p.sent {
		return *t.inventory, nil
	}
	return t.Tx.InventoryRevision(ctx)
}

// lockResources takes transaction-scoped advisory locks on the resources that a write
// transaction reads to re-check: the keys $1 (resourceLocks), each alone where $2 says so
// and shared otherwise, in key order, so that two writers never wait for each other
// crosswise (the sorted subquery, which its ORDER BY keeps from being flattened, fixes
// the order). For a window of whole days (lockDays) each resource's lock is shared and a
// lock of each (resource, day) alone: writers whose windows share no day of a resource
// do not wait for each other, and any two whose windows overlap share a day. Without a
// window (unbounded, or too long) the resource's lock is alone, which waits for every
// writer of the resource (a host's deletion, healing from now on).
const lockResources = `SELECT count(CASE WHEN x THEN pg_advisory_xact_lock(k) ELSE pg_advisory_xact_lock_shared(k) END) FROM
	(SELECT k, x FROM unnest($1::bigint[], $2::boolean[]) AS keys (k, x) ORDER BY k, x) AS locks`

// lockDay is the span of one (resource, day) lock, and maxDayLocks the most of them one
// read takes (resources times days); a read that would take more locks its resources
// whole, so that long or large leases do not fill PostgreSQL's shared lock table
// (max_locks_per_transaction times the connections: 6,400 by default, for every
// transaction at once).
const (
	lockDay     = 24 * time.Hour
	maxDayLocks = 128
)

// lockDays returns the days (as numbers since the epoch) that the window [from, to)
// touches, or nils when the window is unbounded or n resources would need more than
// maxDayLocks locks of days.
func lockDays(from, to time.Time, n int) (first, last *int64) {
	if from.IsZero() || to.IsZero() || !to.After(from) {
		return nil, nil
	}
	day := func(t time.Time) int64 { // floor, also before 1970
		us, d := t.UnixMicro(), lockDay.Microseconds()
		if us < 0 {
			return (us - d + 1) / d
		}
		return us / d
	}
	f, l := day(from), day(to.Add(-time.Microsecond))
	if (l-f+1)*int64(n) > maxDayLocks {
		return nil, nil
	}
	return &f, &l
}
