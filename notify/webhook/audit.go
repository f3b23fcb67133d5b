package webhook

import (
	"context"
	"time"

	"climate"
)

// audit records a webhook change in tx through climate.Audit, the one implementation
// every write path uses. The summary never holds the secret, and the URL is shown
// without its query or user information, where a token may hide.
func audit(ctx context.Context, tx climate.Tx, by climate.Auditor, action string, before, after *climate.Webhook, now time.Time) error {
	w := after
	if w == nil {
		w = before
	}
	target := climate.AuditTarget{Type: "webhook", ID: w.ID, ProjectID: w.ProjectID}
	return climate.Audit(ctx, tx, by, action, target, webhookSummary(before), webhookSummary(after), now)
}

func webhookSummary(w *climate.Webhook) map[string]any {
	if w == nil {
		return nil
	}
	types := w.EventTypes
	if types == nil {
		types = []string{}
	}
	s := map[string]any{"url": climate.AuditURL(w.URL), "event_types": types, "enabled": w.Enabled, "all_projects": w.AllProjects}
	if w.DisabledReason != "" {
		s["disabled_reason"] = w.DisabledReason
	}
	return s
}
