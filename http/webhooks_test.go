package http_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/clock"
	climatehttp "climate/http"
	"climate/http/api"
	"climate/manager"
	"climate/notify/webhook"
	"climate/sqlite"
)

// noDNS fails every name lookup at once: tests reach receivers by IP address only, and a
// name must not wait for (or leak to) the machine's DNS.
var noDNS = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("no DNS here")
}}

// webhookService is the webhook service the test servers run: loopback receivers are
// allowed when allowPrivate, names never resolve, attempts take 2 s at most.
func webhookService(st climate.Store, clk climate.Clock, allowPrivate bool) *webhook.Service {
	g := webhook.Guard{AllowPrivate: allowPrivate, Resolver: noDNS}
	return &webhook.Service{Store: st, Clock: clk, Guard: g, Sender: webhook.NewSender(g, clk, 2*time.Second)}
}

// receiver is a webhook receiver on loopback that answers every request with status and
// keeps what it received.
type receiver struct {
	url    string
	status int
	mu     sync.Mutex
	got    []received
}

type received struct {
	path, event, signature, contentType string
	body                                []byte
}

func newReceiver(t testing.TB, status int) *receiver {
	rc := &receiver{status: status}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{path: r.URL.Path, event: r.Header.Get(webhook.EventHeader),
			signature: r.Header.Get(webhook.SignatureHeader), contentType: r.Header.Get("Content-Type"), body: body})
		rc.mu.Unlock()
		w.WriteHeader(rc.status)
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL
	return rc
}

// received returns what the receiver got so far.
func (rc *receiver) received() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// newWebhookEnv is newEnv whose webhook guard allows private addresses or not.
func newWebhookEnv(t *testing.T, allowPrivate bool) *env {
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := clock.NewFake(t0)
	mgr := manager.New(store, clk, manager.Config{BeforeEnd: manager.DefaultBeforeEnd})
	srv := httptest.NewServer((&climatehttp.Server{Leases: mgr, Hosts: mgr, Auth: climatehttp.NoAuth{}, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Webhooks: webhookService(store, clk, allowPrivate)}).Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, clk: clk, store: store, recv: newReceiver(t, http.StatusNoContent)}
}

// webhookOf decodes {"webhook": …} strictly: every key of api.Webhook, nothing else.
func webhookOf(t *testing.T, r response) (api.Webhook, map[string]json.RawMessage) {
	t.Helper()
	var outer struct {
		Webhook map[string]json.RawMessage `json:"webhook"`
	}
	if err := json.Unmarshal(r.body, &outer); err != nil || outer.Webhook == nil {
		t.Fatalf("not a webhook answer: %v: %s", err, r)
	}
	var w api.Webhook
	b, _ := json.Marshal(outer.Webhook)
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		t.Fatalf("webhook answer: %v: %s", err, r.body)
	}
	return w, outer.Webhook
}

func listWebhooks(t *testing.T, e *env, header map[string]string) []api.Webhook {
	t.Helper()
	r := e.do(call{method: "GET", path: "/v1/webhooks", header: header})
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/webhooks: %s", r)
	}
	var out struct {
		Webhooks []api.Webhook `json:"webhooks"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || out.Webhooks == nil {
		t.Fatalf("GET /v1/webhooks: %v: %s", err, r.body)
	}
	if strings.Contains(string(r.body), `"secret"`) {
		t.Errorf("the list shows secrets: %s", r.body)
	}
	return out.Webhooks
}

func ids(hooks []api.Webhook) []string {
	out := []string{}
	for _, w := range hooks {
		out = append(out, w.ID)
	}
	return out
}

func TestWebhooksRoundTrip(t *testing.T) {
	e := newEnv(t, nil)
	t.Run("empty", func(t *testing.T) {
		if got := e.do(call{method: "GET", path: "/v1/webhooks", header: asAlice}); got.status != 200 || string(got.body) != `{"webhooks":[]}` {
			t.Fatalf("empty list: %s", got)
		}
	})

	// Create: the answer holds the generated secret, which signed the test delivery.
	r := e.do(call{method: "POST", path: "/v1/webhooks", header: asAlice,
		body: `{"url": "` + e.recv.url + `/alice", "event_types": ["lease.event.start_lease", "lease.create", "lease.create"]}`})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %s", r)
	}
	checkHeaders(t, r)
	w, raw := webhookOf(t, r)
	want := api.Webhook{ID: w.ID, ProjectID: "physics", UserID: "alice", URL: e.recv.url + "/alice",
		EventTypes: []string{"lease.event.start_lease", "lease.create"}, Enabled: true,
		CreatedAt: "2026-11-21T10:00:00.000000", UpdatedAt: "2026-11-21T10:00:00.000000", Secret: w.Secret}
	if !uuidRE.MatchString(w.ID) || fmt.Sprint(w) != fmt.Sprint(want) {
		t.Errorf("created webhook:\n got %+v\nwant %+v", w, want)
	}
	for _, k := range []string{"all_projects", "disabled_reason", "project_id", "event_types", "enabled"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("create answer lacks %q: %s", k, r.body)
		}
	}
	if !strings.HasPrefix(w.Secret, "whsec_") || len(w.Secret) != len("whsec_")+44 {
		t.Errorf("generated secret %q, want whsec_ and 32 bytes in base64", w.Secret)
	}
	got := e.recv.received()
	if len(got) != 1 || got[0].event != webhook.PingEvent || got[0].path != "/alice" || got[0].contentType != "application/json" {
		t.Fatalf("the receiver got %+v, want one webhook.ping on /alice", got)
	}
	if err := webhook.Verify(w.Secret, got[0].signature, got[0].body, t0, time.Minute); err != nil {
		t.Errorf("the ping is not signed with the secret the answer shows: %v", err)
	}

	// A chosen secret is kept (and shown once too).
	e.clk.Advance(time.Second) // lists are in creation order
	const mine = "s3cret-chosen-by-alice"
	r = e.do(call{method: "POST", path: "/v1/webhooks", header: asAlice, body: `{"url": "` + e.recv.url + `/two", "secret": "` + mine + `", "project_id": "physics"}`})
	w2, _ := webhookOf(t, r)
	if r.status != http.StatusCreated || w2.Secret != mine || len(w2.EventTypes) != 0 || w2.EventTypes == nil {
		t.Fatalf("create with a secret: %s", r)
	}
	if got := e.recv.received(); len(got) != 2 || webhook.Verify(mine, got[1].signature, got[1].body, t0, time.Minute) != nil {
		t.Errorf("the second ping is not signed with the chosen secret: %+v", got)
	}
	if !strings.Contains(string(r.body), `"event_types":[]`) {
		t.Errorf("all event types is not []: %s", r.body)
	}

	// Show and list: the same webhook without its secret.
	r = e.do(call{method: "GET", path: "/v1/webhooks/" + w.ID, header: asAlice})
	shown, raw := webhookOf(t, r)
	if _, ok := raw["secret"]; ok || r.status != 200 {
		t.Errorf("show: %s", r)
	}
	w.Secret = ""
	if fmt.Sprint(shown) != fmt.Sprint(w) {
		t.Errorf("show:\n got %+v\nwant %+v", shown, w)
	}
	list := listWebhooks(t, e, asAlice)
	if len(list) != 2 || fmt.Sprint(list[0]) != fmt.Sprint(w) || list[1].ID != w2.ID {
		t.Errorf("list: %+v", list)
	}
	if list := listWebhooks(t, e, asReader); len(list) != 2 {
		t.Errorf("a physics reader lists %d webhooks, want 2", len(list))
	}

	// Update: disable, enable, event types, URL (pinged again).
	e.clk.Set(t0.Add(time.Minute))
	r = e.do(call{method: "PUT", path: "/v1/webhooks/" + w.ID, header: asAlice, body: `{"enabled": false}`})
	up, raw := webhookOf(t, r)
	if _, ok := raw["secret"]; ok || r.status != 200 || up.Enabled || !strings.Contains(up.DisabledReason, "alice") || up.UpdatedAt != "2026-11-21T10:01:00.000000" || up.CreatedAt != w.CreatedAt {
		t.Errorf("disable: %s", r)
	}
	if s := lookupWebhook(t, e, w.ID); s.Enabled {
		t.Errorf("disabled webhook shows enabled: %+v", s)
	}
	r = e.do(call{method: "PUT", path: "/v1/webhooks/" + w.ID, header: asAlice, body: `{"enabled": true, "event_types": []}`})
	if up, _ = webhookOf(t, r); r.status != 200 || !up.Enabled || up.DisabledReason != "" || len(up.EventTypes) != 0 || up.EventTypes == nil {
		t.Errorf("enable with all event types: %s", r)
	}
	r = e.do(call{method: "PUT", path: "/v1/webhooks/" + w.ID, header: asAlice, body: `{"url": "` + e.recv.url + `/moved", "event_types": ["lease.delete"]}`})
	if up, _ = webhookOf(t, r); r.status != 200 || up.URL != e.recv.url+"/moved" || fmt.Sprint(up.EventTypes) != "[lease.delete]" {
		t.Errorf("new url: %s", r)
	}
	if got := e.recv.received(); len(got) != 3 || got[2].path != "/moved" || got[2].event != webhook.PingEvent {
		t.Errorf("a new URL is not pinged: %+v", got)
	}
	if s := lookupWebhook(t, e, w.ID); s.URL != e.recv.url+"/moved" || fmt.Sprint(s.EventTypes) != "[lease.delete]" || !s.Enabled {
		t.Errorf("after updates: %+v", s)
	}

	// Deliveries: latest first, limit.
	r = e.do(call{method: "GET", path: "/v1/webhooks/" + w.ID + "/deliveries", header: asAlice})
	if r.status != 200 || string(r.body) != `{"deliveries":[]}` {
		t.Errorf("no deliveries yet: %s", r)
	}
	at := t0.Add(time.Hour)
	err := e.store.Update(context.Background(), func(tx climate.Tx) error {
		for i, st := range []string{climate.DeliveryDelivered, climate.DeliveryRetrying, climate.DeliveryFailed} {
			d := &climate.WebhookDelivery{WebhookID: w.ID, NotificationID: fmt.Sprintf("n-%d", i+1), Seq: int64(i + 1), EventType: "lease.delete",
				LeaseID: "lease-1", Status: st, Attempts: i + 1, ResponseCode: []int{204, 500, 0}[i], LastError: []string{"", "receiver answered 500", "no answer"}[i],
				FirstAttemptAt: at, LastAttemptAt: at.Add(time.Duration(i) * time.Second)}
			if err := tx.RecordWebhookDelivery(context.Background(), d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r = e.do(call{method: "GET", path: "/v1/webhooks/" + w.ID + "/deliveries?limit=2", header: asReader})
	var ds struct {
		Deliveries []api.WebhookDelivery `json:"deliveries"`
	}
	if err := json.Unmarshal(r.body, &ds); err != nil || r.status != 200 {
		t.Fatalf("deliveries: %v %s", err, r)
	}
	wantD := []api.WebhookDelivery{
		{NotificationID: "n-3", Seq: 3, EventType: "lease.delete", LeaseID: "lease-1", Status: "failed", Attempts: 3, LastError: "no answer",
			FirstAttemptAt: "2026-11-21T11:00:00.000000", LastAttemptAt: "2026-11-21T11:00:02.000000"},
		{NotificationID: "n-2", Seq: 2, EventType: "lease.delete", LeaseID: "lease-1", Status: "retrying", Attempts: 2, ResponseCode: 500, LastError: "receiver answered 500",
			FirstAttemptAt: "2026-11-21T11:00:00.000000", LastAttemptAt: "2026-11-21T11:00:01.000000"},
	}
	if fmt.Sprint(ds.Deliveries) != fmt.Sprint(wantD) {
		t.Errorf("deliveries?limit=2:\n got %+v\nwant %+v", ds.Deliveries, wantD)
	}
	if r := e.do(call{method: "GET", path: "/v1/webhooks/" + w.ID + "/deliveries", header: asAlice}); strings.Count(string(r.body), "notification_id") != 3 {
		t.Errorf("all deliveries: %s", r)
	}
	if r := e.do(call{method: "GET", path: "/v1/webhooks/" + w2.ID + "/deliveries"}); string(r.body) != `{"deliveries":[]}` {
		t.Errorf("another webhook's deliveries: %s", r)
	}

	// Delete: gone everywhere.
	e.mustDo(call{method: "DELETE", path: "/v1/webhooks/" + w.ID, header: asAlice}, http.StatusNoContent)
	for _, c := range []call{
		{method: "GET", path: "/v1/webhooks/" + w.ID},
		{method: "PUT", path: "/v1/webhooks/" + w.ID, body: `{"enabled": false}`},
		{method: "DELETE", path: "/v1/webhooks/" + w.ID},
		{method: "GET", path: "/v1/webhooks/" + w.ID + "/deliveries"},
	} {
		checkError(t, e.do(c), http.StatusNotFound, w.ID)
	}
	if list := listWebhooks(t, e, nil); fmt.Sprint(ids(list)) != fmt.Sprint([]string{w2.ID}) {
		t.Errorf("after delete the admin lists %v, want only %s", ids(list), w2.ID)
	}
}

func lookupWebhook(t *testing.T, e *env, id string) api.Webhook {
	t.Helper()
	w, raw := webhookOf(t, e.do(call{method: "GET", path: "/v1/webhooks/" + id}))
	if _, ok := raw["secret"]; ok {
		t.Errorf("GET shows the secret")
	}
	return w
}

func TestWebhooksPolicy(t *testing.T) {
	e := newEnv(t, nil)
	create := func(header map[string]string, body string) response {
		e.clk.Advance(time.Second) // lists are in creation order
		return e.do(call{method: "POST", path: "/v1/webhooks", header: header, body: body})
	}
	hookBody := `{"url": "` + e.recv.url + `/p"}`
	alices, _ := webhookOf(t, create(asAlice, hookBody))
	bobs, _ := webhookOf(t, create(asBob, hookBody))
	r := create(nil, `{"url": "`+e.recv.url+`/all", "all_projects": true}`)
	all, _ := webhookOf(t, r)
	if r.status != 201 || !all.AllProjects || all.ProjectID != "" {
		t.Fatalf("admin's all-projects webhook: %s", r)
	}
	r = create(nil, `{"url": "`+e.recv.url+`/for-physics", "project_id": "physics"}`)
	forPhysics, _ := webhookOf(t, r)
	if r.status != 201 || forPhysics.ProjectID != "physics" {
		t.Fatalf("admin's webhook for physics: %s", r)
	}
	pings := len(e.recv.received())
	before := fmt.Sprint(ids(listWebhooks(t, e, nil)))

	// Another project's webhook does not exist for bob.
	for _, c := range []call{
		{method: "GET", path: "/v1/webhooks/" + alices.ID},
		{method: "PUT", path: "/v1/webhooks/" + alices.ID, body: `{"enabled": false}`},
		{method: "DELETE", path: "/v1/webhooks/" + alices.ID},
		{method: "GET", path: "/v1/webhooks/" + alices.ID + "/deliveries"},
		{method: "GET", path: "/v1/webhooks/" + all.ID}, // every project's: admins only
		{method: "PUT", path: "/v1/webhooks/" + all.ID, body: `{"enabled": false}`},
	} {
		c.header = asBob
		t.Run("bob "+c.method+" "+strings.Replace(c.path, alices.ID, "alice's", 1), func(t *testing.T) {
			checkError(t, e.do(c), http.StatusNotFound, "not found")
		})
	}
	if got := ids(listWebhooks(t, e, asBob)); fmt.Sprint(got) != fmt.Sprint([]string{bobs.ID}) {
		t.Errorf("bob lists %v, want only his %s", got, bobs.ID)
	}
	if got := ids(listWebhooks(t, e, asAlice)); fmt.Sprint(got) != fmt.Sprint([]string{alices.ID, forPhysics.ID}) {
		t.Errorf("alice lists %v, want physics' %s and %s", got, alices.ID, forPhysics.ID)
	}
	// Admins see and manage everything.
	if got := ids(listWebhooks(t, e, nil)); len(got) != 4 {
		t.Errorf("the admin lists %v, want all 4", got)
	}
	if w := lookupWebhook(t, e, alices.ID); w.UserID != "alice" {
		t.Errorf("the admin's view of alice's webhook: %+v", w)
	}
	e.mustDo(call{method: "GET", path: "/v1/webhooks/" + bobs.ID + "/deliveries"}, 200)

	// Roles and projects.
	for _, tc := range []struct {
		name   string
		c      call
		status int
		msg    string
	}{
		{"reader creates", call{method: "POST", path: "/v1/webhooks", body: hookBody, header: asReader}, 403, "climate:webhooks:post"},
		{"reader updates", call{method: "PUT", path: "/v1/webhooks/" + alices.ID, body: `{"enabled": false}`, header: asReader}, 403, "climate:webhooks:put"},
		{"reader deletes", call{method: "DELETE", path: "/v1/webhooks/" + alices.ID, header: asReader}, 403, "climate:webhooks:delete"},
		{"guest lists", call{method: "GET", path: "/v1/webhooks", header: asGuest}, 403, "climate:webhooks:get"},
		{"guest shows", call{method: "GET", path: "/v1/webhooks/" + alices.ID, header: asGuest}, 403, "climate:webhooks:get"},
		{"guest creates", call{method: "POST", path: "/v1/webhooks", body: hookBody, header: asGuest}, 403, "climate:webhooks:post"},
		{"member all_projects", call{method: "POST", path: "/v1/webhooks", body: `{"url": "` + e.recv.url + `", "all_projects": true}`, header: asAlice}, 403, "all_projects"},
		{"member other project", call{method: "POST", path: "/v1/webhooks", body: `{"url": "` + e.recv.url + `", "project_id": "chemistry"}`, header: asAlice}, 403, "another project"},
		{"admin project and all", call{method: "POST", path: "/v1/webhooks", body: `{"url": "` + e.recv.url + `", "project_id": "physics", "all_projects": true}`}, 400, "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkError(t, e.do(tc.c), tc.status, tc.msg)
		})
	}
	if after := fmt.Sprint(ids(listWebhooks(t, e, nil))); after != before {
		t.Errorf("refused requests changed the webhooks: %s, was %s", after, before)
	}
	if n := len(e.recv.received()); n != pings {
		t.Errorf("refused creations sent %d pings", n-pings)
	}
	if w := lookupWebhook(t, e, alices.ID); !w.Enabled {
		t.Errorf("alice's webhook was disabled by someone else: %+v", w)
	}
}

// TestWebhookURLsRefused checks the URLs the server must not call: private addresses
// (unless the operator allows them), names that do not resolve, and receivers that do
// not accept the test delivery. Each is a 400 that says why; nothing is stored.
func TestWebhookURLsRefused(t *testing.T) {
	type urlCase struct {
		name, url string
		msgs      []string
	}
	check := func(t *testing.T, e *env, cases []urlCase, wantPings int) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(call{method: "POST", path: "/v1/webhooks", header: asAlice, body: `{"url": "` + tc.url + `"}`})
				checkError(t, r, http.StatusBadRequest, tc.msgs...)
				if list := listWebhooks(t, e, nil); len(list) != 0 {
					t.Errorf("a refused webhook was stored: %+v", list)
				}
			})
		}
		if got := len(e.recv.received()); got != wantPings {
			t.Errorf("the receiver got %d requests, want %d", got, wantPings)
		}
	}

	t.Run("public only", func(t *testing.T) {
		e := newWebhookEnv(t, false)
		check(t, e, []urlCase{
			{"loopback receiver", e.recv.url + "/hook", []string{"127.0.0.1 is a loopback address", "--webhook-allow-private"}},
			{"private", "http://10.1.2.3/", []string{"10.1.2.3 is a private address"}},
			{"metadata service", "http://169.254.169.254/latest/meta-data", []string{"169.254.169.254 is a link-local address"}},
			{"IPv6 loopback", "http://[::1]/", []string{"::1 is a loopback address"}},
			{"IPv4-mapped loopback", "http://[::ffff:127.0.0.1]:8080/", []string{"loopback"}},
			{"unspecified", "http://0.0.0.0/", []string{"not a unicast address"}},
			{"unresolvable name", "http://hooks.example.org/x", []string{`the host "hooks.example.org" does not resolve`}},
		}, 0)
	})

	t.Run("private allowed", func(t *testing.T) {
		e := newWebhookEnv(t, true)
		failing := newReceiver(t, http.StatusInternalServerError)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + ln.Addr().String() + "/"
		ln.Close()
		check(t, e, []urlCase{
			{"receiver answers 500", failing.url + "/hook", []string{"did not accept a test delivery", "webhook.ping", "500"}},
			{"closed port", closed, []string{"did not accept a test delivery", "refused"}},
			{"unresolvable name", "http://hooks.example.org/x", []string{"does not resolve"}},
		}, 0)
		if got := failing.received(); len(got) != 1 || got[0].event != webhook.PingEvent {
			t.Errorf("the failing receiver got %+v, want one ping", got)
		}
		// The same server accepts a receiver that answers.
		e.mustDo(call{method: "POST", path: "/v1/webhooks", header: asAlice, body: `{"url": "` + e.recv.url + `"}`}, http.StatusCreated)
	})
}

// A server without a webhook service has no webhook routes.
func TestWebhooksAbsent(t *testing.T) {
	srv := httptest.NewServer((&climatehttp.Server{Auth: climatehttp.NoAuth{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	defer srv.Close()
	e := &env{t: t, url: srv.URL}
	checkError(t, e.do(call{method: "GET", path: "/v1/webhooks"}), http.StatusNotFound, "/v1/webhooks")
	checkError(t, e.do(call{method: "POST", path: "/v1/webhooks", body: `{"url": "http://192.0.2.1/"}`}), http.StatusNotFound)
}
