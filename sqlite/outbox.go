package sqlite

import (
	"context"
	"database/sql"

	"climate"
)

// AddNotification writes n to the outbox, assigning n.Seq.
func (t *tx) AddNotification(ctx context.Context, n *climate.Notification) error {
	if err := t.Writable(); err != nil {
		return err
	}
	err := t.q.QueryRowContext(ctx, `INSERT INTO notifications (id, event_type, lease_id, project_id, payload, error, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
		n.ID, n.EventType, n.LeaseID, n.ProjectID, n.Payload, n.Error, micros(n.CreatedAt)).Scan(&n.Seq)
	return internal(err)
}

// Notifications returns up to limit notifications after the given Seq, in Seq order.
func (t *tx) Notifications(ctx context.Context, after int64, limit int) ([]climate.Notification, error) {
	rows, err := t.q.QueryContext(ctx, `SELECT seq, id, event_type, lease_id, project_id, payload, error, created_at
		FROM notifications WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	var out []climate.Notification
	for rows.Next() {
		var n climate.Notification
		var created int64
		if err := rows.Scan(&n.Seq, &n.ID, &n.EventType, &n.LeaseID, &n.ProjectID, &n.Payload, &n.Error, &created); err != nil {
			return nil, internal(err)
		}
		n.CreatedAt = fromMicros(created)
		out = append(out, n)
	}
	return out, internal(rows.Err())
}

// LastNotificationSeq returns the highest Seq written (AUTOINCREMENT never reuses one).
func (t *tx) LastNotificationSeq(ctx context.Context) (int64, error) {
	var seq sql.NullInt64
	err := t.q.QueryRowContext(ctx, `SELECT max(seq) FROM notifications`).Scan(&seq)
	return seq.Int64, internal(err)
}

// SaveDeliveryCursor writes a cursor; its position never moves back.
func (t *tx) SaveDeliveryCursor(ctx context.Context, c *climate.DeliveryCursor) error {
	if err := t.Writable(); err != nil {
		return err
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO delivery_cursors (destination, position, attempts, next_attempt, last_error, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (destination) DO UPDATE SET
			attempts = CASE WHEN excluded.position >= position THEN excluded.attempts ELSE attempts END,
			next_attempt = CASE WHEN excluded.position >= position THEN excluded.next_attempt ELSE next_attempt END,
			last_error = CASE WHEN excluded.position >= position THEN excluded.last_error ELSE last_error END,
			position = max(position, excluded.position),
			updated_at = excluded.updated_at`,
		c.Destination, c.Position, c.Attempts, nullMicros(c.NextAttempt), c.LastError, micros(c.UpdatedAt))
	return internal(err)
}

// DeliveryCursor and DeleteDeliveryCursor are sqlcore's.
