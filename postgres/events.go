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

// dueEvent is an event due at $1 (the claims' now, whatever its position): undone and
// past its time, or claimed by a claim that lapsed.
const dueEvent = `(status = 'UNDONE' AND time <= $1) OR (status = 'IN_PROGRESS' AND claimed_until <= $1)`

// ClaimDueEvents claims due events. It first locks the rows of the due events' leases, in
// id order, as a write transaction's GetLease does, so a claim never lands between another
// writer's read of a lease and its write, to be overwritten by it; then it claims only
// events of the leases it locked. FOR UPDATE SKIP LOCKED passes over events another claim
// holds, and under READ COMMITTED an event claimed and committed meanwhile is re-checked
// against the WHERE clause (it is no longer due) before it is locked.
func (t *tx) ClaimDueEvents(ctx context.Context, owner string, now, claimUntil time.Time, limit int) ([]climate.Event, error) {
	if err := t.Writable(); err != nil {
		return nil, err
	}
	var leases []string
	err := t.q.QueryRow(ctx, `SELECT coalesce(array_agg(id), '{}') FROM (SELECT id FROM leases WHERE id IN (
			SELECT lease_id FROM events WHERE `+dueEvent+` `+sqlcore.DueOrder+` LIMIT $2)
			ORDER BY id FOR NO KEY UPDATE) AS locked`, ts(now), limit).Scan(&leases)
	if err != nil || len(leases) == 0 {
		return nil, dbError(err)
	}
	rows, err := t.q.Query(ctx, `WITH due AS (
			SELECT id AS due_id, status = 'IN_PROGRESS' AS taken_over FROM events
			WHERE (`+dueEvent+`) AND lease_id = ANY($5)
			`+sqlcore.DueOrder+` LIMIT $4
			FOR UPDATE SKIP LOCKED)
		UPDATE events e SET status = 'IN_PROGRESS', claimed_by = $2, claimed_until = $3, updated_at = $1
		FROM due WHERE e.id = due.due_id
		RETURNING `+sqlcore.EventColumns+`, due.taken_over`,
		ts(now), owner, ts(claimUntil), limit, leases)
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
