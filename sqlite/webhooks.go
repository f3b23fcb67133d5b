package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"climate"
)

const webhookColumns = `id, project_id, all_projects, user_id, url, event_types, secret, enabled, disabled_reason,
	created_at, updated_at`

func webhookNotFound(id string) error {
	return climate.Errorf(climate.CodeNotFound, "Webhook %s not found", id)
}

// eventTypes encodes a webhook's event types as a JSON array; nil and empty are both "[]".
func eventTypes(types []string) string {
	if len(types) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(types) // cannot fail for strings
	return string(b)
}

// parseEventTypes decodes eventTypes' encoding; an empty list comes back nil.
func parseEventTypes(s string) ([]string, error) {
	var types []string
	if err := json.Unmarshal([]byte(s), &types); err != nil {
		return nil, fmt.Errorf("webhook event types %q: %w", s, err)
	}
	if len(types) == 0 {
		return nil, nil
	}
	return types, nil
}

// InsertWebhook writes a new webhook.
func (t *tx) InsertWebhook(ctx context.Context, w *climate.Webhook) error {
	if err := t.writable(); err != nil {
		return err
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO webhooks (`+webhookColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.ProjectID, w.AllProjects, w.UserID, w.URL, eventTypes(w.EventTypes), w.Secret, w.Enabled, w.DisabledReason,
		micros(w.CreatedAt), nullMicros(w.UpdatedAt))
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Webhook %s already exists", w.ID)
	}
	return internal(err)
}

// GetWebhook returns one webhook.
func (t *tx) GetWebhook(ctx context.Context, id string) (*climate.Webhook, error) {
	ws, err := t.loadWebhooks(ctx, `WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		return nil, webhookNotFound(id)
	}
	return &ws[0], nil
}

// ListWebhooks returns the webhooks of projectID (all of them when it is empty) by creation
// time, then id.
func (t *tx) ListWebhooks(ctx context.Context, projectID string) ([]climate.Webhook, error) {
	if projectID == "" {
		return t.loadWebhooks(ctx, "")
	}
	return t.loadWebhooks(ctx, `WHERE project_id = ?`, projectID)
}

func (t *tx) loadWebhooks(ctx context.Context, where string, args ...any) ([]climate.Webhook, error) {
	rows, err := t.q.QueryContext(ctx, `SELECT `+webhookColumns+` FROM webhooks `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	var out []climate.Webhook
	for rows.Next() {
		var w climate.Webhook
		var types string
		var created int64
		var updated sql.NullInt64
		if err := rows.Scan(&w.ID, &w.ProjectID, &w.AllProjects, &w.UserID, &w.URL, &types, &w.Secret, &w.Enabled,
			&w.DisabledReason, &created, &updated); err != nil {
			return nil, internal(err)
		}
		if w.EventTypes, err = parseEventTypes(types); err != nil {
			return nil, internal(err)
		}
		w.CreatedAt, w.UpdatedAt = fromMicros(created), fromNullMicros(updated)
		out = append(out, w)
	}
	return out, internal(rows.Err())
}

// UpdateWebhook rewrites a webhook's URL, event types, enabled state, disabled reason and
// UpdatedAt.
func (t *tx) UpdateWebhook(ctx context.Context, w *climate.Webhook) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `UPDATE webhooks SET url = ?, event_types = ?, enabled = ?, disabled_reason = ?, updated_at = ?
		WHERE id = ?`, w.URL, eventTypes(w.EventTypes), w.Enabled, w.DisabledReason, nullMicros(w.UpdatedAt), w.ID)
	return webhookAffected(res, err, w.ID)
}

// DeleteWebhook deletes a webhook; its deliveries cascade.
func (t *tx) DeleteWebhook(ctx context.Context, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ?`, id)
	return webhookAffected(res, err, id)
}

// webhookAffected turns a write to webhook id that changed no row into not found.
func webhookAffected(res sql.Result, err error, id string) error {
	if err != nil {
		return internal(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return internal(err)
	}
	if n == 0 {
		return webhookNotFound(id)
	}
	return nil
}

// RecordWebhookDelivery upserts d, unless its webhook is gone, then keeps only the
// webhook's WebhookDeliveriesKept latest deliveries (the index on (webhook_id, seq) finds
// the boundary with one seek).
func (t *tx) RecordWebhookDelivery(ctx context.Context, d *climate.WebhookDelivery) error {
	if err := t.writable(); err != nil {
		return err
	}
	// The WHERE also keeps SQLite from reading ON CONFLICT as a join constraint.
	res, err := t.q.ExecContext(ctx, `INSERT INTO webhook_deliveries (webhook_id, notification_id, seq, event_type, lease_id,
			status, attempts, response_code, last_error, first_attempt_at, last_attempt_at)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = ?)
		ON CONFLICT (webhook_id, notification_id) DO UPDATE SET
			seq = excluded.seq, event_type = excluded.event_type, lease_id = excluded.lease_id, status = excluded.status,
			attempts = excluded.attempts, response_code = excluded.response_code, last_error = excluded.last_error,
			first_attempt_at = excluded.first_attempt_at, last_attempt_at = excluded.last_attempt_at`,
		d.WebhookID, d.NotificationID, d.Seq, d.EventType, d.LeaseID, d.Status, d.Attempts, d.ResponseCode, d.LastError,
		nullMicros(d.FirstAttemptAt), nullMicros(d.LastAttemptAt), d.WebhookID)
	if err != nil {
		return internal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return internal(err) // n == 0: the webhook is gone
	}
	_, err = t.q.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = ?1 AND seq <
		(SELECT seq FROM webhook_deliveries WHERE webhook_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)`,
		d.WebhookID, climate.WebhookDeliveriesKept-1)
	return internal(err)
}

// WebhookDeliveries returns a webhook's latest deliveries, highest Seq first.
func (t *tx) WebhookDeliveries(ctx context.Context, webhookID string, limit int) ([]climate.WebhookDelivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := t.q.QueryContext(ctx, `SELECT notification_id, seq, event_type, lease_id, status, attempts, response_code,
		last_error, first_attempt_at, last_attempt_at
		FROM webhook_deliveries WHERE webhook_id = ? ORDER BY seq DESC LIMIT ?`, webhookID, limit)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	var out []climate.WebhookDelivery
	for rows.Next() {
		d := climate.WebhookDelivery{WebhookID: webhookID}
		var first, last sql.NullInt64
		if err := rows.Scan(&d.NotificationID, &d.Seq, &d.EventType, &d.LeaseID, &d.Status, &d.Attempts, &d.ResponseCode,
			&d.LastError, &first, &last); err != nil {
			return nil, internal(err)
		}
		d.FirstAttemptAt, d.LastAttemptAt = fromNullMicros(first), fromNullMicros(last)
		out = append(out, d)
	}
	return out, internal(rows.Err())
}
