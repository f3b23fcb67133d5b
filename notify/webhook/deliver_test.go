package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/http/api"
	"climate/manager"
	"climate/notify"
	"climate/notify/webhook"
	"climate/sqlite"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var (
	admin   = climate.Identity{UserID: "admin", ProjectID: "admin", Roles: []string{"admin"}}
	alice   = climate.Identity{UserID: "alice", ProjectID: "physics", Roles: []string{"member"}}
	bob     = climate.Identity{UserID: "bob", ProjectID: "chemistry", Roles: []string{"member"}}
	ctx     = context.Background()
	secret  = "receiver-knows-this-secret"
	timeout = 300 * time.Millisecond
)

// receiver is a real HTTP webhook receiver: it verifies each delivery's signature as a
// receiver should (against the fake clock), de-duplicates on the delivery id, and can be
// told to misbehave for its next requests.
type receiver struct {
	t   *testing.T
	clk *clock.Fake
	srv *httptest.Server

	mu       sync.Mutex
	requests int
	seen     map[string]int     // delivery id → times received
	got      []api.Notification // first receipts, in order
	pings    int                //
	script   []string           // what to do with the next requests: "500", "hang", "cut"
	badSigs  []string           // deliveries whose signature did not verify
	arrived  chan struct{}      // a signal per request
}

func newReceiver(t *testing.T, clk *clock.Fake) *receiver {
	r := &receiver{t: t, clk: clk, seen: map[string]int{}, arrived: make(chan struct{}, 1024)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	defer func() { r.arrived <- struct{}{} }()
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.requests++
	act := ""
	if len(r.script) > 0 {
		act, r.script = r.script[0], r.script[1:]
	}
	id := req.Header.Get(webhook.DeliveryHeader)
	if err := webhook.Verify(secret, req.Header.Get(webhook.SignatureHeader), body, r.clk.Now(), 5*time.Minute); err != nil {
		r.badSigs = append(r.badSigs, fmt.Sprintf("%s: %v", id, err))
	}
	// The Standard Webhooks headers sign the same delivery.
	ts, _ := strconv.ParseInt(req.Header.Get(webhook.StandardTimestampHeader), 10, 64)
	if req.Header.Get(webhook.StandardIDHeader) != id || ts != r.clk.Now().Unix() ||
		req.Header.Get(webhook.StandardSignatureHeader) != webhook.StandardSignature(secret, id, time.Unix(ts, 0), body) {
		r.badSigs = append(r.badSigs, fmt.Sprintf("%s: Standard Webhooks headers %v", id, req.Header))
	}
	r.mu.Unlock()
	switch act {
	case "500":
		http.Error(w, "database is down", http.StatusInternalServerError)
		return
	case "hang": // until the sender gives up
		<-req.Context().Done()
		return
	case "cut": // processed, but the answer is lost: the sender must retry, we de-duplicate
	}
	r.mu.Lock()
	if req.Header.Get(webhook.EventHeader) == webhook.PingEvent {
		r.pings++
	} else if r.seen[id]++; r.seen[id] == 1 {
		var n api.Notification
		if err := json.Unmarshal(body, &n); err != nil || n.ID != id || n.EventType != req.Header.Get(webhook.EventHeader) {
			r.t.Errorf("delivery %s: body %s (%v)", id, body, err)
		}
		r.got = append(r.got, n)
	}
	r.mu.Unlock()
	if act == "cut" {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) do(acts ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.script = append(r.script, acts...)
}

func (r *receiver) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, n := range r.got {
		out = append(out, n.EventType+" "+n.LeaseID)
	}
	return out
}

type fixture struct {
	n   int // leases created: each starts after the last one
	st  climate.Store
	clk *clock.Fake
	mgr *manager.Manager
	svc *webhook.Service
	w   *notify.Worker
}

func newFixture(t *testing.T, deliverGuard webhook.Guard) *fixture {
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, clk: clock.NewFake(t0)}
	f.mgr = manager.New(st, f.clk, manager.Config{})
	open := webhook.Guard{AllowPrivate: true}
	f.svc = &webhook.Service{Store: st, Clock: f.clk, Guard: open, Sender: webhook.NewSender(open, f.clk, timeout)}
	f.w = notify.NewWorker(st, f.clk, notify.Config{Logger: quiet, Backoff: time.Second,
		Destinations: webhook.NewSender(deliverGuard, f.clk, timeout).Destinations(st, notify.DefaultGiveUpAfter)})
	for i := range 2 {
		if _, err := f.mgr.CreateHost(ctx, admin, map[string]string{"name": fmt.Sprintf("h%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) lease(t *testing.T, who climate.Identity, name string) *climate.Lease {
	t.Helper()
	f.n++
	one, start := 1, f.clk.Now().Add(time.Duration(f.n)*2*time.Hour)
	l, err := f.mgr.CreateLease(ctx, who, climate.LeaseRequest{Name: name, Start: climate.Date{Time: start}, End: climate.Date{Time: start.Add(time.Hour)},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one}}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (f *fixture) hook(t *testing.T, who climate.Identity, req climate.WebhookRequest) *climate.Webhook {
	t.Helper()
	if req.Secret == "" {
		req.Secret = secret
	}
	w, err := f.svc.CreateWebhook(ctx, who, req)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// deliverAll runs delivery rounds, moving the fake clock on to each retry, until nothing
// waits; it returns the retry delays.
func (f *fixture) deliverAll(t *testing.T) []time.Duration {
	t.Helper()
	var waits []time.Duration
	for range 20 {
		wait, err := f.w.Round(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if wait < 0 {
			return waits
		}
		waits = append(waits, wait)
		f.clk.Advance(wait)
	}
	t.Fatal("still retrying after 20 rounds")
	return nil
}

// A receiver that fails (500), times out and loses an answer gets every notification in
// commit order, signed, each retry with the same delivery id (which it de-duplicates on),
// with backoff; the webhook's deliveries show the attempts.
func TestDeliveriesRetriedSignedAndDeduplicated(t *testing.T) {
	f := newFixture(t, webhook.Guard{AllowPrivate: true})
	r := newReceiver(t, f.clk)
	old := f.lease(t, alice, "before the webhook")
	w := f.hook(t, alice, climate.WebhookRequest{URL: r.srv.URL + "/hook?token=x"})
	if r.pings != 1 || w.Secret != secret || !w.Enabled || w.ProjectID != "physics" {
		t.Fatalf("created %+v after %d pings", w, r.pings)
	}
	l1 := f.lease(t, alice, "one")
	l2 := f.lease(t, alice, "two")
	if err := f.mgr.DeleteLease(ctx, alice, l1.ID); err != nil {
		t.Fatal(err)
	}
	r.do("500", "hang", "cut")
	waits := f.deliverAll(t)
	if !slices.Equal(waits, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}) {
		t.Errorf("retry delays %v, want 1s 2s 4s", waits)
	}
	want := []string{"lease.create " + l1.ID, "lease.create " + l2.ID, "lease.delete " + l1.ID}
	if got := r.types(); !slices.Equal(got, want) {
		t.Errorf("received %v, want %v (nothing from before the webhook: %s)", got, want, old.ID)
	}
	if len(r.badSigs) != 0 {
		t.Errorf("signatures that did not verify: %v", r.badSigs)
	}
	first := r.got[0].ID
	if r.seen[first] != 2 || r.requests != 1+4+2 {
		t.Errorf("first delivery received %d times (want 2: the cut answer), %d requests (want ping + 4 attempts + 2)", r.seen[first], r.requests)
	}
	if l, err := r.got[0].Lease(); err != nil || l.Name != "one" {
		t.Errorf("payload: %+v, %v", l, err)
	}
	ds, err := f.svc.WebhookDeliveries(ctx, alice, w.ID, 0)
	if err != nil || len(ds) != 3 {
		t.Fatalf("deliveries: %+v, %v", ds, err)
	}
	d := ds[2] // latest first
	if d.NotificationID != first || d.Status != climate.DeliveryDelivered || d.Attempts != 4 || d.ResponseCode != 204 ||
		!d.FirstAttemptAt.Equal(t0) || !d.LastAttemptAt.Equal(t0.Add(7*time.Second)) || d.LeaseID != l1.ID {
		t.Errorf("first delivery's record: %+v", d)
	}
	if ds[0].Attempts != 1 || ds[0].EventType != climate.NotifyLeaseDelete || ds[0].Status != climate.DeliveryDelivered {
		t.Errorf("last delivery's record: %+v", ds[0])
	}
	if _, err := f.svc.WebhookDeliveries(ctx, bob, w.ID, 0); climate.ErrorCode(err) != climate.CodeNotFound {
		t.Errorf("another project's deliveries: %v", err)
	}
}

// The failures along the way are recorded as they happen.
func TestFailedAttemptsAreRecorded(t *testing.T) {
	f := newFixture(t, webhook.Guard{AllowPrivate: true})
	r := newReceiver(t, f.clk)
	w := f.hook(t, alice, climate.WebhookRequest{URL: r.srv.URL})
	f.lease(t, alice, "one")
	for i, act := range []string{"500", "hang"} {
		r.do(act)
		if _, err := f.w.Round(ctx); err != nil {
			t.Fatal(err)
		}
		ds, err := f.svc.WebhookDeliveries(ctx, alice, w.ID, 1)
		if err != nil || len(ds) != 1 {
			t.Fatalf("deliveries: %+v, %v", ds, err)
		}
		d := ds[0]
		if d.Status != climate.DeliveryRetrying || d.Attempts != i+1 {
			t.Errorf("after %s: %+v", act, d)
		}
		switch act {
		case "500":
			if d.ResponseCode != 500 || d.LastError != "receiver answered 500 Internal Server Error: database is down" {
				t.Errorf("after a 500: code %d, error %q", d.ResponseCode, d.LastError)
			}
		case "hang":
			if d.ResponseCode != 0 || d.LastError != "no answer within "+timeout.String() {
				t.Errorf("after a timeout: code %d, error %q", d.ResponseCode, d.LastError)
			}
		}
		f.clk.Advance(time.Hour)
	}
}

// A webhook that keeps failing for a day gives the notification up and is disabled with
// the reason; it receives nothing more until enabled, and then only what comes next.
func TestFailingWebhookIsDisabled(t *testing.T) {
	f := newFixture(t, webhook.Guard{AllowPrivate: true})
	r := newReceiver(t, f.clk)
	w := f.hook(t, alice, climate.WebhookRequest{URL: r.srv.URL})
	f.lease(t, alice, "lost")
	r.do(slices.Repeat([]string{"500"}, 100)...)
	for range 60 {
		wait, err := f.w.Round(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if wait < 0 {
			break
		}
		f.clk.Advance(wait)
	}
	got, err := f.svc.GetWebhook(ctx, alice, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Enabled || !strings.Contains(got.DisabledReason, "could not be delivered for 24h0m0s") ||
		!strings.Contains(got.DisabledReason, "last error: receiver answered 500") || got.Secret != "" {
		t.Fatalf("after a day of failures: %+v", got)
	}
	ds, _ := f.svc.WebhookDeliveries(ctx, alice, w.ID, 0)
	if len(ds) != 1 || ds[0].Status != climate.DeliveryFailed || ds[0].Attempts < 15 {
		t.Errorf("deliveries: %+v", ds)
	}
	// The audit trail has the service disabling it, and never its secret.
	var es []climate.AuditEntry
	if err := f.st.View(ctx, func(tx climate.Tx) (err error) {
		es, err = tx.ListAudit(ctx, climate.AuditFilter{ProjectID: "physics"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var hookActions []string
	for _, e := range es {
		if e.TargetID == w.ID {
			hookActions = append(hookActions, e.Action+"/"+e.Actor)
			if strings.Contains(e.Before+e.After, w.Secret) {
				t.Errorf("the webhook's secret is in the audit trail: %+v", e)
			}
		}
	}
	if want := []string{"webhook.create/user", "webhook.update/climate"}; !slices.Equal(hookActions, want) {
		t.Errorf("webhook's audit entries %v, want %v", hookActions, want)
	}
	requests := r.requests
	f.lease(t, alice, "while disabled")
	if _, err := f.w.Round(ctx); err != nil || r.requests != requests {
		t.Fatalf("a disabled webhook was called: %v, %d requests", err, r.requests-requests)
	}

	r.do() // healthy again
	r.mu.Lock()
	r.script = nil
	r.mu.Unlock()
	on := true
	if got, err = f.svc.UpdateWebhook(ctx, alice, w.ID, climate.WebhookUpdate{Enabled: &on}); err != nil || !got.Enabled || got.DisabledReason != "" {
		t.Fatalf("enable: %+v, %v", got, err)
	}
	l := f.lease(t, alice, "after")
	f.deliverAll(t)
	if types := r.types(); !slices.Equal(types, []string{"lease.create " + l.ID}) {
		t.Errorf("after enabling: %v (want only what came next)", types)
	}
}

// A webhook gets its project's notifications of the types it asked for; an admin's
// all-projects webhook gets every project's.
func TestWebhookFilters(t *testing.T) {
	f := newFixture(t, webhook.Guard{AllowPrivate: true})
	physics, all := newReceiver(t, f.clk), newReceiver(t, f.clk)
	f.hook(t, alice, climate.WebhookRequest{URL: physics.srv.URL, EventTypes: []string{climate.NotifyLeaseDelete}})
	f.hook(t, admin, climate.WebhookRequest{URL: all.srv.URL, AllProjects: true})
	a := f.lease(t, alice, "a")
	b := f.lease(t, bob, "b")
	for _, who := range []climate.Identity{alice, bob} {
		id := map[string]string{"physics": a.ID, "chemistry": b.ID}[who.ProjectID]
		if err := f.mgr.DeleteLease(ctx, who, id); err != nil {
			t.Fatal(err)
		}
	}
	f.deliverAll(t)
	if got := physics.types(); !slices.Equal(got, []string{"lease.delete " + a.ID}) {
		t.Errorf("physics, deletions only: %v", got)
	}
	want := []string{"lease.create " + a.ID, "lease.create " + b.ID, "lease.delete " + a.ID, "lease.delete " + b.ID}
	if got := all.types(); !slices.Equal(got, want) {
		t.Errorf("all projects: %v, want %v", got, want)
	}
}

// A webhook created when its name pointed somewhere allowed is still refused, at dial
// time, an address the deliverer's guard forbids (DNS rebinding); nothing reaches it.
func TestDeliveryRefusesForbiddenAddressAtDialTime(t *testing.T) {
	f := newFixture(t, webhook.Guard{}) // deliveries: public addresses only
	r := newReceiver(t, f.clk)
	w := f.hook(t, alice, climate.WebhookRequest{URL: r.srv.URL})
	f.lease(t, alice, "one")
	if _, err := f.w.Round(ctx); err != nil {
		t.Fatal(err)
	}
	ds, _ := f.svc.WebhookDeliveries(ctx, alice, w.ID, 0)
	if r.requests != 1 || len(ds) != 1 || !strings.Contains(ds[0].LastError, "is a loopback address") {
		t.Errorf("%d requests (want the creation's ping only); deliveries %+v", r.requests, ds)
	}
}

// Creating: the secret is shown once, the cursor starts at the outbox's end, the project
// quota holds, and deleting a webhook forgets its cursor.
func TestWebhookLifecycle(t *testing.T) {
	f := newFixture(t, webhook.Guard{AllowPrivate: true})
	r := newReceiver(t, f.clk)
	w, err := f.svc.CreateWebhook(ctx, alice, climate.WebhookRequest{URL: r.srv.URL})
	if err != nil || !strings.HasPrefix(w.Secret, "whsec_") {
		t.Fatalf("create: %+v, %v", w, err)
	}
	if list, err := f.svc.ListWebhooks(ctx, alice); err != nil || len(list) != 1 || list[0].Secret != "" {
		t.Errorf("list: %+v, %v", list, err)
	}
	if list, err := f.svc.ListWebhooks(ctx, bob); err != nil || len(list) != 0 {
		t.Errorf("another project's list: %+v, %v", list, err)
	}
	for i := 1; i < climate.MaxWebhooksPerProject; i++ {
		f.hook(t, alice, climate.WebhookRequest{URL: r.srv.URL})
	}
	if _, err := f.svc.CreateWebhook(ctx, alice, climate.WebhookRequest{URL: r.srv.URL}); climate.ErrorCode(err) != climate.CodeConflict {
		t.Errorf("webhook %d: %v, want a conflict", climate.MaxWebhooksPerProject+1, err)
	}
	if err := f.svc.DeleteWebhook(ctx, bob, w.ID); climate.ErrorCode(err) != climate.CodeNotFound {
		t.Errorf("bob deletes alice's webhook: %v", err)
	}
	if err := f.svc.DeleteWebhook(ctx, alice, w.ID); err != nil {
		t.Fatal(err)
	}
	_ = f.st.View(ctx, func(tx climate.Tx) error {
		if _, ok, err := tx.DeliveryCursor(ctx, w.Destination()); ok || err != nil {
			t.Errorf("a deleted webhook's cursor remains (%v)", err)
		}
		return nil
	})
	if _, err := f.svc.GetWebhook(ctx, alice, w.ID); climate.ErrorCode(err) != climate.CodeNotFound {
		t.Errorf("get after delete: %v", err)
	}
}
