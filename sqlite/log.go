package sqlite

import (
	"context"
	"time"

	"climate"
)

var _ climate.AllocationLog = (*tx)(nil)

// logSlots is how many revisions the allocation log keeps at least
// (0020_allocation_log_appended.sql): pruneLog deletes only older ones.
const logSlots = 10000

// AllocationRevision returns the allocations' change counter: the newest revision in the
// allocation log, which the triggers on allocations append to.
func (t *tx) AllocationRevision(ctx context.Context) (int64, error) {
	var rev int64
	err := t.q.QueryRowContext(ctx, `SELECT max(revision) FROM allocation_log`).Scan(&rev)
	return rev, internal(err)
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

// changesQuery reads the log's rows after a revision that match where.
func changesQuery(where string) string {
	return `SELECT revision, added, id, reservation_id, lease_id, resource_id, start_at, end_at,
		slots, vcpus, memory_mb, disk_gb, preemptible
		FROM allocation_log WHERE revision > ?` + where + ` ORDER BY revision`
}

// changes reads the log after since, the rows matching where (conditions with args).
func (t *tx) changes(ctx context.Context, since int64, where string, args ...any) ([]climate.AllocationChange, bool, error) {
	var floor, rev int64
	if err := t.q.QueryRowContext(ctx, `SELECT (SELECT value FROM meta WHERE key = 'allocation_log_floor'),
		(SELECT max(revision) FROM allocation_log)`).Scan(&floor, &rev); err != nil {
		return nil, false, internal(err)
	}
	if since < max(floor, rev-logSlots) {
		return nil, false, nil
	}
	if since >= rev {
		return nil, true, nil
	}
	// The migration's marker row (added = -1) sits at the floor, never after since.
	rows, err := t.q.QueryContext(ctx, changesQuery(where), append([]any{since}, args...)...)
	if err != nil {
		return nil, false, internal(err)
	}
	defer rows.Close()
	var out []climate.AllocationChange
	for rows.Next() {
		var c climate.AllocationChange
		var added bool
		var start, end int64
		a := &c.Allocation
		if err := rows.Scan(&c.Revision, &added, &a.ID, &a.ReservationID, &a.LeaseID, &a.ResourceID, &start, &end,
			&a.Slots, &a.Size.VCPUs, &a.Size.MemoryMB, &a.Size.DiskGB, &a.Preemptible); err != nil {
			return nil, false, internal(err)
		}
		c.Removed, a.Start, a.End = !added, fromMicros(start), fromMicros(end)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, false, internal(err)
	}
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
