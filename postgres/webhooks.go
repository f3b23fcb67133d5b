package postgres

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
	// ON CONFLICT DO NOTHING keeps the transaction usable after a duplicate.
	tag, err := t.q.Exec(ctx, `INSERT INTO webhooks (`+sqlcore.WebhookColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT DO NOTHING`, dialect.WebhookArgs(w)...)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		return climate.Errorf(climate.CodeConflict, "Webhook %s already exists", w.ID)
	}
	return nil
}

// RecordWebhookDelivery upserts d, unless its webhook is gone, then keeps only the
// webhook's WebhookDeliveriesKept latest deliveries. The check locks the webhook's row
// (FOR KEY SHARE), so a concurrent deletion either comes first, and nothing is written,
// or waits for this transaction and then takes the delivery with the webhook.
func (t *tx) RecordWebhookDelivery(ctx context.Context, d *climate.WebhookDelivery) error {
	if err := t.Writable(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, `INSERT INTO webhook_deliveries (`+sqlcore.WebhookDeliveryColumns+`)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = $1 FOR KEY SHARE)
		ON CONFLICT (webhook_id, notification_id) DO UPDATE SET
			seq = EXCLUDED.seq, event_type = EXCLUDED.event_type, lease_id = EXCLUDED.lease_id, status = EXCLUDED.status,
			attempts = EXCLUDED.attempts, response_code = EXCLUDED.response_code, last_error = EXCLUDED.last_error,
			first_attempt_at = EXCLUDED.first_attempt_at, last_attempt_at = EXCLUDED.last_attempt_at`,
		dialect.WebhookDeliveryArgs(d)...)
	if err != nil {
		return dbError(err)
	}
	if tag.RowsAffected() == 0 {
		return nil // the webhook is gone
	}
	return t.PruneWebhookDeliveries(ctx, d.WebhookID)
}
