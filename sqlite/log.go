package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"time"

	"climate"
	"climate/sqlcore"
)

var _ climate.AllocationLog = (*tx)(nil)

// logSlots is how many revisions the allocation log keeps at least
// (0020_allocation_log_appended.sql): pruneLog deletes only older ones.
const logSlots = 10000

// newestRevision is the allocations' change counter: the newest revision in the
// allocation log, which the triggers on allocations append to.
const newestRevision = `SELECT max(revision) FROM allocation_log`

// AllocationRevision returns the allocations' change counter.
func (t *tx) AllocationRevision(ctx context.Context) (int64, error) {
	var rev int64
	err := t.q.QueryRowContext(ctx, newestRevision).Scan(&rev)
	return rev, internal(err)
}

var _ climate.RevisionsReader = (*tx)(nil)

// Revisions returns AllocationRevision and InventoryRevision, read in one statement.
func (t *tx) Revisions(ctx context.Context) (allocation, inventory int64, err error) {
	err = t.q.QueryRowContext(ctx, `SELECT (`+newestRevision+`), (`+sqlcore.MetaQuery+`)`, sqlcore.InventoryKey).Scan(&allocation, &inventory)
	return allocation, inventory, internal(err)
}

var _ climate.SerialLog = (*tx)(nil)

// AllocationChanges returns the logged allocation changes after since. ok is false when
// since is below what the log holds: revisions made before the log existed (its floor) or
// pruned.
func (t *tx) AllocationChanges(ctx context.Context, since int64) ([]climate.AllocationChange, bool, error) {
	return t.changes(ctx, since, "")
}

// AllocationChangesOn is AllocationChanges for the allocations on ids over [from, to).
// The writer's transactions run one at a time and see their own changes, so the log after
// since is everything written since (climate.SerialLog). Filtered here, the read of a
// batch's worth of rows returns the few a re-check needs.
func (t *tx) AllocationChangesOn(ctx context.Context, since int64, ids []string, from, to time.Time) ([]climate.AllocationChange, bool, error) {
	return t.changes(ctx, since, onResources, dialect.List(ids), micros(from), micros(to))
}

// onResources is AllocationChangesOn's condition on the log's rows.
var onResources = ` AND resource_id` + dialect.InList + ` AND end_at > ? AND start_at < ?`

// changesQuery reads the log's floor and newest revision with the rows after a revision
// that match where, in one statement: the two come with every row, and with one row of
// NULL log columns when none matches, as the floor must be checked however few match.
// The rows come in the log's order as it is searched; changes sorts them all the same, as
// an ORDER BY here would sort them in a temporary b-tree.
func changesQuery(where string) string {
	return `SELECT f.floor, f.newest, l.revision, l.added, l.id, l.reservation_id, l.lease_id, l.resource_id,
		l.start_at, l.end_at, l.slots, l.vcpus, l.memory_mb, l.disk_gb, l.preemptible
		FROM (SELECT (SELECT value FROM meta WHERE key = 'allocation_log_floor') AS floor,
			(` + newestRevision + `) AS newest) f
		LEFT JOIN allocation_log l ON l.revision > ?` + where
}

// changes reads the log after since, the rows matching where (conditions on the log's
// columns, with args). ok is false, and nothing is returned, when since is below the floor
// or pruned.
func (t *tx) changes(ctx context.Context, since int64, where string, args ...any) ([]climate.AllocationChange, bool, error) {
	// The migration's marker row (added = -1) sits at the floor, never after since.
	rows, err := t.q.QueryContext(ctx, changesQuery(where), append([]any{since}, args...)...)
	if err != nil {
		return nil, false, internal(err)
	}
	defer rows.Close()
	var out []climate.AllocationChange
	var floor, newest int64
	for rows.Next() {
		var rev sql.Null[int64]
		var preemptible sql.Null[bool]
		var added sql.Null[int64] // 1 or 0; -1 on the floor's marker row, read only when since is below it
		var id, reservation, lease, resource sql.Null[string]
		var start, end, slots, vcpus, memory, disk sql.Null[int64]
		if err := rows.Scan(&floor, &newest, &rev, &added, &id, &reservation, &lease, &resource, &start, &end,
			&slots, &vcpus, &memory, &disk, &preemptible); err != nil {
			return nil, false, internal(err)
		}
		if !rev.Valid { // no row matches
			continue
		}
		out = append(out, climate.AllocationChange{Revision: rev.V, Removed: added.V == 0, Allocation: climate.Allocation{
			ID: id.V, ReservationID: reservation.V, LeaseID: lease.V, ResourceID: resource.V,
			Start: fromMicros(start.V), End: fromMicros(end.V), Slots: int(slots.V), Preemptible: preemptible.V,
			Size: climate.Size{VCPUs: int(vcpus.V), MemoryMB: int(memory.V), DiskGB: int(disk.V)}}})
	}
	if err := rows.Err(); err != nil {
		return nil, false, internal(err)
	}
	if since < max(floor, newest-logSlots) {
		return nil, false, nil
	}
	slices.SortFunc(out, func(a, b climate.AllocationChange) int { return cmp.Compare(a.Revision, b.Revision) })
	return out, true, nil
}

// pruneLogEvery is how many write transactions the writer commits between two prunings
// of the allocation log.
const pruneLogEvery = 64

// pruneRows bounds the rows one pruning deletes, so that the first one after a bulk load
// (125,534 allocations for bench api's book) does not hold the writer for long.
const pruneRows = 5000

// pruneLog deletes the allocation log's rows more than logSlots revisions old, the oldest
// pruneRows of them at most, in a transaction of its own on the writer connection
// (between batches). The newest row always stays, so the next revision follows it. A
// failure leaves the rows for next time.
func (s *Store) pruneLog(ctx context.Context) {
	_, _ = s.w.ExecContext(ctx, `DELETE FROM allocation_log WHERE revision <= min(
		(SELECT max(revision) FROM allocation_log) - ?, (SELECT min(revision) FROM allocation_log) + ?)`, logSlots, pruneRows-1)
}
