package sqlite

import (
	"context"
	"database/sql"
	"time"

	"climate"
)

// NextEventTime returns the earliest UNDONE event time or IN_PROGRESS claim expiry.
func (t *tx) NextEventTime(ctx context.Context) (time.Time, bool, error) {
	var next sql.NullInt64
	err := t.q.QueryRowContext(ctx, `SELECT min(at) FROM (
		SELECT min(time) AS at FROM events WHERE status = 'UNDONE'
		UNION ALL
		SELECT min(claimed_until) FROM events WHERE status = 'IN_PROGRESS')`).Scan(&next)
	if err != nil {
		return time.Time{}, false, internal(err)
	}
	if !next.Valid {
		return time.Time{}, false, nil
	}
	return fromMicros(next.Int64), true, nil
}

// dueOrder sorts due events by time, then end before before_end before start, then id.
const dueOrder = `ORDER BY time, CASE event_type WHEN 'end_lease' THEN 0 WHEN 'before_end_lease' THEN 1 WHEN 'start_lease' THEN 2 ELSE 3 END, id`

// ClaimDueEvents claims due events; it runs in the write transaction, so it is atomic.
func (t *tx) ClaimDueEvents(ctx context.Context, now, claimUntil time.Time, limit int) ([]climate.Event, error) {
	if err := t.writable(); err != nil {
		return nil, err
	}
	rows, err := t.q.QueryContext(ctx, `UPDATE events SET status = 'IN_PROGRESS', claimed_until = ?, updated_at = ?
		WHERE id IN (SELECT id FROM events
			WHERE (status = 'UNDONE' AND time <= ?) OR (status = 'IN_PROGRESS' AND claimed_until <= ?)
			`+dueOrder+` LIMIT ?)
		RETURNING id, lease_id, event_type, time, status, created_at, updated_at`,
		micros(claimUntil), micros(now), micros(now), micros(now), limit)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	var out []climate.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, internal(err)
	}
	climate.SortDue(out)
	return out, nil
}

// scanEvent reads an event row selected as id, lease_id, event_type, time, status,
// created_at, updated_at.
func scanEvent(s scanner) (climate.Event, error) {
	var e climate.Event
	var at, created int64
	var updated sql.NullInt64
	if err := s.Scan(&e.ID, &e.LeaseID, &e.Type, &at, &e.Status, &created, &updated); err != nil {
		return e, internal(err)
	}
	e.Time, e.CreatedAt, e.UpdatedAt = fromMicros(at), fromMicros(created), fromNullMicros(updated)
	return e, nil
}
