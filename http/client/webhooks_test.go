package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"climate/clock"
	climatehttp "climate/http"
	"climate/http/api"
	"climate/http/client"
	"climate/notify/webhook"
	"climate/sqlite"
)

func TestWebhooks(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := webhook.Guard{AllowPrivate: true}
	svc := &webhook.Service{Store: st, Clock: clock.Real{}, Guard: g, Sender: webhook.NewSender(g, clock.Real{}, 0)}
	srv := httptest.NewServer((&climatehttp.Server{Auth: climatehttp.NoAuth{}, Webhooks: svc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	t.Cleanup(srv.Close)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(recv.Close)
	c, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}

	w, err := c.CreateWebhook(ctx, api.WebhookRequest{URL: recv.URL, EventTypes: []string{"lease.create"}, Secret: "0123456789abcdef"})
	if err != nil || w.Secret != "0123456789abcdef" || len(w.EventTypes) != 1 || !w.Enabled {
		t.Fatalf("CreateWebhook: %v %+v", err, w)
	}
	got, err := c.GetWebhook(ctx, w.ID)
	if err != nil || got.Secret != "" || got.URL != recv.URL {
		t.Fatalf("GetWebhook: %v %+v", err, got)
	}
	off := false
	var all []string // nil: every type, sent as []
	up, err := c.UpdateWebhook(ctx, w.ID, api.WebhookUpdate{Enabled: &off, EventTypes: &all})
	if err != nil || up.Enabled || up.EventTypes == nil || len(up.EventTypes) != 0 {
		t.Fatalf("UpdateWebhook: %v %+v", err, up)
	}
	list, err := c.ListWebhooks(ctx)
	if err != nil || len(list) != 1 || list[0].ID != w.ID || list[0].Enabled {
		t.Fatalf("ListWebhooks: %v %+v", err, list)
	}
	ds, err := c.WebhookDeliveries(ctx, w.ID, 5)
	if err != nil || ds == nil || len(ds) != 0 {
		t.Fatalf("WebhookDeliveries: %v %#v", err, ds)
	}
	if err := c.DeleteWebhook(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	var e *client.Error
	if _, err := c.GetWebhook(ctx, w.ID); !errors.As(err, &e) || e.Status != http.StatusNotFound || !client.IsNotFound(err) {
		t.Fatalf("GetWebhook after delete: %v", err)
	}
	if _, err := c.CreateWebhook(ctx, api.WebhookRequest{URL: "http://127.0.0.1:1/"}); !errors.As(err, &e) || e.Status != http.StatusBadRequest {
		t.Fatalf("CreateWebhook on a closed port: %v", err)
	}
}
