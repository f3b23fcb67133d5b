package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"climate"
)

const webhookColumns = `id, project_id, all_projects, user_id, url, event_types, secret, enabled, disabled_reason,
	created_at, updated_at`

func webhookNotFound(id string) error {
	return climate.Errorf(climate.CodeNotFound, "Webhook %s not found", id)
}

// eventTypes encodes a webhook's event types as a JSON array, as the SQLite store does;
// nil and empty are both "[]".
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
	// ON CONFLICT DO NOTHING keeps the transaction usable after a duplicate.
	tag, err := t.q.Exec(ctx, `INSERT INTO webhooks (`+webhookColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT DO NOTHING`,
		w.ID, w.ProjectID, w.AllProjects, w.UserID, w.URL, eventTypes(w.EventTypes), w.Secret, w.Enabled, w.DisabledReason,
		ts(w.CreatedAt), nullTS(w.UpdatedAt))
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		return climate.Errorf(climate.CodeConflict, "Webhook %s already exists", w.ID)
	}
	return nil
}

// GetWebhook returns one webhook.
func (t *tx) GetWebhook(ctx context.Context, id string) (*climate.Webhook, error) {
	ws, err := t.loadWebhooks(ctx, `WHERE id = $1`, id)
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
	return t.loadWebhooks(ctx, `WHERE project_id = $1`, projectID)
}

func (t *tx) loadWebhooks(ctx context.Context, where string, args ...any) ([]climate.Webhook, error) {
	rows, err := t.q.Query(ctx, `SELECT `+webhookColumns+` FROM webhooks `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []climate.Webhook
	for rows.Next() {
		var w climate.Webhook
		var types string
		var updated *time.Time
		if err := rows.Scan(&w.ID, &w.ProjectID, &w.AllProjects, &w.UserID, &w.URL, &types, &w.Secret, &w.Enabled,
			&w.DisabledReason, &w.CreatedAt, &updated); err != nil {
			return nil, dbError(err)
		}
		if w.EventTypes, err = parseEventTypes(types); err != nil {
			return nil, dbError(err)
		}
		w.CreatedAt, w.UpdatedAt = fromTS(w.CreatedAt), fromNullTS(updated)
		out = append(out, w)
	}
	return out, dbError(rows.Err())
}

// UpdateWebhook rewrites a webhook's URL, event types, enabled state, disabled reason and
// UpdatedAt.
func (t *tx) UpdateWebhook(ctx context.Context, w *climate.Webhook) error {
	if err := t.writable(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, `UPDATE webhooks SET url = $1, event_types = $2, enabled = $3, disabled_reason = $4, updated_at = $5
		WHERE id = $6`, w.URL, eventTypes(w.EventTypes), w.Enabled, w.DisabledReason, nullTS(w.UpdatedAt), w.ID)
	return webhookAffected(tag, err, w.ID)
}

// DeleteWebhook deletes a webhook; its deliveries cascade.
func (t *tx) DeleteWebhook(ctx context.Context, id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, `DELETE FROM webhooks WHERE id = $1`, id)
	return webhookAffected(tag, err, id)
}

// webhookAffected turns a write to webhook id that changed no row into not found.
func webhookAffected(tag pgconn.CommandTag, err error, id string) error {
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		return webhookNotFound(id)
	}
	return nil
}

// RecordWebhookDelivery upserts d, unless its webhook is gone, then keeps only the
// webhook's WebhookDeliveriesKept latest deliveries (the index on (webhook_id, seq) finds
// the boundary with one seek). The check locks the webhook's row (FOR KEY SHARE), so a
// concurrent deletion either comes first, and nothing is written, or waits for this
// transaction and then takes the delivery with the webhook.
func (t *tx) RecordWebhookDelivery(ctx context.Context, d *climate.WebhookDelivery) error {
	if err := t.writable(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, `INSERT INTO webhook_deliveries (webhook_id, notification_id, seq, event_type, lease_id,
			status, attempts, response_code, last_error, first_attempt_at, last_attempt_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = $1 FOR KEY SHARE)
		ON CONFLICT (webhook_id, notification_id) DO UPDATE SET
			seq = EXCLUDED.seq, event_type = EXCLUDED.event_type, lease_id = EXCLUDED.lease_id, status = EXCLUDED.status,
			attempts = EXCLUDED.attempts, response_code = EXCLUDED.response_code, last_error = EXCLUDED.last_error,
			first_attempt_at = EXCLUDED.first_attempt_at, last_attempt_at = EXCLUDED.last_attempt_at`,
		d.WebhookID, d.NotificationID, d.Seq, d.EventType, d.LeaseID, d.Status, d.Attempts, d.ResponseCode, d.LastError,
		nullTS(d.FirstAttemptAt), nullTS(d.LastAttemptAt))
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		return nil // the webhook is gone
	}
	_, err = t.q.Exec(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND seq <
		(SELECT seq FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY seq DESC LIMIT 1 OFFSET $2)`,
		d.WebhookID, climate.WebhookDeliveriesKept-1)
	return dbError(err)
}

// WebhookDeliveries returns a webhook's latest deliveries, highest Seq first.
func (t *tx) WebhookDeliveries(ctx context.Context, webhookID string, limit int) ([]climate.WebhookDelivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := t.q.Query(ctx, `SELECT notification_id, seq, event_type, lease_id, status, attempts, response_code,
		last_error, first_attempt_at, last_attempt_at
		FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY seq DESC LIMIT $2`, webhookID, limit)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []climate.WebhookDelivery
	for rows.Next() {
		d := climate.WebhookDelivery{WebhookID: webhookID}
		var first, last *time.Time
		if err := rows.Scan(&d.NotificationID, &d.Seq, &d.EventType, &d.LeaseID, &d.Status, &d.Attempts, &d.ResponseCode,
			&d.LastError, &first, &last); err != nil {
			return nil, dbError(err)
		}
		d.FirstAttemptAt, d.LastAttemptAt = fromNullTS(first), fromNullTS(last)
		out = append(out, d)
	}
	return out, dbError(rows.Err())
}
