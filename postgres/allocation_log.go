package postgres

import (
	"context"
	"errors"

	"climate"
)

// AllocationChanges returns the logged allocation changes with since < revision, in
// revision order, removals first within a revision. ok is false when entries after since
// were pruned, or when since is ahead of the store (the caller followed another
// database, or one restored from an older backup): the caller must rebuild.
func (t *tx) AllocationChanges(ctx context.Context, since int64) ([]climate.AllocationChange, bool, error) {
	var current, pruned int64
	err := t.q.QueryRow(ctx, `SELECT
		(SELECT value FROM meta WHERE key = 'allocation_revision'),
		(SELECT value FROM meta WHERE key = 'allocation_log_pruned')`).Scan(&current, &pruned)
	if err != nil {
		return nil, false, dbError(err)
	}
	if since < pruned || since > current {
		return nil, false, nil
	}
	rows, err := t.q.Query(ctx, `SELECT revision, removed, allocation_id, reservation_id, lease_id, resource_id, start_at, end_at,
		slots, vcpus, memory_mb, disk_gb, preemptible
		FROM allocation_log WHERE revision > $1 ORDER BY revision, removed DESC, seq`, since)
	if err != nil {
		return nil, false, dbError(err)
	}
	defer rows.Close()
	var out []climate.AllocationChange
	for rows.Next() {
		var c climate.AllocationChange
		a := &c.Allocation
		if err := rows.Scan(&c.Revision, &c.Removed, &a.ID, &a.ReservationID, &a.LeaseID, &a.ResourceID, &a.Start, &a.End,
			&a.Slots, &a.Size.VCPUs, &a.Size.MemoryMB, &a.Size.DiskGB, &a.Preemptible); err != nil {
			return nil, false, dbError(err)
		}
		a.Start, a.End = fromTS(a.Start), fromTS(a.End)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, false, dbError(err)
	}
	return out, true, nil
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
