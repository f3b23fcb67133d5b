// Package webhook is Climate's webhook destination: projects subscribe URLs to their
// leases' notifications (Service, the API's climate.WebhookService), and the notification
// worker delivers to them, signed (Sign, Verify) and only where the Guard allows.
package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"climate"
	"climate/http/api"
	"climate/policy"
)

// Service implements climate.WebhookService.
type Service struct {
	Store  climate.Store
	Clock  climate.Clock
	Guard  Guard
	Sender *Sender
	// Notified, when set, is called after a change that delivery must hear of at once (a
	// webhook created or enabled), to wake the worker.
	Notified func()
	// Policy decides who may do what; nil means the default rules, policy.Default().
	Policy climate.Policy
}

// allow checks a policy rule for who on target.
func (s *Service) allow(who climate.Identity, rule string, target climate.Target) error {
	p := s.Policy
	if p == nil {
		p = policy.Default()
	}
	return p.Check(who, rule, target)
}

// Blazar has no webhook policies; these names follow its scheme.
const (
	ruleGet    = "climate:webhooks:get"
	rulePost   = "climate:webhooks:post"
	rulePut    = "climate:webhooks:put"
	ruleDelete = "climate:webhooks:delete"
)

func notFound(id string) error {
	return climate.Errorf(climate.CodeNotFound, "Webhook %s not found.", id)
}

// CreateWebhook checks the request, sends the URL a test delivery (webhook.ping: a URL
// that cannot receive is refused now, not discovered a day later), and subscribes it from
// the next notification on.
func (s *Service) CreateWebhook(ctx context.Context, who climate.Identity, req climate.WebhookRequest) (*climate.Webhook, error) {
	if err := s.allow(who, rulePost, who.OwnTarget()); err != nil {
		return nil, err
	}
	project := req.ProjectID
	switch {
	case req.AllProjects && !who.IsAdmin():
		return nil, climate.Errorf(climate.CodeForbidden, "Only admins may subscribe to every project's notifications (all_projects)")
	case req.AllProjects && project != "":
		return nil, climate.Errorf(climate.CodeInvalid, "Give project_id or all_projects, not both")
	case req.AllProjects:
	case project == "":
		project = who.ProjectID
	case project != who.ProjectID && !who.IsAdmin():
		return nil, climate.Errorf(climate.CodeForbidden, "Only admins may subscribe to the notifications of another project")
	}
	if err := climate.CheckText("project_id", project, climate.MaxNameLength); err != nil {
		return nil, err
	}
	if !req.AllProjects && project == "" {
		return nil, climate.Errorf(climate.CodeInvalid, "Missing parameter project_id: the request's identity has no project")
	}
	types, err := checkEventTypes(req.EventTypes)
	if err != nil {
		return nil, err
	}
	if req.URL == "" {
		return nil, climate.Errorf(climate.CodeInvalid, "Missing parameter url")
	}
	secret := req.Secret
	if secret == "" {
		secret = NewSecret()
	} else if err := checkSecret(secret); err != nil {
		return nil, err
	}
	u, err := s.Guard.CheckURL(ctx, req.URL)
	if err != nil {
		return nil, err
	}
	now := s.Clock.Now().UTC().Truncate(time.Microsecond)
	w := &climate.Webhook{ID: climate.NewID(), ProjectID: project, AllProjects: req.AllProjects, UserID: who.UserID,
		URL: u.String(), EventTypes: types, Secret: secret, Enabled: true, CreatedAt: now, UpdatedAt: now}
	if err := s.Store.View(ctx, func(tx climate.Tx) error { return checkQuota(ctx, tx, w) }); err != nil {
		return nil, err
	}
	if err := s.ping(ctx, w); err != nil {
		return nil, err
	}
	err = s.Store.Update(ctx, func(tx climate.Tx) error {
		if err := checkQuota(ctx, tx, w); err != nil {
			return err
		}
		if err := tx.InsertWebhook(ctx, w); err != nil {
			return err
		}
		if err := audit(ctx, tx, climate.ByUser(who), "webhook.create", nil, w, now); err != nil {
			return err
		}
		return startAtEnd(ctx, tx, w, now)
	})
	if err != nil {
		return nil, err
	}
	s.notify()
	return w, nil
}

// checkQuota refuses a webhook beyond the MaxWebhooksPerProject of its project (or of
// the all-project ones).
func checkQuota(ctx context.Context, tx climate.Tx, w *climate.Webhook) error {
	hooks, err := tx.ListWebhooks(ctx, w.ProjectID)
	if err != nil {
		return err
	}
	n := 0
	for _, h := range hooks {
		if h.AllProjects == w.AllProjects {
			n++
		}
	}
	if n >= climate.MaxWebhooksPerProject {
		whose := "project " + w.ProjectID
		if w.AllProjects {
			whose = "all projects"
		}
		return climate.Errorf(climate.CodeConflict, "There are %d webhooks for %s already, the most allowed: delete one first", n, whose)
	}
	return nil
}

// startAtEnd points w's delivery cursor at the outbox's end: it receives what comes next.
func startAtEnd(ctx context.Context, tx climate.Tx, w *climate.Webhook, now time.Time) error {
	last, err := tx.LastNotificationSeq(ctx)
	if err != nil {
		return err
	}
	return tx.SaveDeliveryCursor(ctx, &climate.DeliveryCursor{Destination: w.Destination(), Position: last, UpdatedAt: now})
}

// ping sends w a signed webhook.ping; a URL that does not answer 2xx is the client's error.
func (s *Service) ping(ctx context.Context, w *climate.Webhook) error {
	body, err := json.Marshal(map[string]string{"id": climate.NewID(), "event_type": PingEvent, "webhook_id": w.ID,
		"created_at": api.FormatTime(s.Clock.Now())})
	if err != nil {
		return err
	}
	if _, err := s.Sender.Send(ctx, w, climate.NewID(), PingEvent, body); err != nil {
		return climate.Errorf(climate.CodeInvalid, "Webhook url %q did not accept a test delivery (%s): %v", w.URL, PingEvent, err)
	}
	return nil
}

func (s *Service) notify() {
	if s.Notified != nil {
		s.Notified()
	}
}

// checkSecret refuses a client's secret that is too short to resist guessing or not
// printable ASCII (receivers configure it as text).
func checkSecret(secret string) error {
	if len(secret) < climate.MinWebhookSecretLength || len(secret) > climate.MaxWebhookSecretLength {
		return climate.Errorf(climate.CodeInvalid, "secret must be %d to %d characters long", climate.MinWebhookSecretLength, climate.MaxWebhookSecretLength)
	}
	for _, c := range secret {
		if c <= ' ' || c > '~' {
			return climate.Errorf(climate.CodeInvalid, "secret must be printable ASCII without spaces")
		}
	}
	return nil
}

// checkEventTypes validates a filter: known types, at most MaxWebhookEventTypes, each once.
func checkEventTypes(types []string) ([]string, error) {
	if len(types) > climate.MaxWebhookEventTypes {
		return nil, climate.Errorf(climate.CodeInvalid, "event_types has %d entries, at most %d", len(types), climate.MaxWebhookEventTypes)
	}
	var out []string
	for _, t := range types {
		if !climate.KnownNotificationType(t) {
			return nil, climate.Errorf(climate.CodeInvalid, "Unknown event type %.80q in event_types: expected any of %s", t, strings.Join(climate.NotificationTypes(), ", "))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// visible returns webhook id if who may see it: an admin any, anyone else their
// project's (not all-project ones). Others' are "not found", so ids are not confirmed.
// Then rule is checked on the webhook's project and user.
func (s *Service) visible(ctx context.Context, tx climate.Tx, who climate.Identity, id, rule string) (*climate.Webhook, error) {
	if err := climate.CheckText("webhook id", id, climate.MaxNameLength); err != nil {
		return nil, err
	}
	w, err := tx.GetWebhook(ctx, id)
	if err != nil {
		return nil, err
	}
	if !who.IsAdmin() && (w.AllProjects || w.ProjectID != who.ProjectID) {
		return nil, notFound(id)
	}
	if err := s.allow(who, rule, climate.Target{ProjectID: w.ProjectID, UserID: w.UserID}); err != nil {
		return nil, err
	}
	return w, nil
}

// GetWebhook implements climate.WebhookService.
func (s *Service) GetWebhook(ctx context.Context, who climate.Identity, id string) (*climate.Webhook, error) {
	if err := s.allow(who, ruleGet, who.OwnTarget()); err != nil {
		return nil, err
	}
	var w *climate.Webhook
	err := s.Store.View(ctx, func(tx climate.Tx) (err error) {
		w, err = s.visible(ctx, tx, who, id, ruleGet)
		return err
	})
	if err != nil {
		return nil, err
	}
	w.Secret = ""
	return w, nil
}

// ListWebhooks implements climate.WebhookService: an admin's lists every webhook.
func (s *Service) ListWebhooks(ctx context.Context, who climate.Identity) ([]climate.Webhook, error) {
	if err := s.allow(who, ruleGet, who.OwnTarget()); err != nil {
		return nil, err
	}
	project := who.ProjectID
	if who.IsAdmin() {
		project = ""
	} else if project == "" {
		return nil, nil
	}
	var hooks []climate.Webhook
	err := s.Store.View(ctx, func(tx climate.Tx) (err error) {
		hooks, err = tx.ListWebhooks(ctx, project)
		return err
	})
	for i := range hooks {
		hooks[i].Secret = ""
	}
	return hooks, err
}

// UpdateWebhook implements climate.WebhookService. A new URL is checked and pinged as at
// creation. Enabling a disabled webhook resumes its deliveries with the next notification:
// what happened while it was disabled is not sent.
func (s *Service) UpdateWebhook(ctx context.Context, who climate.Identity, id string, u climate.WebhookUpdate) (*climate.Webhook, error) {
	if err := s.allow(who, rulePut, who.OwnTarget()); err != nil {
		return nil, err
	}
	var w *climate.Webhook
	if err := s.Store.View(ctx, func(tx climate.Tx) (err error) {
		w, err = s.visible(ctx, tx, who, id, rulePut)
		return err
	}); err != nil {
		return nil, err
	}
	if u.EventTypes != nil {
		types, err := checkEventTypes(*u.EventTypes)
		if err != nil {
			return nil, err
		}
		w.EventTypes = types
	}
	if u.URL != nil && *u.URL != w.URL {
		parsed, err := s.Guard.CheckURL(ctx, *u.URL)
		if err != nil {
			return nil, err
		}
		w.URL = parsed.String()
		if err := s.ping(ctx, w); err != nil {
			return nil, err
		}
	}
	now := s.Clock.Now().UTC().Truncate(time.Microsecond)
	enabled := false
	err := s.Store.Update(ctx, func(tx climate.Tx) error {
		cur, err := tx.GetWebhook(ctx, id)
		if err != nil {
			return err
		}
		w.Enabled, w.DisabledReason = cur.Enabled, cur.DisabledReason // as they are now, not as read
		switch {
		case u.Enabled == nil || *u.Enabled == cur.Enabled:
		case *u.Enabled:
			w.Enabled, w.DisabledReason, enabled = true, "", true
			if err := startAtEnd(ctx, tx, w, now); err != nil {
				return err
			}
		default:
			w.Enabled = false
			w.DisabledReason = fmt.Sprintf("disabled at %s by %s", api.FormatTime(now), who.UserID)
		}
		w.UpdatedAt = now
		if err := tx.UpdateWebhook(ctx, w); err != nil {
			return err
		}
		return audit(ctx, tx, climate.ByUser(who), "webhook.update", cur, w, now)
	})
	if err != nil {
		return nil, err
	}
	if enabled {
		s.notify()
	}
	w.Secret = ""
	return w, nil
}

// DeleteWebhook implements climate.WebhookService; deliveries stop at once.
func (s *Service) DeleteWebhook(ctx context.Context, who climate.Identity, id string) error {
	if err := s.allow(who, ruleDelete, who.OwnTarget()); err != nil {
		return err
	}
	return s.Store.Update(ctx, func(tx climate.Tx) error {
		w, err := s.visible(ctx, tx, who, id, ruleDelete)
		if err != nil {
			return err
		}
		if err := tx.DeleteWebhook(ctx, id); err != nil {
			return err
		}
		if err := audit(ctx, tx, climate.ByUser(who), "webhook.delete", w, nil, s.Clock.Now()); err != nil {
			return err
		}
		return tx.DeleteDeliveryCursor(ctx, w.Destination())
	})
}

// WebhookDeliveries implements climate.WebhookService: at most WebhookDeliveriesKept
// (limit <= 0 means all kept).
func (s *Service) WebhookDeliveries(ctx context.Context, who climate.Identity, id string, limit int) ([]climate.WebhookDelivery, error) {
	if err := s.allow(who, ruleGet, who.OwnTarget()); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > climate.WebhookDeliveriesKept {
		limit = climate.WebhookDeliveriesKept
	}
	var out []climate.WebhookDelivery
	err := s.Store.View(ctx, func(tx climate.Tx) error {
		if _, err := s.visible(ctx, tx, who, id, ruleGet); err != nil {
			return err
		}
		var err error
		out, err = tx.WebhookDeliveries(ctx, id, limit)
		return err
	})
	return out, err
}
