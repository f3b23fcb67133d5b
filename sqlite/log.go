package sqlite

import (
	"context"

	"climate"
)

var _ climate.AllocationLog = (*tx)(nil)

// logSlots is the size of the allocation_log ring (0003_allocation_log.sql): it holds the
// changes of the newest logSlots revisions.
const logSlots = 10000

// AllocationChanges returns the logged allocation changes after since. ok is false when
// since is below what the log holds: revisions made before the log existed (its floor) or
// overwritten in the ring.
func (t *tx) AllocationChanges(ctx context.Context, since int64) ([]climate.AllocationChange, bool, error) {
	var floor, rev int64
	if err := t.q.QueryRowContext(ctx, `SELECT (SELECT value FROM meta WHERE key = 'allocation_log_floor'),
		(SELECT value FROM meta WHERE key = 'allocation_revision')`).Scan(&floor, &rev); err != nil {
		return nil, false, internal(err)
	}
	if since < max(floor, rev-logSlots) {
		return nil, false, nil
	}
	if since >= rev {
		return nil, true, nil
	}
	// Revisions since+1 … rev sit in consecutive slots, which may wrap past the ring's end.
	lo, hi, lo2, hi2 := (since+1)%logSlots, rev%logSlots, int64(1), int64(0)
	if lo > hi {
		hi, lo2, hi2 = logSlots-1, 0, hi
	}
	rows, err := t.q.QueryContext(ctx, `SELECT revision, added, id, reservation_id, lease_id, resource_id, start_at, end_at,
		slots, vcpus, memory_mb, disk_gb, preemptible
		FROM allocation_log WHERE (slot BETWEEN ? AND ? OR slot BETWEEN ? AND ?) AND revision > ?
		ORDER BY revision, added`, lo, hi, lo2, hi2, since)
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
