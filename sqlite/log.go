package sqlite

import (
	"context"

	"climate"
)

var _ climate.AllocationLog = (*tx)(nil)

// AllocationChanges returns the logged allocation changes after since (the allocation_log
// table, filled by the allocation triggers). ok is false when since is below the log's
// floor: those changes were made before the log existed or have been pruned.
func (t *tx) AllocationChanges(ctx context.Context, since int64) ([]climate.AllocationChange, bool, error) {
	var floor int64
	if err := t.q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'allocation_log_floor'`).Scan(&floor); err != nil {
		return nil, false, internal(err)
	}
	if since < floor {
		return nil, false, nil
	}
	rows, err := t.q.QueryContext(ctx, `SELECT revision, added, id, reservation_id, lease_id, resource_id, start_at, end_at
		FROM allocation_log WHERE revision > ? ORDER BY revision, added`, since)
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
		if err := rows.Scan(&c.Revision, &added, &a.ID, &a.ReservationID, &a.LeaseID, &a.ResourceID, &start, &end); err != nil {
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
