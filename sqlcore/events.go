package sqlcore

import (
	"context"
	"time"
)

// DueOrder sorts due events by time, then end before before_end before start, then id.
const DueOrder = `ORDER BY time, CASE event_type WHEN 'end_lease' THEN 0 WHEN 'before_end_lease' THEN 1 WHEN 'start_lease' THEN 2 ELSE 3 END, id`

// RenewClaims extends owner's claims.
func (t *Tx) RenewClaims(ctx context.Context, owner string, claimUntil time.Time) (int, error) {
	if err := t.Writable(); err != nil {
		return 0, err
	}
	n, err := t.Q.Exec(ctx, `UPDATE events SET claimed_until = ? WHERE status = 'IN_PROGRESS' AND claimed_by = ?`,
		t.D.Time(claimUntil), owner)
	if err != nil {
		return 0, t.D.Err(err)
	}
	return int(n), nil
}

// ReleaseClaims hands every claimed event back.
func (t *Tx) ReleaseClaims(ctx context.Context) (int, error) {
	if err := t.Writable(); err != nil {
		return 0, err
	}
	n, err := t.Q.Exec(ctx, `UPDATE events SET status = 'UNDONE', claimed_by = NULL, claimed_until = NULL WHERE status = 'IN_PROGRESS'`)
	if err != nil {
		return 0, t.D.Err(err)
	}
	return int(n), nil
}
