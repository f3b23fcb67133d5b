package sqlite

import (
	"context"
	"database/sql"
	"errors"
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
func (t *tx) ClaimDueEvents(ctx context.Context, owner string, now, claimUntil time.Time, limit int) ([]climate.Event, error) {
	if err := t.writable(); err != nil {
		return nil, err
	}
	// Lapsed claims (few: a dead or stalled run's) are read first: RETURNING sees only the
	// new row, and TakenOver needs the old status.
	lapsed := map[string]bool{}
	prev, err := t.q.QueryContext(ctx, `SELECT id FROM events WHERE status = 'IN_PROGRESS' AND claimed_until <= ?`, micros(now))
	if err != nil {
		return nil, internal(err)
	}
	for prev.Next() {
		var id string
		if err := prev.Scan(&id); err != nil {
			prev.Close()
			return nil, internal(err)
		}
		lapsed[id] = true
	}
	if err := errors.Join(prev.Err(), prev.Close()); err != nil {
		return nil, internal(err)
	}
	rows, err := t.q.QueryContext(ctx, `UPDATE events SET status = 'IN_PROGRESS', claimed_by = ?, claimed_until = ?, updated_at = ?
		WHERE id IN (SELECT id FROM events
			WHERE (status = 'UNDONE' AND time <= ?) OR (status = 'IN_PROGRESS' AND claimed_until <= ?)
			`+dueOrder+` LIMIT ?)
		RETURNING `+eventColumns,
		owner, micros(claimUntil), micros(now), micros(now), micros(now), limit)
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
		e.TakenOver = lapsed[e.ID]
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, internal(err)
	}
	climate.SortDue(out)
	return out, nil
}

// RenewClaims extends owner's claims.
func (t *tx) RenewClaims(ctx context.Context, owner string, claimUntil time.Time) (int, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	res, err := t.q.ExecContext(ctx, `UPDATE events SET claimed_until = ? WHERE status = 'IN_PROGRESS' AND claimed_by = ?`,
		micros(claimUntil), owner)
	return affected(res, err)
}

// ReleaseClaims hands every claimed event back.
func (t *tx) ReleaseClaims(ctx context.Context) (int, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	res, err := t.q.ExecContext(ctx, `UPDATE events SET status = 'UNDONE', claimed_by = NULL, claimed_until = NULL WHERE status = 'IN_PROGRESS'`)
	return affected(res, err)
}

func affected(res sql.Result, err error) (int, error) {
	if err != nil {
		return 0, internal(err)
	}
	n, err := res.RowsAffected()
	return int(n), internal(err)
}

// eventColumns are the columns scanEvent reads, in order.
const eventColumns = `id, lease_id, event_type, time, status, claimed_by, created_at, updated_at`

// scanEvent reads an event row selected as eventColumns.
func scanEvent(s scanner) (climate.Event, error) {
	var e climate.Event
	var at, created int64
	var updated sql.NullInt64
	var claimedBy sql.NullString
	if err := s.Scan(&e.ID, &e.LeaseID, &e.Type, &at, &e.Status, &claimedBy, &created, &updated); err != nil {
		return e, internal(err)
	}
	e.Time, e.CreatedAt, e.UpdatedAt = fromMicros(at), fromMicros(created), fromNullMicros(updated)
	e.ClaimedBy = claimedBy.String
	return e, nil
}
