package keystone

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeKeystone answers POST and GET /v3/auth/tokens as Keystone does, for the cases the
// real one (cmd/climate's tests) cannot produce on demand: 5xx, silence, a service token
// refused, a short-lived service token.
type fakeKeystone struct {
	mu          sync.Mutex
	issued      int           // service tokens issued
	lifetime    time.Duration // of service tokens
	validSvc    map[string]bool
	users       map[string]string // user token -> project id
	status      int               // forced status of validations, 0: none
	delay       time.Duration
	password    string
	validations atomic.Int64
	lastQuery   string
}

func newFake(t *testing.T) (*fakeKeystone, *httptest.Server) {
	f := &fakeKeystone{lifetime: time.Hour, validSvc: map[string]bool{}, users: map[string]string{"user-token": "p1"}, password: "pw"}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeKeystone) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path != "/v3/auth/tokens" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	now := time.Now().UTC()
	switch r.Method {
	case "POST":
		var body struct {
			Auth struct {
				Identity struct {
					Password struct {
						User struct{ Name, Password string }
					}
				}
			}
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body.Auth.Identity.Password.User.Password != f.password {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":{"code":401,"message":"The request you have made requires authentication.","title":"Unauthorized"}}`)
			return
		}
		f.issued++
		tok := fmt.Sprintf("svc-%d", f.issued)
		f.validSvc[tok] = true
		w.Header().Set("X-Subject-Token", tok)
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"token":{"expires_at":%q,"issued_at":%q,"user":{"id":"svc","name":"blazar","domain":{"id":"default"}},"roles":[{"name":"service"}]}}`,
			now.Add(f.lifetime).Format("2006-01-02T15:04:05.000000Z"), now.Format("2006-01-02T15:04:05.000000Z"))
	case "GET":
		f.validations.Add(1)
		f.lastQuery = r.URL.RawQuery
		if d := f.delay; d > 0 {
			f.mu.Unlock()
			time.Sleep(d)
			f.mu.Lock()
		}
		if f.status != 0 {
			w.WriteHeader(f.status)
			fmt.Fprint(w, `{"error":{"code":503,"message":"down","title":"Service Unavailable"}}`)
			return
		}
		if !f.validSvc[r.Header.Get("X-Auth-Token")] {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":{"code":401,"message":"The request you have made requires authentication.","title":"Unauthorized"}}`)
			return
		}
		project, ok := f.users[r.Header.Get("X-Subject-Token")]
		if !ok {
			w.WriteHeader(404)
			fmt.Fprint(w, `{"error":{"code":404,"message":"Could not recognize Fernet token","title":"Not Found"}}`)
			return
		}
		fmt.Fprintf(w, `{"token":{"methods":["password"],"user":{"domain":{"id":"default","name":"Default"},"id":"u1","name":"demo"},
			"expires_at":%q,"issued_at":%q,"project":{"domain":{"id":"default","name":"Default"},"id":%q,"name":"demo"},
			"roles":[{"id":"r1","name":"member"},{"id":"r2","name":"reader"}]}}`,
			now.Add(time.Hour).Format("2006-01-02T15:04:05.000000Z"), now.Format("2006-01-02T15:04:05.000000Z"), project)
	}
}

func (f *fakeKeystone) issuedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.issued
}

func cfgFor(srv *httptest.Server) Config {
	return Config{AuthURL: srv.URL + "/v3", Username: "blazar", Password: "pw", Project: "service", Timeout: time.Second}
}

func TestValidate(t *testing.T) {
	f, srv := newFake(t)
	c, err := New(context.Background(), cfgFor(srv))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.Validate(context.Background(), "user-token", false)
	if err != nil {
		t.Fatal(err)
	}
	if tok.UserID != "u1" || tok.UserName != "demo" || tok.ProjectID != "p1" || tok.ProjectName != "demo" || tok.UserDomainID != "default" ||
		tok.ProjectDomainID != "default" || strings.Join(tok.Roles, ",") != "member,reader" || time.Until(tok.ExpiresAt) < 59*time.Minute {
		t.Fatalf("token: %+v", tok)
	}
	if f.lastQuery != "nocatalog" {
		t.Errorf("query %q", f.lastQuery)
	}
	if _, err := c.Validate(context.Background(), "user-token", true); err != nil || f.lastQuery != "nocatalog&allow_expired=1" {
		t.Errorf("allow_expired: %v, query %q", err, f.lastQuery)
	}
	if _, err := c.Validate(context.Background(), "unknown", false); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("unknown token: %v", err)
	}
	// Not worth asking: no request goes out.
	before := f.validations.Load()
	for _, bad := range []string{"with space", "new\nline", strings.Repeat("a", MaxTokenLength+1), "é"} {
		if _, err := c.Validate(context.Background(), bad, false); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if n := f.validations.Load() - before; n != 0 {
		t.Errorf("%d requests for malformed tokens", n)
	}
	if got := c.Requests(); got != 4 { // 1 auth + 3 validations
		t.Errorf("Requests() = %d, want 4", got)
	}
}

func TestUnavailable(t *testing.T) {
	f, srv := newFake(t)
	c, err := New(context.Background(), cfgFor(srv))
	if err != nil {
		t.Fatal(err)
	}
	var ue *UnavailableError
	f.mu.Lock()
	f.status = 503
	f.mu.Unlock()
	if _, err := c.Validate(context.Background(), "user-token", false); !errors.As(err, &ue) || !strings.Contains(err.Error(), "answered 503") {
		t.Fatalf("503: %v", err)
	}
	f.mu.Lock()
	f.status, f.delay = 0, 1500*time.Millisecond
	f.mu.Unlock()
	if _, err := c.Validate(context.Background(), "user-token", false); !errors.As(err, &ue) || !strings.Contains(err.Error(), "did not answer in time") {
		t.Fatalf("slow: %v", err)
	}
	f.mu.Lock()
	f.delay = 0
	f.mu.Unlock()
	srv.Close()
	if _, err := c.Validate(context.Background(), "user-token", false); !errors.As(err, &ue) || err.Error() != "Keystone at "+srv.URL+"/v3 is unreachable" {
		t.Fatalf("closed: %v", err)
	}
}

// A service token that Keystone stops accepting (401) is replaced at once, and the
// validation retried; one that is about to expire is renewed before use.
func TestServiceTokenRenewal(t *testing.T) {
	f, srv := newFake(t)
	now := time.Now()
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	cfg := cfgFor(srv)
	cfg.Now = func() time.Time { return *clock.Load() }
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.validSvc = map[string]bool{} // revoked
	f.mu.Unlock()
	if _, err := c.Validate(context.Background(), "user-token", false); err != nil {
		t.Fatalf("after the service token was revoked: %v", err)
	}
	if n := f.issuedCount(); n != 2 {
		t.Fatalf("%d service tokens issued, want 2", n)
	}
	// 59 minutes later the token (1 h) expires within RenewBefore: renewed first.
	later := now.Add(59 * time.Minute)
	clock.Store(&later)
	if _, err := c.Validate(context.Background(), "user-token", false); err != nil {
		t.Fatal(err)
	}
	if n := f.issuedCount(); n != 3 {
		t.Fatalf("%d service tokens issued, want 3", n)
	}
	if exp := c.ServiceTokenExpiresAt(); time.Until(exp) < 59*time.Minute {
		t.Fatalf("service token expires at %v", exp)
	}
	// Renewal needs Keystone: unavailable, not invalid.
	much := now.Add(2 * time.Hour)
	clock.Store(&much)
	srv.Close()
	var ue *UnavailableError
	if _, err := c.Validate(context.Background(), "user-token", false); !errors.As(err, &ue) || !strings.Contains(err.Error(), "renewing Climate's service token") {
		t.Fatalf("renewal with Keystone down: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	_, srv := newFake(t)
	cfg := cfgFor(srv)
	cfg.Password = "wrong"
	_, err := New(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), `refused the service credentials of user "blazar" (domain Default) in project "service" (domain Default) (401)`) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong password: %v", err)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "no Keystone auth URL"},
		{Config{AuthURL: "keystone:5000"}, "want http(s)://"},
		{Config{AuthURL: srv.URL + "/v3"}, "no service credentials"},
		{Config{AuthURL: srv.URL + "/v3", Username: "blazar", Project: "service"}, "no password"},
		{Config{AuthURL: srv.URL + "/v3", Username: "blazar", Password: "pw"}, "no project"},
		{Config{AuthURL: srv.URL + "/v3", ApplicationCredentialID: "ac"}, "needs its secret"},
		{Config{AuthURL: srv.URL + "/v3", Username: "blazar", Password: "pw", Project: "service", CAFile: "/nonexistent"}, "Keystone CA file"},
	} {
		if _, err := New(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// Connect waits for a Keystone that is not up yet, for a bounded time.
func TestConnectWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := Config{AuthURL: "http://" + addr + "/v3", Username: "blazar", Password: "pw", Project: "service", Timeout: time.Second}
	start := time.Now()
	var retries int
	_, err = Connect(context.Background(), cfg, 1200*time.Millisecond, func(error, time.Duration) { retries++ })
	if err == nil || !strings.Contains(err.Error(), "is unreachable (gave up after 1.2s)") || retries < 2 || time.Since(start) > 5*time.Second {
		t.Fatalf("Connect to nothing: %v after %d retries in %v", err, retries, time.Since(start))
	}
	// Comes up during the wait.
	f := &fakeKeystone{lifetime: time.Hour, validSvc: map[string]bool{}, users: map[string]string{}, password: "pw"}
	go func() {
		time.Sleep(700 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		srv := &http.Server{Handler: f}
		t.Cleanup(func() { srv.Close() })
		_ = srv.Serve(ln)
	}()
	c, err := Connect(context.Background(), cfg, 10*time.Second, nil)
	if err != nil || c == nil {
		t.Fatalf("Connect to a late Keystone: %v", err)
	}
}
