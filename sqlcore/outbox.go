package sqlcore

import (
	"context"

	"climate"
)

// DeliveryCursor returns a destination's cursor.
func (t *Tx) DeliveryCursor(ctx context.Context, destination string) (climate.DeliveryCursor, bool, error) {
	c := climate.DeliveryCursor{Destination: destination}
	err := t.Q.QueryRow(ctx, `SELECT position, attempts, next_attempt, last_error, updated_at
		FROM delivery_cursors WHERE destination = ?`, destination).
		Scan(&c.Position, &c.Attempts, ScanTime(&c.NextAttempt), &c.LastError, ScanTime(&c.UpdatedAt))
	if IsNoRows(err) {
		return c, false, nil
	}
	if err != nil {
		return c, false, t.D.Err(err)
	}
	return c, true, nil
}

// DeleteDeliveryCursor forgets a destination's cursor; none is not an error.
func (t *Tx) DeleteDeliveryCursor(ctx context.Context, destination string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	_, err := t.Q.Exec(ctx, `DELETE FROM delivery_cursors WHERE destination = ?`, destination)
	return t.D.Err(err)
}

// CountLeases counts leases by status, for metrics, without loading them.
func (t *Tx) CountLeases(ctx context.Context) (map[climate.LeaseStatus]int, error) {
	rows, err := t.Q.Query(ctx, `SELECT status, count(*) FROM leases GROUP BY status`)
	if err != nil {
		return nil, t.D.Err(err)
	}
	defer rows.Close()
	out := map[climate.LeaseStatus]int{}
	for rows.Next() {
		var s climate.LeaseStatus
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, t.D.Err(err)
		}
		out[s] = n
	}
	if err := rows.Err(); err != nil {
		return nil, t.D.Err(err)
	}
	return out, nil
}
