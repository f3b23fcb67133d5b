package http_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	climatehttp "climate/http"
	"climate/keystone"
)

// fakeValidator stands in for Keystone: tokens it knows, a switch to make it unreachable,
// and a count of the validations that reached it. (The real Keystone: cmd/climate's
// keystone tests.)
type fakeValidator struct {
	mu      sync.Mutex
	tokens  map[string]*keystone.Token
	expired map[string]*keystone.Token // accepted only with allowExpired
	down    bool
	calls   atomic.Int64
	block   chan struct{} // if not nil, validations wait for it
}

func (f *fakeValidator) AuthURL() string { return "http://127.0.0.1:5000/v3" }

func (f *fakeValidator) Validate(_ context.Context, token string, allowExpired bool) (*keystone.Token, error) {
	f.calls.Add(1)
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, &keystone.UnavailableError{URL: f.AuthURL(), Reason: "is unreachable", Err: errors.New("connection refused")}
	}
	if t, ok := f.tokens[token]; ok {
		return t, nil
	}
	if t, ok := f.expired[token]; ok && allowExpired {
		return t, nil
	}
	return nil, keystone.ErrInvalidToken
}

func (f *fakeValidator) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

type fakeNow struct{ ns atomic.Int64 }

func (c *fakeNow) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeNow) advance(d time.Duration) { c.ns.Add(int64(d)) }
func newFakeNow(t time.Time) *fakeNow      { c := &fakeNow{}; c.ns.Store(t.UnixNano()); return c }
func ksToken(user, project string, roles ...string) *keystone.Token {
	return &keystone.Token{UserID: user, UserName: user + "-name", ProjectID: project, ProjectName: project + "-name",
		UserDomainID: "default", ProjectDomainID: "default", Roles: roles, ExpiresAt: t0.Add(time.Hour)}
}

func keystoneEnv(t *testing.T, cfg climatehttp.KeystoneConfig) (*env, *fakeValidator, *fakeNow, *climatehttp.Keystone) {
	f := &fakeValidator{tokens: map[string]*keystone.Token{
		"ks-admin": ksToken("root", "ops", "admin", "member", "reader"),
		"ks-alice": ksToken("alice", "physics", "member", "reader"),
		"ks-bob":   ksToken("bob", "chemistry", "member", "reader"),
		"ks-nova":  ksToken("nova", "service", "service"),
	}, expired: map[string]*keystone.Token{"ks-old": ksToken("olga", "physics", "member")}}
	clk := newFakeNow(t0)
	cfg.Now = clk.now
	auth := climatehttp.NewKeystone(f, cfg)
	return newEnv(t, auth), f, clk, auth
}

const challenge = `Keystone uri="http://127.0.0.1:5000/v3"`

func TestKeystoneAuth(t *testing.T) {
	e, f, _, _ := keystoneEnv(t, climatehttp.KeystoneConfig{})
	e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-1"}`, header: token("ks-admin")}, http.StatusCreated)
	l := e.mustDo(call{method: "POST", path: "/v1/leases", body: validLease, header: token("ks-alice")}, http.StatusCreated)
	if got := lookup(t, l, "lease.user_id") + "/" + lookup(t, l, "lease.project_id"); got != "alice/physics" {
		t.Errorf("alice's lease belongs to %s, want alice/physics", got)
	}
	lease := lookup(t, l, "lease.id")
	before := e.snapshot(token("ks-admin"), "/v1/leases", "/v1/os-hosts")
	svc := func(user, service string) map[string]string {
		return map[string]string{"X-Auth-Token": user, "X-Service-Token": service}
	}
	cases := []badCase{
		{name: "no token", call: call{method: "GET", path: "/v1/leases"}, status: 401, msg: []string{"X-Auth-Token"}},
		{name: "garbage", call: call{method: "POST", path: "/v1/leases", body: validLease, header: token("garbage")}, status: 401, msg: []string{"not valid"}},
		{name: "expired without service token", call: call{method: "GET", path: "/v1/leases", header: token("ks-old")}, status: 401},
		{name: "invalid service token", call: call{method: "GET", path: "/v1/leases", header: svc("ks-alice", "garbage")}, status: 401, msg: []string{"X-Service-Token"}},
		{name: "service token without the role", call: call{method: "GET", path: "/v1/leases", header: svc("ks-old", "ks-bob")}, status: 401, msg: []string{"none of the service roles (service)"}},
		{name: "identity headers only", call: call{method: "GET", path: "/v1/os-hosts", header: map[string]string{"X-Roles": "admin", "X-User-Id": "root"}}, status: 401},
		{name: "forged headers", call: call{method: "POST", path: "/v1/os-hosts", body: `{"name": "x"}`, header: map[string]string{"X-Auth-Token": "ks-alice", "X-Roles": "admin"}}, status: 403},
		{name: "member creates host", call: call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-2"}`, header: token("ks-alice")}, status: 403, msg: []string{"Policy doesn't allow"}},
		{name: "other project reads lease", call: call{method: "GET", path: "/v1/leases/" + lease, header: token("ks-bob")}, status: 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.call)
			checkHeaders(t, r)
			checkError(t, r, tc.status, tc.msg...)
			if r.status == http.StatusUnauthorized && r.header.Get("WWW-Authenticate") != challenge {
				t.Errorf("WWW-Authenticate = %q, want %q", r.header.Get("WWW-Authenticate"), challenge)
			}
			if after := e.snapshot(token("ks-admin"), "/v1/leases", "/v1/os-hosts"); after != before {
				t.Errorf("the state changed: %s", stateDiff(before, after))
				before = after
			}
		})
	}
	// An expired token beside a valid service token with role service: accepted.
	e.mustDo(call{method: "GET", path: "/v1/leases/" + lease, header: svc("ks-old", "ks-nova")}, 200)
	// Unscoped tokens are refused with the reason.
	f.set(func() { f.tokens["ks-unscoped"] = &keystone.Token{UserID: "u", ExpiresAt: t0.Add(time.Hour)} })
	r := e.do(call{method: "GET", path: "/v1/leases", header: token("ks-unscoped")})
	checkError(t, r, 403, "unscoped", "project-scoped")
}

// Validations are reused until min(expiry, TTL); refusals for NegativeTTL; Keystone's
// absence keeps cached tokens working and gives new ones 503.
func TestKeystoneCache(t *testing.T) {
	e, f, clk, auth := keystoneEnv(t, climatehttp.KeystoneConfig{CacheTTL: 2 * time.Second, NegativeTTL: time.Second})
	get := func(tok string) response { return e.do(call{method: "GET", path: "/v1/leases", header: token(tok)}) }
	for range 5 {
		if r := get("ks-alice"); r.status != 200 {
			t.Fatal(r)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("5 requests with one token: %d validations, want 1", n)
	}
	// Revoked at Keystone: cached until the TTL ends, then refused.
	f.set(func() { delete(f.tokens, "ks-alice") })
	clk.advance(1900 * time.Millisecond)
	if r := get("ks-alice"); r.status != 200 {
		t.Fatalf("within the TTL: %s", r)
	}
	clk.advance(200 * time.Millisecond)
	if r := get("ks-alice"); r.status != 401 {
		t.Fatalf("after the TTL: %s", r)
	}
	// Refusals are cached: a garbage flood reaches Keystone once a second per token.
	before := f.calls.Load()
	for range 20 {
		if r := get("garbage"); r.status != 401 {
			t.Fatal(r)
		}
	}
	if n := f.calls.Load() - before; n != 1 {
		t.Fatalf("20 garbage requests: %d validations, want 1", n)
	}
	clk.advance(1100 * time.Millisecond)
	get("garbage")
	if n := f.calls.Load() - before; n != 2 {
		t.Fatalf("after the negative TTL: %d validations, want 2", n)
	}
	// A token that expires before the TTL ends is not served past its expiry.
	f.set(func() {
		tk := ksToken("sam", "physics", "member")
		tk.ExpiresAt = clk.now().Add(500 * time.Millisecond)
		f.tokens["ks-short"] = tk
	})
	if r := get("ks-short"); r.status != 200 {
		t.Fatal(r)
	}
	f.set(func() { delete(f.tokens, "ks-short") })
	clk.advance(600 * time.Millisecond)
	if r := get("ks-short"); r.status != 401 {
		t.Fatalf("after its expiry: %s", r)
	}

	// Keystone down: the cached token works, a new one gets 503 (never 401, 500 or 200).
	if r := get("ks-bob"); r.status != 200 {
		t.Fatal(r)
	}
	f.set(func() { f.down = true })
	if r := get("ks-bob"); r.status != 200 {
		t.Fatalf("cached token while Keystone is down: %s", r)
	}
	r := get("ks-admin")
	checkError(t, r, 503, "Cannot validate the token: Keystone at http://127.0.0.1:5000/v3 is unreachable")
	if strings.Contains(string(r.body), "ks-admin") {
		t.Fatalf("the token is echoed: %s", r.body)
	}
	// Unavailability is not cached as a refusal.
	f.set(func() { f.down = false })
	if r := get("ks-admin"); r.status != 200 {
		t.Fatalf("Keystone back: %s", r)
	}
	hits, misses := auth.CacheStats()
	if hits == 0 || misses == 0 {
		t.Errorf("stats: %d hits, %d misses", hits, misses)
	}
}

// The cache holds at most CacheSize validations; the least recently used go first.
func TestKeystoneCacheBound(t *testing.T) {
	f := &fakeValidator{tokens: map[string]*keystone.Token{}}
	for i := range 5 {
		f.tokens[fmt.Sprint("t", i)] = ksToken(fmt.Sprint("u", i), "p", "member")
	}
	clk := newFakeNow(t0)
	auth := climatehttp.NewKeystone(f, climatehttp.KeystoneConfig{CacheSize: 3, Now: clk.now})
	check := func(tok string, calls int64) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://localhost/v1/leases", nil)
		req.Header.Set("X-Auth-Token", tok)
		before := f.calls.Load()
		if _, err := auth.Authenticate(req); err != nil {
			t.Fatal(err)
		}
		if n := f.calls.Load() - before; n != calls {
			t.Fatalf("%s: %d validations, want %d", tok, n, calls)
		}
	}
	check("t0", 1)
	check("t1", 1)
	check("t2", 1)
	check("t0", 0) // t1 is now the least recently used
	check("t3", 1) // evicts t1
	check("t0", 0)
	check("t2", 0)
	check("t1", 1)
}

// Concurrent first requests with one token make one validation.
func TestKeystoneSingleFlight(t *testing.T) {
	f := &fakeValidator{tokens: map[string]*keystone.Token{"tok": ksToken("u", "p", "member")}, block: make(chan struct{})}
	auth := climatehttp.NewKeystone(f, climatehttp.KeystoneConfig{Now: newFakeNow(t0).now})
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", "http://localhost/v1/leases", nil)
			req.Header.Set("X-Auth-Token", "tok")
			if _, err := auth.Authenticate(req); err != nil {
				t.Error(err)
			}
		}()
	}
	for f.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let the others join the flight
	close(f.block)
	wg.Wait()
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d validations for 10 concurrent requests, want 1", n)
	}
}
