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
func (t *tx) ClaimDueEvents(ctx context.Context, owner string, now, claimUntil time.Time, limit int) ([]climate.Event, error) {
	if err := t.writable(); err != nil {
		return nil, err
	}
	rows, err := t.q.Query(ctx, `WITH due AS (
			SELECT id AS due_id, status = 'IN_PROGRESS' AS taken_over FROM events
			WHERE (status = 'UNDONE' AND time <= $3) OR (status = 'IN_PROGRESS' AND claimed_until <= $3)
			`+dueOrder+` LIMIT $4
			FOR UPDATE SKIP LOCKED)
		UPDATE events e SET status = 'IN_PROGRESS', claimed_by = $1, claimed_until = $2, updated_at = $3
		FROM due WHERE e.id = due.due_id
		RETURNING `+eventColumns+`, due.taken_over`,
		owner, ts(claimUntil), ts(now), limit)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []climate.Event
	for rows.Next() {
		var takenOver bool
		e, err := scanEvent(extraColumn{rows, &takenOver})
		if err != nil {
			return nil, err
		}
		e.TakenOver = takenOver
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err)
	}
	climate.SortDue(out)
	return out, nil
}

// RenewClaims extends owner's claims. The update changes neither time nor status, so it
// wakes no engine.
func (t *tx) RenewClaims(ctx context.Context, owner string, claimUntil time.Time) (int, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	tag, err := t.q.Exec(ctx, `UPDATE events SET claimed_until = $1 WHERE status = 'IN_PROGRESS' AND claimed_by = $2`,
		ts(claimUntil), owner)
	if err != nil {
		return 0, dbError(err)
	}
	return int(tag.RowsAffected()), nil
}

// ReleaseClaims hands every claimed event back; the NOTIFY trigger wakes the engines.
func (t *tx) ReleaseClaims(ctx context.Context) (int, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	tag, err := t.q.Exec(ctx, `UPDATE events SET status = 'UNDONE', claimed_by = NULL, claimed_until = NULL WHERE status = 'IN_PROGRESS'`)
	if err != nil {
		return 0, dbError(err)
	}
	return int(tag.RowsAffected()), nil
}

// extraColumn scans one more column after those its scanner's caller asks for.
type extraColumn struct {
	scanner
	extra any
}

func (x extraColumn) Scan(dest ...any) error { return x.scanner.Scan(append(dest, x.extra)...) }

// eventColumns are the columns scanEvent reads, in order.
const eventColumns = `id, lease_id, event_type, time, status, claimed_by, created_at, updated_at`

// scanEvent reads an event row selected as eventColumns.
func scanEvent(s scanner) (climate.Event, error) {
	var e climate.Event
	var updated *time.Time
	var claimedBy *string
	if err := s.Scan(&e.ID, &e.LeaseID, &e.Type, &e.Time, &e.Status, &claimedBy, &e.CreatedAt, &updated); err != nil {
		return e, dbError(err)
	}
	e.Time, e.CreatedAt, e.UpdatedAt = fromTS(e.Time), fromTS(e.CreatedAt), fromNullTS(updated)
	if claimedBy != nil {
		e.ClaimedBy = *claimedBy
	}
	return e, nil
}
