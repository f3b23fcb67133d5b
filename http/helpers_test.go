package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/clock"
	climatehttp "climate/http"
	"climate/manager"
	"climate/sqlite"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// t0 is the fake clock's start: every created_at in the golden files derives from it.
var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// Identities for NoAuth, sent as headers. A nil map is the default admin.
var (
	asAdmin  map[string]string
	asAlice  = map[string]string{"X-User-Id": "alice", "X-Project-Id": "physics", "X-Roles": "member"}
	asBob    = map[string]string{"X-User-Id": "bob", "X-Project-Id": "chemistry", "X-Roles": "member"}
	asReader = map[string]string{"X-User-Id": "rita", "X-Project-Id": "physics", "X-Roles": "reader"}
	asGuest  = map[string]string{"X-User-Id": "gus", "X-Project-Id": "physics", "X-Roles": "guest"}
)

// env is a Climate API on a real HTTP server over a real SQLite store and a fake clock.
type env struct {
	t     testing.TB
	url   string
	clk   *clock.Fake
	store *sqlite.Store
	// recv is a webhook receiver that accepts every delivery (webhooks_test.go).
	recv *receiver
}

func newEnv(t testing.TB, auth climatehttp.Authenticator) *env {
	t.Helper()
	return newEnvServing(t, auth, func(m *manager.Manager) climate.LeaseService { return m })
}

// newEnvServing is newEnv whose API serves leases through leases(manager).
func newEnvServing(t testing.TB, auth climatehttp.Authenticator, leases func(*manager.Manager) climate.LeaseService) *env {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := clock.NewFake(t0)
	mgr := manager.New(store, clk, manager.Config{BeforeEnd: manager.DefaultBeforeEnd})
	if auth == nil {
		auth = climatehttp.NoAuth{}
	}
	recv := newReceiver(t, http.StatusNoContent)
	api := &climatehttp.Server{Leases: leases(mgr), Hosts: mgr, Availability: mgr, Auth: auth, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clk,
		Webhooks: webhookService(store, clk, true), FloatingIPs: mgr, Flavors: mgr}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close) // runs before store.Close
	return &env{t: t, url: srv.URL, clk: clk, store: store, recv: recv}
}

// call is one HTTP request. A body is sent as application/json unless header sets a
// Content-Type; a header value of "" removes that header.
type call struct {
	method, path string
	body         string
	header       map[string]string
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string {
	return fmt.Sprintf("%d %s", r.status, r.body)
}

func (e *env) do(c call) response {
	e.t.Helper()
	var body io.Reader = http.NoBody
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, e.url+c.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		if k == "Host" {
			req.Host = v // the client sends req.Host, not a Host header
			continue
		}
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading the body: %v", c.method, c.path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// mustDo sends c and fails the test unless the status is want; it returns the decoded body.
func (e *env) mustDo(c call, want int) map[string]any {
	e.t.Helper()
	r := e.do(c)
	if r.status != want {
		e.t.Fatalf("%s %s: got %s, want status %d", c.method, c.path, r, want)
	}
	if want == http.StatusNoContent {
		return nil
	}
	var out map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil {
		e.t.Fatalf("%s %s: body is not a JSON object: %v\n%s", c.method, c.path, err, r.body)
	}
	return out
}

var (
	uuidRE      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	requestIDRE = regexp.MustCompile(`^req-[0-9a-f]{8}-[0-9a-f]{4}-[47][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

// checkHeaders checks the headers every API response carries.
func checkHeaders(t testing.TB, r response) {
	t.Helper()
	if id := r.header.Get("X-OpenStack-Request-ID"); !requestIDRE.MatchString(id) {
		t.Errorf("X-OpenStack-Request-ID = %q, want req-<uuid4>", id)
	}
	if v := r.header.Get("OpenStack-API-Version"); v != "reservation 1.0" {
		t.Errorf("OpenStack-API-Version = %q, want \"reservation 1.0\"", v)
	}
	if v := r.header.Get("Vary"); v != "OpenStack-API-Version" {
		t.Errorf("Vary = %q, want OpenStack-API-Version", v)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
}

var errorNames = map[int]string{
	400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND",
	405: "METHOD_NOT_ALLOWED", 406: "NOT_ACCEPTABLE", 409: "CONFLICT", 413: "REQUEST_ENTITY_TOO_LARGE", 503: "SERVICE_UNAVAILABLE",
}

// checkError checks that r is Blazar's error body for status, with a message containing
// every one of msgs.
func checkError(t testing.TB, r response, status int, msgs ...string) {
	t.Helper()
	if r.status != status {
		t.Errorf("status = %d, want %d; body %s", r.status, status, r.body)
		if r.status < 400 {
			return
		}
	}
	checkErrorBody(t, r)
	var body struct {
		Message string `json:"error_message"`
		Name    string `json:"error_name"`
	}
	_ = json.Unmarshal(r.body, &body)
	if want := errorNames[status]; body.Name != want {
		t.Errorf("error_name = %q, want %q", body.Name, want)
	}
	for _, m := range msgs {
		if !strings.Contains(body.Message, m) {
			t.Errorf("error_message = %q, want it to contain %q", body.Message, m)
		}
	}
}

// checkErrorBody checks that r's body is exactly {"error_code", "error_message",
// "error_name"} with error_code equal to the status and a non-empty message and name.
func checkErrorBody(t testing.TB, r response) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	var body map[string]any
	if err := dec.Decode(&body); err != nil {
		t.Errorf("error body is not a JSON object: %v: %q", err, r.body)
		return
	}
	if len(body) != 3 {
		t.Errorf("error body has keys %v, want exactly error_code, error_message, error_name", keys(body))
	}
	if code, ok := body["error_code"].(json.Number); !ok || code.String() != strconv.Itoa(r.status) {
		t.Errorf("error_code = %#v, want the number %d", body["error_code"], r.status)
	}
	if msg, ok := body["error_message"].(string); !ok || strings.TrimSpace(msg) == "" {
		t.Errorf("error_message = %#v, want a non-empty string", body["error_message"])
	}
	if name, ok := body["error_name"].(string); !ok || name == "" {
		t.Errorf("error_name = %#v, want a non-empty string", body["error_name"])
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// normalizer makes response bodies comparable with golden files: it pretty-prints with
// sorted keys, sorts lease events (their order is unspecified), replaces the server's
// address, and replaces each distinct UUID by <uuid-N>, numbered in order of first
// appearance across everything it normalizes.
type normalizer struct {
	serverURL string
	ids       map[string]string
}

func newNormalizer(serverURL string) *normalizer {
	return &normalizer{serverURL: serverURL, ids: map[string]string{}}
}

func (n *normalizer) normalize(t testing.TB, body []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	sortEvents(v)
	if m, ok := v.(map[string]any); ok && m["climate"] != nil {
		m["climate"] = "<build>" // the version document's build: the toolchain's, not the API's
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(buf.String(), n.serverURL, "http://climate.test")
	s = uuidRE.ReplaceAllStringFunc(s, func(id string) string {
		p, ok := n.ids[id]
		if !ok {
			p = fmt.Sprintf("<uuid-%d>", len(n.ids)+1)
			n.ids[id] = p
		}
		return p
	})
	return []byte(s)
}

// sortEvents sorts every "events" list by time, then type.
func sortEvents(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if events, ok := x.([]any); ok && k == "events" {
				sort.SliceStable(events, func(i, j int) bool {
					a, _ := events[i].(map[string]any)
					b, _ := events[j].(map[string]any)
					at, _ := a["time"].(string)
					bt, _ := b["time"].(string)
					if at != bt {
						return at < bt
					}
					ae, _ := a["event_type"].(string)
					be, _ := b["event_type"].(string)
					return ae < be
				})
			}
			sortEvents(x)
		}
	case []any:
		for _, x := range v {
			sortEvents(x)
		}
	}
}

// golden compares got with testdata/<name>.golden.json, or rewrites it with -update.
func golden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./http/ -run %s -update to create it)", err, t.Name())
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Errorf("%s differs from line %d:\n  got:  %s\n  want: %s\nwhole response:\n%s\n(run with -update to accept)", path, i+1, g, w, got)
			return
		}
	}
}

// expand replaces {{name}} with vars[name] and fails on a placeholder left unexpanded.
func expand(t testing.TB, s string, vars map[string]string) string {
	t.Helper()
	for k, v := range vars {
		s = strings.ReplaceAll(s, "{{"+k+"}}", v)
	}
	if i := strings.Index(s, "{{"); i >= 0 {
		t.Fatalf("unexpanded placeholder in %q", s)
	}
	return s
}

// lookup returns the string at a dotted path ("lease.reservations.0.id") in v.
func lookup(t testing.TB, v any, path string) string {
	t.Helper()
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i >= len(x) {
				t.Fatalf("path %s: no element %s", path, part)
			}
			v = x[i]
		default:
			t.Fatalf("path %s: cannot index %T with %s", path, v, part)
		}
	}
	s, ok := v.(string)
	if !ok {
		t.Fatalf("path %s: got %#v, want a string", path, v)
	}
	return s
}

// patchJSON returns base (a JSON object) with patch's keys set; a patch value of the
// string "<delete>" removes the key.
func patchJSON(base, patch string) string {
	var b, p map[string]json.RawMessage
	if err := json.Unmarshal([]byte(base), &b); err != nil {
		panic(fmt.Sprintf("base %s: %v", base, err))
	}
	if err := json.Unmarshal([]byte(patch), &p); err != nil {
		panic(fmt.Sprintf("patch %s: %v", patch, err))
	}
	for k, v := range p {
		if string(v) == `"<delete>"` {
			delete(b, k)
		} else {
			b[k] = v
		}
	}
	out, err := json.Marshal(b)
	if err != nil {
		panic(err)
	}
	return string(out)
}
