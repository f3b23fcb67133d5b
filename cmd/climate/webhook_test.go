package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"climate/http/api"
	"climate/notify/webhook"
)

// hookReceiver is a webhook receiver on loopback that keeps every request it gets.
type hookReceiver struct {
	url  string
	mu   sync.Mutex
	got  []hookRequest
	code int
	// arrived is signalled after each request (dropped when nobody is waiting).
	arrived chan struct{}
	// held, while not nil, holds notifications (pings pass) unrecorded until it is closed
	// or the sender gives up, then answers 503: the webhook's deliveries stall.
	held chan struct{}
}

// hold makes the receiver hold deliveries until the returned release is called.
func (rc *hookReceiver) hold() (release func()) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	held := make(chan struct{})
	rc.held = held
	return func() {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		close(held)
		rc.held = nil
	}
}

type hookRequest struct {
	path, event, signature, delivery string
	at                               time.Time
	body                             []byte
}

func newHookReceiver(t testing.TB) *hookReceiver {
	rc := &hookReceiver{code: http.StatusNoContent, arrived: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		held := rc.held
		rc.mu.Unlock()
		if held != nil && r.Header.Get(webhook.EventHeader) != webhook.PingEvent {
			select {
			case <-held:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		at := time.Now()
		rc.mu.Lock()
		rc.got = append(rc.got, hookRequest{path: r.URL.Path, event: r.Header.Get(webhook.EventHeader), signature: r.Header.Get(webhook.SignatureHeader),
			delivery: r.Header.Get(webhook.DeliveryHeader), at: at, body: body})
		code := rc.code
		rc.mu.Unlock()
		w.WriteHeader(code)
		select {
		case rc.arrived <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL
	return rc
}

// byDelivery counts the notifications received (pings aside) by delivery id.
func (rc *hookReceiver) byDelivery() map[string]int {
	out := map[string]int{}
	for _, r := range rc.requests() {
		if r.event != webhook.PingEvent {
			out[r.delivery]++
		}
	}
	return out
}

// waitFor waits until the receiver has had n distinct notifications, or fails after d.
func (rc *hookReceiver) waitFor(t testing.TB, n int, d time.Duration) map[string]int {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		if got := rc.byDelivery(); len(got) >= n {
			return got
		}
		select {
		case <-rc.arrived:
		case <-deadline.C:
			t.Fatalf("the webhook receiver has %d of %d notifications after %v", len(rc.byDelivery()), n, d)
		}
	}
}

// requests returns what the receiver got so far.
func (rc *hookReceiver) requests() []hookRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hookRequest(nil), rc.got...)
}

// webhookJSON runs a command printing one webhook with -o json and decodes it.
func (c *cli) webhookJSON(args ...string) api.Webhook {
	c.t.Helper()
	out := c.ok(append(args, "-o", "json")...)
	var w api.Webhook
	if err := json.Unmarshal([]byte(out), &w); err != nil {
		c.t.Fatalf("climate %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
	return w
}

func TestCLIWebhooks(t *testing.T) {
	var o serveOptions
	o.notify.webhook.allowPrivate = true // the receiver is on loopback
	c := newCLI(t, o)
	rc := newHookReceiver(t)

	// create: the table shows the secret; a note on stderr says it is shown only now.
	out, errOut, err := runClimate(t, "webhook", "create", rc.url+"/all")
	if err != nil {
		t.Fatalf("webhook create: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "the secret is shown only now") || strings.Contains(out, "shown only now") {
		t.Errorf("webhook create: the note is not on stderr only:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(l)
		rows[f[0]] = strings.Join(f[1:], " ")
	}
	if !strings.HasPrefix(rows["secret"], "whsec_") || rows["url"] != rc.url+"/all" || rows["enabled"] != "true" || rows["project_id"] != "admin" {
		t.Fatalf("webhook create table:\n%s", out)
	}
	all, secret := rows["id"], rows["secret"]
	if got := rc.requests(); len(got) != 1 || got[0].event != webhook.PingEvent || webhook.Verify(secret, got[0].signature, got[0].body, time.Now(), time.Minute) != nil {
		t.Fatalf("the receiver got %+v, want one ping signed with %s", got, secret)
	}

	// --event (repeatable) and --secret-file, from a file and from standard input.
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("file-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	starts := c.webhookJSON("webhook", "create", rc.url+"/starts", "--event", "lease.event.start_lease", "--event", "lease.event.end_lease", "--secret-file", secretFile)
	if starts.Secret != "file-secret-0123456789" || strings.Join(starts.EventTypes, ",") != "lease.event.start_lease,lease.event.end_lease" {
		t.Fatalf("webhook create --event --secret-file: %+v", starts)
	}
	root := newRootCmd()
	var stdout bytes.Buffer
	root.SetArgs([]string{"webhook", "create", rc.url + "/stdin", "--secret-file", "-", "-o", "value", "-c", "secret"})
	root.SetIn(strings.NewReader("stdin-secret-0123456789\n"))
	root.SetOut(&stdout)
	root.SetErr(io.Discard)
	if err := root.Execute(); err != nil || stdout.String() != "stdin-secret-0123456789\n" {
		t.Fatalf("webhook create --secret-file -: %v %q", err, stdout.String())
	}
	stdinHook := strings.TrimSpace(c.ok("webhook", "list", "-o", "value", "-c", "id", "--reverse", "--no-headers"))
	stdinHook, _, _ = strings.Cut(stdinHook, "\n")

	// list: a table with the default columns, in creation order; no secrets anywhere.
	rows2 := lines(c.ok("webhook", "list"))
	want := [][]string{{"ID", "PROJECT", "ID", "URL", "EVENT", "TYPES", "ENABLED"},
		{all, "admin", rc.url + "/all", "true"},
		{starts.ID, "admin", rc.url + "/starts", "lease.event.start_lease,", "lease.event.end_lease", "true"},
		{stdinHook, "admin", rc.url + "/stdin", "true"}}
	if !equalRows(rows2, want) {
		t.Fatalf("webhook list:\n%q\nwant\n%q", rows2, want)
	}
	for _, args := range [][]string{{"webhook", "list", "-o", "json"}, {"webhook", "list", "-o", "yaml"}, {"webhook", "show", all, "-o", "json"}, {"webhook", "show", all}} {
		if out := c.ok(args...); strings.Contains(out, "secret") || strings.Contains(out, secret) {
			t.Errorf("climate %s shows the secret:\n%s", strings.Join(args, " "), out)
		}
	}
	var listed []api.Webhook
	if err := json.Unmarshal([]byte(c.ok("webhook", "list", "-o", "json")), &listed); err != nil || len(listed) != 3 || listed[1].ID != starts.ID || len(listed[0].EventTypes) != 0 {
		t.Fatalf("webhook list -o json: %v %+v", err, listed)
	}

	// show and update.
	if got := c.ok("webhook", "show", starts.ID, "-o", "value", "-c", "url,enabled"); got != rc.url+"/starts\ntrue\n" {
		t.Fatalf("webhook show -o value: %q", got)
	}
	w := c.webhookJSON("webhook", "update", starts.ID, "--disable")
	if w.Enabled || w.DisabledReason == "" {
		t.Fatalf("webhook update --disable: %+v", w)
	}
	if got := c.ok("webhook", "show", starts.ID, "-o", "value", "-c", "enabled"); got != "false\n" {
		t.Fatalf("disabled webhook shows enabled %q", got)
	}
	w = c.webhookJSON("webhook", "set", starts.ID, "--enable", "--all-events")
	if !w.Enabled || w.DisabledReason != "" || len(w.EventTypes) != 0 {
		t.Fatalf("webhook set --enable --all-events: %+v", w)
	}
	w = c.webhookJSON("webhook", "update", starts.ID, "--new-url", rc.url+"/moved", "--event", "lease.delete")
	if w.URL != rc.url+"/moved" || strings.Join(w.EventTypes, ",") != "lease.delete" {
		t.Fatalf("webhook update --new-url --event: %+v", w)
	}
	if got := rc.requests(); len(got) != 4 || got[3].event != webhook.PingEvent {
		t.Fatalf("a new URL gets a ping: the receiver got %d requests", len(got))
	}
	// --url is still the server's, as in every client command.
	if got := c.ok("webhook", "update", all, "--url", c.url, "--disable", "-o", "value", "-c", "enabled"); got != "false\n" {
		t.Fatalf("webhook update --url SERVER --disable: %q", got)
	}
	c.ok("webhook", "update", all, "--enable", "--url", c.url)

	// deliveries: a lease's creation reaches the all-events webhook, signed.
	if got := c.ok("webhook", "deliveries", all); strings.TrimSpace(got) != "SEQ  EVENT TYPE  LEASE ID  STATUS  ATTEMPTS  RESPONSE CODE  LAST ATTEMPT AT  LAST ERROR" {
		t.Fatalf("deliveries before any notification:\n%q", got)
	}
	c.ok("host", "create", "node-1")
	lease := c.leaseJSON("lease", "create", "hooked", "--reservation", "resource_type=physical:host,min=1,max=1", "--start-date", "+1h", "--end-date", "+1h")
	var ds []api.WebhookDelivery
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := json.Unmarshal([]byte(c.ok("webhook", "deliveries", all, "-o", "json")), &ds); err != nil {
			t.Fatal(err)
		}
		if len(ds) > 0 && ds[0].Status == "delivered" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(ds) != 1 || ds[0].EventType != "lease.create" || ds[0].LeaseID != lease.ID || ds[0].Status != "delivered" || ds[0].Attempts != 1 || ds[0].ResponseCode != 204 {
		t.Fatalf("deliveries after a lease's creation: %+v", ds)
	}
	var delivered *hookRequest
	for _, r := range rc.requests() {
		if r.event == "lease.create" && r.path == "/all" {
			delivered = &r
		}
	}
	if delivered == nil || webhook.Verify(secret, delivered.signature, delivered.body, time.Now(), time.Minute) != nil || !strings.Contains(string(delivered.body), lease.ID) {
		t.Fatalf("the lease.create delivery is missing or not signed with the webhook's secret: %+v", delivered)
	}
	rows2 = lines(c.ok("webhook", "deliveries", all, "--limit", "1", "--no-headers", "-c", "event_type,status,response_code,lease_id"))
	if !equalRows(rows2, [][]string{{"lease.create", "delivered", "204", lease.ID}}) {
		t.Fatalf("webhook deliveries --limit 1: %q", rows2)
	}

	// delete.
	if got := c.ok("webhook", "delete", starts.ID, stdinHook); got != "Deleted webhook "+starts.ID+"\nDeleted webhook "+stdinHook+"\n" {
		t.Fatalf("webhook delete: %q", got)
	}
	if got := c.ok("webhook", "list", "-o", "value", "-c", "id"); got != all+"\n" {
		t.Fatalf("after delete: %q", got)
	}

	// Completion lists the ids with their URL.
	if out := c.ok("__complete", "webhook", "show", ""); !strings.Contains(out, all+"\t"+rc.url+"/all") {
		t.Errorf("webhook id completion:\n%s", out)
	}
	if out := c.ok("__complete", "webhook", "create", "x", "--event", ""); !strings.Contains(out, "lease.event.start_lease") {
		t.Errorf("--event completion:\n%s", out)
	}

	// Errors: one line each, nothing on stdout, nothing stored.
	c.fails("did not accept a test delivery", "webhook", "create", "http://127.0.0.1:1/")
	c.fails(`Unknown event type "lease.nope"`, "webhook", "create", rc.url, "--event", "lease.nope")
	c.fails("the scheme must be http or https", "webhook", "create", "ftp://127.0.0.1/")
	c.fails("secret must be 16 to 256 characters long", "webhook", "create", rc.url, "--secret-file", writeFile(t, "short\n"))
	c.fails("no secret in it", "webhook", "create", rc.url, "--secret-file", writeFile(t, "\n"))
	c.fails("--secret-file: open", "webhook", "create", rc.url, "--secret-file", filepath.Join(t.TempDir(), "missing"))
	c.fails("give --project or --all-projects, not both", "webhook", "create", rc.url, "--project", "p", "--all-projects")
	c.fails("Webhook nope not found", "webhook", "show", "nope")
	c.fails("deleting webhook nope: Webhook nope not found", "webhook", "delete", "nope")
	c.fails("give --enable or --disable, not both", "webhook", "update", all, "--enable", "--disable")
	c.fails("give --event or --all-events, not both", "webhook", "update", all, "--event", "lease.create", "--all-events")
	c.fails("nothing to change", "webhook", "update", all)
	c.fails("--limit -1", "webhook", "deliveries", all, "--limit", "-1")
	c.fails("takes URL", "webhook", "create")
	if got := c.ok("webhook", "list", "-o", "value", "-c", "id"); got != all+"\n" {
		t.Fatalf("refused commands changed the webhooks: %q", got)
	}
}

// Members see and manage their project's webhooks only; every project's are for admins.
func TestCLIWebhookProjects(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("admin-token root ops admin\nalice-token alice physics member\nbob-token bob chemistry member\nrita-token rita physics reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := serveOptions{auth: "tokens", tokensFile: tokens}
	o.notify.webhook.allowPrivate = true
	c := newCLI(t, o)
	rc := newHookReceiver(t)
	mine := c.webhookJSON("webhook", "create", rc.url+"/physics", "--token", "alice-token")
	if mine.ProjectID != "physics" || mine.UserID != "alice" || mine.AllProjects {
		t.Fatalf("alice's webhook: %+v", mine)
	}
	every := c.webhookJSON("webhook", "create", rc.url+"/every", "--all-projects", "--token", "admin-token")
	if !every.AllProjects || every.ProjectID != "" {
		t.Fatalf("the admin's all-projects webhook: %+v", every)
	}
	if got := c.ok("webhook", "list", "-o", "value", "-c", "id", "--token", "alice-token"); got != mine.ID+"\n" {
		t.Errorf("alice lists %q, want her webhook only", got)
	}
	if got := c.ok("webhook", "list", "-o", "value", "-c", "id", "--token", "rita-token"); got != mine.ID+"\n" {
		t.Errorf("a physics reader lists %q, want alice's webhook", got)
	}
	if got := c.ok("webhook", "list", "-o", "value", "-c", "id", "--token", "bob-token"); got != "" {
		t.Errorf("bob lists %q, want nothing", got)
	}
	if got := c.ok("webhook", "list", "-o", "value", "-c", "id,all_projects", "--token", "admin-token"); got != mine.ID+" false\n"+every.ID+" true\n" {
		t.Errorf("the admin lists %q, want both", got)
	}
	c.fails("Webhook "+mine.ID+" not found", "webhook", "show", mine.ID, "--token", "bob-token")
	c.fails("not found", "webhook", "update", mine.ID, "--disable", "--token", "bob-token")
	c.fails("not found", "webhook", "deliveries", mine.ID, "--token", "bob-token")
	c.fails("not found", "webhook", "delete", mine.ID, "--token", "bob-token")
	c.fails("not found", "webhook", "show", every.ID, "--token", "alice-token")
	c.fails("Policy doesn't allow climate:webhooks:post", "webhook", "create", rc.url, "--token", "rita-token")
	c.fails("Only admins may subscribe to every project's notifications", "webhook", "create", rc.url, "--all-projects", "--token", "alice-token")
	c.fails("Only admins may subscribe to the notifications of another project", "webhook", "create", rc.url, "--project", "chemistry", "--token", "alice-token")
	if got := c.ok("webhook", "show", mine.ID, "-o", "value", "-c", "enabled", "--token", "alice-token"); got != "true\n" {
		t.Errorf("alice's webhook after bob's attempts: enabled %q", got)
	}
	c.ok("webhook", "delete", mine.ID, "--token", "admin-token")
}

func writeFile(t *testing.T, content string) string {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Without --webhook-allow-private, a webhook on loopback is refused with a message that
// says how to allow it.
func TestCLIWebhookPrivateRefused(t *testing.T) {
	c := newCLI(t, serveOptions{})
	rc := newHookReceiver(t)
	c.fails("is a loopback address", "webhook", "create", rc.url)
	c.fails("--webhook-allow-private", "webhook", "create", "http://10.0.0.1/")
	if got := rc.requests(); len(got) != 0 {
		t.Fatalf("the refused receiver got %d requests", len(got))
	}
	if got := c.ok("webhook", "list", "-o", "json"); strings.TrimSpace(got) != "[]" {
		t.Fatalf("webhooks stored: %s", got)
	}
}
