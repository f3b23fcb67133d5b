package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"climate"
	"climate/groupcommit"
)

// AllocationRevision returns the allocations' change counter, which the commit stamp
// moves (doc.go).
func (t *tx) AllocationRevision(ctx context.Context) (int64, error) {
	return t.Meta(ctx, "allocation_revision")
}

// AllocationChanges returns the logged allocation changes with since < revision, in
// revision order, removals first within a revision. ok is false when entries after since
// were pruned, or when since is ahead of the store (the caller followed another
// database, or one restored from an older backup): the caller must rebuild.
func (t *tx) AllocationChanges(ctx context.Context, since int64) ([]climate.AllocationChange, bool, error) {
	_, _, changes, ok, err := changesSince(ctx, t.q, since)
	return changes, ok, err
}

// Revisions reads the inventory and allocation revisions in one statement.
func (s *Store) Revisions(ctx context.Context) (inventory, allocation int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT
		(SELECT value FROM meta WHERE key = 'inventory_revision'),
		(SELECT value FROM meta WHERE key = 'allocation_revision')`).Scan(&inventory, &allocation)
	return inventory, allocation, dbError(err)
}

// ChangesSince reads the revisions and the allocation changes after since in one
// statement, so one snapshot (AllocationChanges).
func (s *Store) ChangesSince(ctx context.Context, since int64) (inventory, allocation int64, changes []climate.AllocationChange, ok bool, err error) {
	return changesSince(ctx, s.pool, since)
}

// changesSinceQuery reads the counters, and the log's entries after $1 when it still
// reaches back to it, in one statement (so one snapshot). The entries' columns are NULL on
// the one row that carries the counters when there are none.
const changesSinceQuery = `WITH m AS MATERIALIZED (SELECT
		(SELECT value FROM meta WHERE key = 'inventory_revision') AS inventory,
		(SELECT value FROM meta WHERE key = 'allocation_revision') AS allocation,
		(SELECT value FROM meta WHERE key = 'allocation_log_pruned') AS pruned)
	SELECT m.inventory, m.allocation, $1 >= m.pruned AND $1 <= m.allocation,
		l.revision, l.removed, l.allocation_id, l.reservation_id, l.lease_id, l.resource_id, l.start_at, l.end_at,
		l.slots, l.vcpus, l.memory_mb, l.disk_gb, l.preemptible
	FROM m LEFT JOIN allocation_log l ON l.revision > $1 AND $1 >= m.pruned AND $1 <= m.allocation
	ORDER BY l.revision, l.removed DESC, l.seq`

// changesSince is AllocationChanges and ChangesSince: changesSinceQuery through q.
func changesSince(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, since int64) (inventory, allocation int64, changes []climate.AllocationChange, ok bool, err error) {
	rows, err := q.Query(ctx, changesSinceQuery, since)
	if err != nil {
		return 0, 0, nil, false, dbError(err)
	}
	return scanChanges(rows)
}

// scanChanges reads the rows of changesSinceQuery and closes them.
func scanChanges(rows pgx.Rows) (inventory, allocation int64, changes []climate.AllocationChange, ok bool, err error) {
	defer rows.Close()
	for rows.Next() {
		var rev *int64
		var c climate.AllocationChange
		a := &c.Allocation
		var removed, preemptible *bool
		var id, reservation, lease, resource *string
		var start, end *time.Time
		var slots, vcpus, memory, disk *int
		if err := rows.Scan(&inventory, &allocation, &ok, &rev, &removed, &id, &reservation, &lease, &resource, &start, &end,
			&slots, &vcpus, &memory, &disk, &preemptible); err != nil {
			return 0, 0, nil, false, dbError(err)
		}
		if rev == nil { // the counters' row: no entries
			continue
		}
		c.Revision, c.Removed, a.Preemptible = *rev, *removed, *preemptible
		a.ID, a.ReservationID, a.LeaseID, a.ResourceID = *id, *reservation, *lease, *resource
		a.Start, a.End = fromTS(*start), fromTS(*end)
		a.Slots, a.Size.VCPUs, a.Size.MemoryMB, a.Size.DiskGB = *slots, *vcpus, *memory, *disk
		changes = append(changes, c)
	}
	if err := rows.Err(); err != nil {
		return 0, 0, nil, false, dbError(err)
	}
	if !ok {
		changes = nil
	}
	return inventory, allocation, changes, ok, nil
}

// UpdateThenChanges implements climate.CommitReader: Update, and ChangesSince(since)
// sent after COMMIT in its round trip, so read in a snapshot that holds the commit's
// stamped revisions. The caller's index catches up with its own commit (and any other
// since its revision) without a read of its own. ok is false when that read failed or
// the log no longer reaches back to since; the write stands either way.
func (s *Store) UpdateThenChanges(ctx context.Context, since func() (int64, bool), fn func(climate.Tx) error) (inventory, allocation int64, changes []climate.AllocationChange, ok bool, err error) {
	r := &writeRequest{Request: groupcommit.Request{Ctx: ctx}, fn: func(t *tx) error { return fn(t) }, since: since}
	if err := s.enqueue(r); err != nil || r.read == nil {
		return 0, 0, nil, false, err
	}
	return r.read.inventory, r.read.allocation, r.read.changes, r.read.ok, nil
}

// PruneAllocationLog deletes the log entries of all but the newest keep revisions and
// returns how many entries it deleted. AllocationChanges then reports ok=false to callers
// that are further behind. Run it now and then (from the leader) to bound the log.
func (s *Store) PruneAllocationLog(ctx context.Context, keep int64) (int64, error) {
	if keep < 0 {
		return 0, errors.New("postgres: PruneAllocationLog: keep must not be negative")
	}
	var deleted int64
	err := s.write(ctx, func(t *tx) error {
		// Holds the revision counter's row (which each commit that logged changes takes
		// for its stamp), so no change is stamped between reading the revision and
		// recording what was pruned.
		if _, err := t.q.Exec(ctx, `SELECT 1 FROM meta WHERE key = 'allocation_revision' FOR UPDATE`); err != nil {
			return dbError(err)
		}
		tag, err := t.q.Exec(ctx, `WITH cut AS (
				SELECT value - $1 AS upto FROM meta WHERE key = 'allocation_revision'),
			pruned AS (
				UPDATE meta SET value = greatest(value, (SELECT upto FROM cut))
				WHERE key = 'allocation_log_pruned')
			DELETE FROM allocation_log WHERE revision <= (SELECT upto FROM cut)`, keep)
		if err != nil {
			return dbError(err)
		}
		deleted = tag.RowsAffected()
		return nil
	})
	return deleted, err
}
