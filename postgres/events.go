package postgres

import (
	"context"
	"time"

	"climate"
)

// NextEventTime returns the earliest UNDONE event time or IN_PROGRESS claim expiry.
func (t *tx) NextEventTime(ctx context.Context) (time.Time, bool, error) {
	var next *time.Time
	err := t.q.QueryRow(ctx, `SELECT least(
		(SELECT min(time) FROM events WHERE status = 'UNDONE'),
		(SELECT min(claimed_until) FROM events WHERE status = 'IN_PROGRESS'))`).Scan(&next)
	if err != nil {
		return time.Time{}, false, dbError(err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return next.UTC(), true, nil
}

// dueOrder sorts due events by time, then end before before_end before start, then id.
const dueOrder = `ORDER BY time, CASE event_type WHEN 'end_lease' THEN 0 WHEN 'before_end_lease' THEN 1 WHEN 'start_lease' THEN 2 ELSE 3 END, id`

// ClaimDueEvents claims due events. Update serializes writers already, but the claim does
// not rely on it: FOR UPDATE SKIP LOCKED passes over rows another transaction is claiming,
// and under READ COMMITTED a row claimed and committed meanwhile is re-checked against the
// WHERE clause (it is no longer due) before it is locked.
func (t *tx) ClaimDueEvents(ctx context.Context, now, claimUntil time.Time, limit int) ([]climate.Event, error) {
	if err := t.writable(); err != nil {
		return nil, err
	}
	rows, err := t.q.Query(ctx, `WITH due AS (
			SELECT id FROM events
			WHERE (status = 'UNDONE' AND time <= $2) OR (status = 'IN_PROGRESS' AND claimed_until <= $2)
			`+dueOrder+` LIMIT $3
			FOR UPDATE SKIP LOCKED)
		UPDATE events e SET status = 'IN_PROGRESS', claimed_until = $1, updated_at = $2
		FROM due WHERE e.id = due.id
		RETURNING e.id, e.lease_id, e.event_type, e.time, e.status, e.created_at, e.updated_at`,
		ts(claimUntil), ts(now), limit)
	if err != nil {
		return nil, dbError(err)
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
		return nil, dbError(err)
	}
	climate.SortDue(out)
	return out, nil
}

// scanEvent reads an event row selected as id, lease_id, event_type, time, status,
// created_at, updated_at.
func scanEvent(s scanner) (climate.Event, error) {
	var e climate.Event
	var updated *time.Time
	if err := s.Scan(&e.ID, &e.LeaseID, &e.Type, &e.Time, &e.Status, &e.CreatedAt, &updated); err != nil {
		return e, dbError(err)
	}
	e.Time, e.CreatedAt, e.UpdatedAt = fromTS(e.Time), fromTS(e.CreatedAt), fromNullTS(updated)
	return e, nil
}
