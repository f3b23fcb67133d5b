package postgres

import (
	"context"

	"climate"
)

// AddNotification writes n to the outbox. n.Seq, its position, is given at commit (in
// commit order, doc.go), so it is 0 here.
func (t *tx) AddNotification(ctx context.Context, n *climate.Notification) error {
	if err := t.Writable(); err != nil {
		return err
	}
	// Held back: it goes with the transaction's next statement or its COMMIT (pipe.go).
	t.p.hold(nil, `INSERT INTO notifications (id, event_type, lease_id, project_id, payload, error, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		n.ID, n.EventType, n.LeaseID, n.ProjectID, n.Payload, n.Error, ts(n.CreatedAt))
	return nil
}

// Notifications returns up to limit notifications after the given Seq, in Seq order.
func (t *tx) Notifications(ctx context.Context, after int64, limit int) ([]climate.Notification, error) {
	rows, err := t.q.Query(ctx, `SELECT position, id, event_type, lease_id, project_id, payload, error, created_at
		FROM notifications WHERE position > $1 ORDER BY position LIMIT $2`, after, limit)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []climate.Notification
	for rows.Next() {
		var n climate.Notification
		if err := rows.Scan(&n.Seq, &n.ID, &n.EventType, &n.LeaseID, &n.ProjectID, &n.Payload, &n.Error, &n.CreatedAt); err != nil {
			return nil, dbError(err)
		}
		n.CreatedAt = fromTS(n.CreatedAt)
		out = append(out, n)
	}
	return out, dbError(rows.Err())
}

// LastNotificationSeq returns the highest Seq written.
func (t *tx) LastNotificationSeq(ctx context.Context) (int64, error) {
	var seq *int64
	if err := t.q.QueryRow(ctx, `SELECT max(position) FROM notifications`).Scan(&seq); err != nil || seq == nil {
		return 0, dbError(err)
	}
	return *seq, nil
}

// SaveDeliveryCursor writes a cursor; its position never moves back.
func (t *tx) SaveDeliveryCursor(ctx context.Context, c *climate.DeliveryCursor) error {
	if err := t.Writable(); err != nil {
		return err
	}
	_, err := t.q.Exec(ctx, `INSERT INTO delivery_cursors AS d (destination, position, attempts, next_attempt, last_error, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (destination) DO UPDATE SET
			attempts = CASE WHEN EXCLUDED.position >= d.position THEN EXCLUDED.attempts ELSE d.attempts END,
			next_attempt = CASE WHEN EXCLUDED.position >= d.position THEN EXCLUDED.next_attempt ELSE d.next_attempt END,
			last_error = CASE WHEN EXCLUDED.position >= d.position THEN EXCLUDED.last_error ELSE d.last_error END,
			position = greatest(d.position, EXCLUDED.position),
			updated_at = EXCLUDED.updated_at`,
		c.Destination, c.Position, c.Attempts, nullTS(c.NextAttempt), c.LastError, ts(c.UpdatedAt))
	return dbError(err)
}

// DeliveryCursor and DeleteDeliveryCursor are sqlcore's.
