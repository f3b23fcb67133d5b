package sqlite

import (
	"context"

	"climate"
	"climate/sqlcore"
)

// The webhook reads, UpdateWebhook, DeleteWebhook and WebhookDeliveries are sqlcore's.

// InsertWebhook writes a new webhook.
func (t *tx) InsertWebhook(ctx context.Context, w *climate.Webhook) error {
	if err := t.Writable(); err != nil {
		return err
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO webhooks (`+sqlcore.WebhookColumns+`) VALUES `+sqlcore.Placeholders(11),
		dialect.WebhookArgs(w)...)
	if isUnique(err) {
		return climate.Errorf(climate.CodeConflict, "Webhook %s already exists", w.ID)
	}
	return internal(err)
}

// RecordWebhookDelivery upserts d, unless its webhook is gone, then keeps only the
// webhook's WebhookDeliveriesKept latest deliveries.
func (t *tx) RecordWebhookDelivery(ctx context.Context, d *climate.WebhookDelivery) error {
	if err := t.Writable(); err != nil {
		return err
	}
	// The WHERE also keeps SQLite from reading ON CONFLICT as a join constraint.
	res, err := t.q.ExecContext(ctx, `INSERT INTO webhook_deliveries (`+sqlcore.WebhookDeliveryColumns+`)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = ?)
		ON CONFLICT (webhook_id, notification_id) DO UPDATE SET
			seq = excluded.seq, event_type = excluded.event_type, lease_id = excluded.lease_id, status = excluded.status,
			attempts = excluded.attempts, response_code = excluded.response_code, last_error = excluded.last_error,
			first_attempt_at = excluded.first_attempt_at, last_attempt_at = excluded.last_attempt_at`,
		append(dialect.WebhookDeliveryArgs(d), d.WebhookID)...)
	if err != nil {
		return internal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return internal(err) // n == 0: the webhook is gone
	}
	return t.PruneWebhookDeliveries(ctx, d.WebhookID)
}
