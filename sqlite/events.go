package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"climate"
	"climate/sqlcore"
)

// RenewClaims and ReleaseClaims are sqlcore's.

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

// ClaimDueEvents claims due events; it runs in the write transaction, so it is atomic.
func (t *tx) ClaimDueEvents(ctx context.Context, owner string, now, claimUntil time.Time, limit int) ([]climate.Event, error) {
	if err := t.Writable(); err != nil {
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
	rows, err := t.Q.Query(ctx, `UPDATE events SET status = 'IN_PROGRESS', claimed_by = ?, claimed_until = ?, updated_at = ?
		WHERE id IN (SELECT id FROM events
			WHERE (status = 'UNDONE' AND time <= ?) OR (status = 'IN_PROGRESS' AND claimed_until <= ?)
			`+sqlcore.DueOrder+` LIMIT ?)
		RETURNING `+sqlcore.EventColumns,
		owner, micros(claimUntil), micros(now), micros(now), micros(now), limit)
	if err != nil {
		return nil, internal(err)
	}
	out, err := sqlcore.Collect(dialect, rows, sqlcore.EventRow)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].TakenOver = lapsed[out[i].ID]
	}
	climate.SortDue(out)
	return out, nil
}
