package sqlcore

import (
	"context"
	"encoding/json"
	"fmt"

	"climate"
)

// WebhookColumns are the columns of a webhook row, in WebhookArgs' order.
const WebhookColumns = `id, project_id, all_projects, user_id, url, event_types, secret, enabled, disabled_reason,
	created_at, updated_at`

func webhookNotFound(id string) error {
	return climate.Errorf(climate.CodeNotFound, "Webhook %s not found", id)
}

// WebhookArgs are w's WebhookColumns.
func (d *Dialect) WebhookArgs(w *climate.Webhook) []any {
	return []any{w.ID, w.ProjectID, w.AllProjects, w.UserID, w.URL, eventTypes(w.EventTypes), w.Secret, w.Enabled, w.DisabledReason,
		d.Time(w.CreatedAt), d.NullTime(w.UpdatedAt)}
}

// WebhookDeliveryColumns are the columns of a delivery row, in WebhookDeliveryArgs' order.
const WebhookDeliveryColumns = `webhook_id, notification_id, seq, event_type, lease_id,
	status, attempts, response_code, last_error, first_attempt_at, last_attempt_at`

// WebhookDeliveryArgs are d's WebhookDeliveryColumns.
func (d *Dialect) WebhookDeliveryArgs(w *climate.WebhookDelivery) []any {
	return []any{w.WebhookID, w.NotificationID, w.Seq, w.EventType, w.LeaseID, w.Status, w.Attempts, w.ResponseCode, w.LastError,
		d.NullTime(w.FirstAttemptAt), d.NullTime(w.LastAttemptAt)}
}

// eventTypes encodes a webhook's event types as a JSON array; nil and empty are both "[]".
func eventTypes(types []string) string {
	if len(types) == 0 {
		return "[]"
	}
	return JSONList(types)
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

// GetWebhook returns one webhook.
func (t *Tx) GetWebhook(ctx context.Context, id string) (*climate.Webhook, error) {
	ws, err := t.loadWebhooks(ctx, `WHERE id = ?`, id)
	return first(ws, err, func() error { return webhookNotFound(id) })
}

// ListWebhooks returns the webhooks of projectID (all of them when it is empty) by creation
// time, then id.
func (t *Tx) ListWebhooks(ctx context.Context, projectID string) ([]climate.Webhook, error) {
	if projectID == "" {
		return t.loadWebhooks(ctx, "")
	}
	return t.loadWebhooks(ctx, `WHERE project_id = ?`, projectID)
}

func (t *Tx) loadWebhooks(ctx context.Context, where string, args ...any) ([]climate.Webhook, error) {
	return list(ctx, t, func(w *climate.Webhook) ([]any, func() error) {
		var types string
		return []any{&w.ID, &w.ProjectID, &w.AllProjects, &w.UserID, &w.URL, &types, &w.Secret, &w.Enabled,
				&w.DisabledReason, ScanTime(&w.CreatedAt), ScanTime(&w.UpdatedAt)},
			func() (err error) {
				w.EventTypes, err = parseEventTypes(types)
				return err
			}
	}, `SELECT `+WebhookColumns+` FROM webhooks `+where+` ORDER BY created_at, id`, args...)
}

// UpdateWebhook rewrites a webhook's URL, event types, enabled state, disabled reason and
// UpdatedAt.
func (t *Tx) UpdateWebhook(ctx context.Context, w *climate.Webhook) error {
	if err := t.Writable(); err != nil {
		return err
	}
	n, err := t.Q.Exec(ctx, `UPDATE webhooks SET url = ?, event_types = ?, enabled = ?, disabled_reason = ?, updated_at = ?
		WHERE id = ?`, w.URL, eventTypes(w.EventTypes), w.Enabled, w.DisabledReason, t.D.NullTime(w.UpdatedAt), w.ID)
	return t.affected(n, err, func() error { return webhookNotFound(w.ID) })
}

// DeleteWebhook deletes a webhook; its deliveries cascade.
func (t *Tx) DeleteWebhook(ctx context.Context, id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	n, err := t.Q.Exec(ctx, `DELETE FROM webhooks WHERE id = ?`, id)
	return t.affected(n, err, func() error { return webhookNotFound(id) })
}

// PruneWebhookDeliveries keeps only the webhook's WebhookDeliveriesKept latest
// deliveries (the index on (webhook_id, seq) finds the boundary with one seek).
func (t *Tx) PruneWebhookDeliveries(ctx context.Context, webhookID string) error {
	_, err := t.Q.Exec(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = ?1 AND seq <
		(SELECT seq FROM webhook_deliveries WHERE webhook_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)`,
		webhookID, climate.WebhookDeliveriesKept-1)
	return t.D.Err(err)
}

// WebhookDeliveries returns a webhook's latest deliveries, highest Seq first.
func (t *Tx) WebhookDeliveries(ctx context.Context, webhookID string, limit int) ([]climate.WebhookDelivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	return list(ctx, t, func(d *climate.WebhookDelivery) ([]any, func() error) {
		d.WebhookID = webhookID // on every row: no scan writes it
		return []any{&d.NotificationID, &d.Seq, &d.EventType, &d.LeaseID, &d.Status, &d.Attempts, &d.ResponseCode,
			&d.LastError, ScanTime(&d.FirstAttemptAt), ScanTime(&d.LastAttemptAt)}, nil
	}, `SELECT notification_id, seq, event_type, lease_id, status, attempts, response_code,
		last_error, first_attempt_at, last_attempt_at
		FROM webhook_deliveries WHERE webhook_id = ? ORDER BY seq DESC LIMIT ?`, webhookID, limit)
}
