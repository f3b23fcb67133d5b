package http

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"climate"
	"climate/http/api"
)

// Webhooks (Climate's extension): POST/GET /v1/webhooks, GET/PUT/DELETE
// /v1/webhooks/{id}, GET /v1/webhooks/{id}/deliveries[?limit=N].

var (
	webhookKeys       = []string{"url", "event_types", "project_id", "all_projects", "secret"}
	webhookUpdateKeys = []string{"url", "event_types", "enabled"}
)

// strs returns a field holding a list of strings; absent or null gives nil, false.
func (o object) strs(key string) ([]string, bool, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return nil, false, nil
	}
	var out []string
	if err := json.Unmarshal(raw, &out); err != nil || out == nil {
		return nil, false, malformed(key, "a list of strings")
	}
	return out, true, nil
}

// optBool returns a boolean field; absent or null gives nil.
func (o object) optBool(key string) (*bool, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	b, err := o.boolean(key)
	return &b, err
}

func decodeWebhookRequest(o object) (climate.WebhookRequest, error) {
	var req climate.WebhookRequest
	if err := o.only("a webhook", webhookKeys...); err != nil {
		return req, err
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"url", &req.URL}, {"project_id", &req.ProjectID}, {"secret", &req.Secret}} {
		s, err := o.str(f.key)
		if err != nil {
			return req, err
		}
		if s != nil {
			*f.dst = *s
		}
	}
	var err error
	if req.EventTypes, _, err = o.strs("event_types"); err != nil {
		return req, err
	}
	if req.AllProjects, err = o.boolean("all_projects"); err != nil {
		return req, err
	}
	if strings.TrimSpace(req.URL) == "" {
		return req, climate.Errorf(climate.CodeInvalid, "Missing parameter url")
	}
	return req, nil
}

func decodeWebhookUpdate(o object) (climate.WebhookUpdate, error) {
	var u climate.WebhookUpdate
	if err := o.only("a webhook update", webhookUpdateKeys...); err != nil {
		return u, err
	}
	var err error
	if u.URL, err = o.str("url"); err != nil {
		return u, err
	}
	types, given, err := o.strs("event_types")
	if err != nil {
		return u, err
	}
	if given {
		u.EventTypes = &types
	}
	if u.Enabled, err = o.optBool("enabled"); err != nil {
		return u, err
	}
	if u.URL == nil && u.EventTypes == nil && u.Enabled == nil {
		return u, climate.Errorf(climate.CodeInvalid, "Nothing to change: give any of %s", strings.Join(webhookUpdateKeys, ", "))
	}
	return u, nil
}

func (s *Server) createWebhook(r *http.Request, who climate.Identity) (int, any, error) {
	o, err := readObject(r)
	if err != nil {
		return 0, nil, err
	}
	req, err := decodeWebhookRequest(o)
	if err != nil {
		return 0, nil, err
	}
	w, err := s.Webhooks.CreateWebhook(r.Context(), who, req)
	if err != nil {
		return 0, nil, err
	}
	out := api.WebhookOf(w)
	out.Secret = w.Secret // shown this once
	return http.StatusCreated, map[string]any{"webhook": out}, nil
}

func (s *Server) listWebhooks(r *http.Request, who climate.Identity) (int, any, error) {
	hooks, err := s.Webhooks.ListWebhooks(r.Context(), who)
	if err != nil {
		return 0, nil, err
	}
	out := make([]api.Webhook, 0, len(hooks))
	for i := range hooks {
		out = append(out, api.WebhookOf(&hooks[i]))
	}
	return http.StatusOK, map[string]any{"webhooks": out}, nil
}

func (s *Server) getWebhook(r *http.Request, who climate.Identity) (int, any, error) {
	w, err := s.Webhooks.GetWebhook(r.Context(), who, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"webhook": api.WebhookOf(w)}, nil
}

func (s *Server) updateWebhook(r *http.Request, who climate.Identity) (int, any, error) {
	o, err := readObject(r)
	if err != nil {
		return 0, nil, err
	}
	u, err := decodeWebhookUpdate(o)
	if err != nil {
		return 0, nil, err
	}
	w, err := s.Webhooks.UpdateWebhook(r.Context(), who, r.PathValue("id"), u)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"webhook": api.WebhookOf(w)}, nil
}

func (s *Server) deleteWebhook(r *http.Request, who climate.Identity) (int, any, error) {
	return http.StatusNoContent, nil, s.Webhooks.DeleteWebhook(r.Context(), who, r.PathValue("id"))
}

func (s *Server) webhookDeliveries(r *http.Request, who climate.Identity) (int, any, error) {
	p := newParams(r, "limit")
	if p.err != nil {
		return 0, nil, p.err
	}
	limit := 0
	if v := p.v.Get("limit"); p.v.Has("limit") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return 0, nil, climate.Errorf(climate.CodeInvalid, "Query parameter limit=%q is not a positive integer (a webhook keeps its %d latest deliveries)", v, climate.WebhookDeliveriesKept)
		}
		limit = n
	}
	ds, err := s.Webhooks.WebhookDeliveries(r.Context(), who, r.PathValue("id"), limit)
	if err != nil {
		return 0, nil, err
	}
	out := make([]api.WebhookDelivery, 0, len(ds))
	for i := range ds {
		out = append(out, api.WebhookDeliveryOf(&ds[i]))
	}
	return http.StatusOK, map[string]any{"deliveries": out}, nil
}
