package postgres

import (
	"context"
	"time"

	"climate"
	"climate/sqlcore"
)

// RenewClaims and ReleaseClaims are sqlcore's (the renewal changes neither time nor
// status, so it wakes no engine; the release's NOTIFY trigger wakes the engines).

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

// ClaimDueEvents claims due events. Update serializes writers already, but the claim does
// not rely on it: FOR UPDATE SKIP LOCKED passes over rows another transaction is claiming,
// and under READ COMMITTED a row claimed and committed meanwhile is re-checked against the
// WHERE clause (it is no longer due) before it is locked.
func (t *tx) ClaimDueEvents(ctx context.Context, owner string, now, claimUntil time.Time, limit int) ([]climate.Event, error) {
	if err := t.Writable(); err != nil {
		return nil, err
	}
	rows, err := t.q.Query(ctx, `WITH due AS (
			SELECT id AS due_id, status = 'IN_PROGRESS' AS taken_over FROM events
			WHERE (status = 'UNDONE' AND time <= $3) OR (status = 'IN_PROGRESS' AND claimed_until <= $3)
			`+sqlcore.DueOrder+` LIMIT $4
			FOR UPDATE SKIP LOCKED)
		UPDATE events e SET status = 'IN_PROGRESS', claimed_by = $1, claimed_until = $2, updated_at = $3
		FROM due WHERE e.id = due.due_id
		RETURNING `+sqlcore.EventColumns+`, due.taken_over`,
		owner, ts(claimUntil), ts(now), limit)
	if err != nil {
		return nil, dbError(err)
	}
	out, err := sqlcore.Collect(dialect, rows, func(e *climate.Event) ([]any, func() error) {
		dest, after := sqlcore.EventRow(e)
		return append(dest, &e.TakenOver), after
	})
	if err != nil {
		return nil, err
	}
	climate.SortDue(out)
	return out, nil
}
