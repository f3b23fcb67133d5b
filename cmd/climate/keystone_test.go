package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"climate/bench"
	climatehttp "climate/http"
	"climate/keystone"
)

// The tests here run against a real OpenStack Keystone from Debian's packages (keystone,
// python3-openstackclient, sqlite3; uwsgi-core and uwsgi-plugin-python3 if present),
// started once per test binary by testdata/keystone-up.sh on a free loopback port and
// registered by testdata/keystone-register.sh. They skip when Keystone is not installed,
// and fail instead when CLIMATE_TEST_KEYSTONE=required (CI).

// testKeystone is a Keystone this test binary started.
type testKeystone struct {
	dir     string
	port    int
	url     string // http://127.0.0.1:PORT/v3
	climate string // the reservation endpoint registered in its catalog
	cmd     *exec.Cmd
	exited  chan struct{}
}

var (
	keystoneOnce  sync.Once
	sharedKS      *testKeystone
	sharedKSErr   error
	keystonesMu   sync.Mutex
	keystonesLive []*testKeystone
)

const keystoneServer = "/usr/bin/keystone-wsgi-public"

// needKeystone returns the shared Keystone, starting it on first use (about 20 s).
func needKeystone(t testing.TB) *testKeystone {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Keystone")
	}
	for _, bin := range []string{keystoneServer, "/usr/bin/keystone-manage", "/usr/bin/openstack", "/usr/bin/sqlite3"} {
		if _, err := os.Stat(bin); err != nil {
			if os.Getenv("CLIMATE_TEST_KEYSTONE") == "required" {
				t.Fatalf("Keystone is required here but %s is missing: %v", bin, err)
			}
			t.Skip("Keystone is not installed (apt-get install keystone python3-openstackclient sqlite3); CI installs it")
		}
	}
	keystoneOnce.Do(func() { sharedKS, sharedKSErr = startKeystone() })
	if sharedKSErr != nil {
		t.Fatalf("starting Keystone: %v", sharedKSErr)
	}
	return sharedKS
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startKeystone runs keystone-up.sh in the foreground mode (this process owns the
// server: its process group is killed by stopTestKeystones, and it dies with us), waits
// until it answers, and registers the reservation service at a free port that
// TestKeystoneOpenStackCLI serves on.
func startKeystone() (*testKeystone, error) {
	dir, err := os.MkdirTemp("", "climate-keystone-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	mode := "wsgiref"
	if _, err := os.Stat("/usr/lib/uwsgi/plugins/python3_plugin.so"); err == nil {
		mode = "uwsgi" // concurrent requests; wsgiref answers one at a time
	}
	script, _ := filepath.Abs("testdata/keystone-up.sh")
	k := &testKeystone{dir: dir, port: port, url: fmt.Sprintf("http://127.0.0.1:%d/v3", port), climate: fmt.Sprintf("http://127.0.0.1:%d/v1", cport)}
	k.cmd = exec.Command(script, dir, strconv.Itoa(port), mode)
	k.cmd.Env = append(os.Environ(), "KEYSTONE_FOREGROUND=1")
	if err := k.launch(); err != nil {
		return nil, err
	}
	if err := k.waitUp(90 * time.Second); err != nil {
		return nil, err
	}
	register, _ := filepath.Abs("testdata/keystone-register.sh")
	cmd := exec.Command(register, strconv.Itoa(port), k.climate)
	cmd.Env = append(withoutOS(os.Environ()), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("keystone-register.sh: %v\n%s", err, out)
	}
	return k, nil
}

// launch starts k.cmd in its own process group, killed with this process.
func (k *testKeystone) launch() error {
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	k.exited = make(chan struct{})
	if err := k.cmd.Start(); err != nil {
		return err
	}
	keystonesMu.Lock()
	keystonesLive = append(keystonesLive, k)
	keystonesMu.Unlock()
	go func() { _ = k.cmd.Wait(); close(k.exited) }()
	return nil
}

func (k *testKeystone) waitUp(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-k.exited:
			log, _ := os.ReadFile(filepath.Join(k.dir, "manage.log"))
			log2, _ := os.ReadFile(filepath.Join(k.dir, "keystone.log"))
			return fmt.Errorf("Keystone exited: %v\n%s\n%s", k.cmd.ProcessState, tail(log), tail(log2))
		default:
		}
		if resp, err := http.Get(k.url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(k.dir, "keystone.log"))
	return fmt.Errorf("Keystone on %s did not answer within %s\n%s", k.url, limit, tail(log))
}

func tail(b []byte) string {
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// stop kills the server's process group and waits for it.
func (k *testKeystone) stop() {
	pid := k.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-k.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-k.exited
	}
	// uwsgi's workers leave with their master (--die-on-term); make sure.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// stopTestKeystones stops the Keystones this binary started and removes their state
// (TestMain).
func stopTestKeystones() {
	keystonesMu.Lock()
	defer keystonesMu.Unlock()
	for _, k := range keystonesLive {
		k.stop()
		if k.dir != "" {
			os.RemoveAll(k.dir)
		}
	}
	keystonesLive = nil
}

// withoutOS drops OS_* variables, which would steer the openstack CLI elsewhere.
func withoutOS(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "OS_") {
			out = append(out, kv)
		}
	}
	return out
}

// token gets a project-scoped token for a user of domain Default.
func (k *testKeystone) token(t testing.TB, user, password, project string) string {
	t.Helper()
	body := fmt.Sprintf(`{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":%q,"domain":{"name":"Default"},"password":%q}}},"scope":{"project":{"name":%q,"domain":{"name":"Default"}}}}}`, user, password, project)
	resp, err := http.Post(k.url+"/auth/tokens", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	tok := resp.Header.Get("X-Subject-Token")
	if resp.StatusCode != 201 || tok == "" {
		t.Fatalf("token for %s: %d", user, resp.StatusCode)
	}
	return tok
}

// keystoneStatus is Keystone's own answer about a token (200, 404…), with a service
// token.
func (k *testKeystone) keystoneStatus(t *testing.T, svc, tok string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", k.url+"/auth/tokens?nocatalog", nil)
	req.Header.Set("X-Auth-Token", svc)
	req.Header.Set("X-Subject-Token", tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// revoke revokes a token (DELETE /v3/auth/tokens) as the admin.
func (k *testKeystone) revoke(t *testing.T, admin, tok string) {
	t.Helper()
	req, _ := http.NewRequest("DELETE", k.url+"/auth/tokens", nil)
	req.Header.Set("X-Auth-Token", admin)
	req.Header.Set("X-Subject-Token", tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
}

// keystoneServe is climate serve --auth keystone against k as the service user blazar,
// with the flags' defaults.
func keystoneServe(k *testKeystone) serveOptions {
	return serveOptions{auth: "keystone", keystone: keystoneOptions{
		url: k.url, username: "blazar", password: "blazarpass", project: "service",
		userDomain: "Default", projectDomain: "Default",
		timeout: keystone.DefaultTimeout, cacheTTL: climatehttp.DefaultKeystoneCacheTTL, cacheSize: climatehttp.DefaultKeystoneCacheSize,
		negativeTTL: climatehttp.DefaultKeystoneNegativeTTL, serviceRoles: []string{"service"}, startupWait: 10 * time.Second,
	}}
}

// apiResponse is an answer of the Climate API.
type apiResponse struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// ksCall sends a request with these headers (X-Auth-Token etc.).
func ksCall(t *testing.T, method, url, body string, header map[string]string) apiResponse {
	t.Helper()
	var rd io.Reader = http.NoBody
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	r := apiResponse{status: resp.StatusCode, header: resp.Header, raw: string(data)}
	_ = json.Unmarshal(data, &r.body)
	return r
}

func (r apiResponse) String() string { return fmt.Sprintf("%d %s", r.status, r.raw) }

func authTok(tok string) map[string]string { return map[string]string{"X-Auth-Token": tok} }

const keystoneLease = `{"name": %q, "start_date": "2030-01-01 10:00", "end_date": "2030-01-01 12:00",
	"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}], "events": []}`

func leaseNames(t *testing.T, r apiResponse) []string {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("list leases: %s", r)
	}
	var names []string
	for _, l := range r.body["leases"].([]any) {
		names = append(names, l.(map[string]any)["name"].(string))
	}
	return names
}

// climate serve --auth keystone with real tokens: roles, projects, refusals, a revoked
// token (cached until the TTL ends, on an injected clock), service tokens.
func TestKeystoneServe(t *testing.T) {
	k := needKeystone(t)
	var nowNS atomic.Int64
	nowNS.Store(time.Now().UnixNano())
	o := keystoneServe(k)
	o.keystone.cacheTTL = 2 * time.Second
	serverLog := &bench.CappedBuffer{Max: 4 << 20}
	o.logLevel, o.logTo = "debug", serverLog // to check that no token is logged
	o.keystone.now = func() time.Time { return time.Unix(0, nowNS.Load()) }
	var client *keystone.Client
	o.keystone.connected = func(c *keystone.Client, _ *climatehttp.Keystone) { client = c }
	s := startServer(t, o)
	if !strings.Contains(s.output.String(), "(auth: keystone") {
		t.Fatalf("output: %s", s.output)
	}

	admin := k.token(t, "admin", "adminpass", "admin")
	demo := k.token(t, "demo", "demopass", "demo")
	demo2 := k.token(t, "demo2", "demo2pass", "other")
	blazar := k.token(t, "blazar", "blazarpass", "service")

	// The admin registers hosts; a member cannot, with Blazar's words.
	for _, h := range []string{"node-1", "node-2"} {
		if r := ksCall(t, "POST", s.url+"/v1/os-hosts", fmt.Sprintf(`{"name": %q}`, h), authTok(admin)); r.status != 201 {
			t.Fatalf("admin creates host: %s", r)
		}
	}
	r := ksCall(t, "POST", s.url+"/v1/os-hosts", `{"name": "node-x"}`, authTok(demo))
	if r.status != 403 || r.body["error_message"] != "Policy doesn't allow blazar:oshosts:post to be performed." {
		t.Fatalf("member creates host: %s", r)
	}

	// A member creates and lists a lease; it belongs to demo's user and project.
	r = ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(keystoneLease, "demo-lease"), authTok(demo))
	if r.status != 201 {
		t.Fatalf("demo creates a lease: %s", r)
	}
	lease := r.body["lease"].(map[string]any)
	leaseID := lease["id"].(string)
	{
		v, err := client.Validate(context.Background(), demo, false)
		if err != nil {
			t.Fatal(err)
		}
		if lease["project_id"] != v.ProjectID || lease["user_id"] != v.UserID || v.ProjectName != "demo" || v.UserName != "demo" {
			t.Fatalf("lease %v, token %+v", lease, v)
		}
	}
	if names := leaseNames(t, ksCall(t, "GET", s.url+"/v1/leases", "", authTok(demo))); len(names) != 1 || names[0] != "demo-lease" {
		t.Fatalf("demo's leases: %v", names)
	}
	// Limits are set on projects Keystone knows, by id; a mistyped one is a 404.
	if r := ksCall(t, "PUT", s.url+"/v1/projects/"+lease["project_id"].(string)+"/limits", `{"max_leases": 50}`, authTok(admin)); r.status != 200 {
		t.Errorf("admin sets demo's limits: %s", r)
	}
	if r := ksCall(t, "PUT", s.url+"/v1/projects/no-such-project/limits", `{"max_leases": 50}`, authTok(admin)); r.status != 404 {
		t.Errorf("admin sets an unknown project's limits: %s", r)
	}
	if r := ksCall(t, "GET", s.url+"/v1/projects/"+lease["project_id"].(string)+"/limits", "", authTok(demo)); r.status != 200 {
		t.Errorf("demo reads its own limits: %s", r)
	}
	// A member of another project sees only its own project's leases.
	if r := ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(keystoneLease, "other-lease"), authTok(demo2)); r.status != 201 {
		t.Fatalf("demo2 creates a lease: %s", r)
	}
	if names := leaseNames(t, ksCall(t, "GET", s.url+"/v1/leases", "", authTok(demo2))); len(names) != 1 || names[0] != "other-lease" {
		t.Fatalf("demo2's leases: %v", names)
	}
	if names := leaseNames(t, ksCall(t, "GET", s.url+"/v1/leases", "", authTok(demo))); len(names) != 1 || names[0] != "demo-lease" {
		t.Fatalf("demo's leases: %v", names)
	}
	if r := ksCall(t, "GET", s.url+"/v1/leases/"+leaseID, "", authTok(demo2)); r.status != 404 {
		t.Fatalf("demo2 reads demo's lease: %s", r)
	}
	if r := ksCall(t, "DELETE", s.url+"/v1/leases/"+leaseID, "", authTok(demo2)); r.status != 404 {
		t.Fatalf("demo2 deletes demo's lease: %s", r)
	}

	state := func() string {
		return ksCall(t, "GET", s.url+"/v1/leases", "", authTok(admin)).raw + ksCall(t, "GET", s.url+"/v1/os-hosts", "", authTok(admin)).raw
	}
	before := state()
	challenge := `Keystone uri="` + k.url + `"`
	refused := func(what string, r apiResponse, status int, msg string) {
		t.Helper()
		if r.status != status || !strings.Contains(r.body["error_message"].(string), msg) || r.body["error_code"] != float64(status) {
			t.Errorf("%s: %s, want %d %q", what, r, status, msg)
		}
		if status == 401 && r.header.Get("WWW-Authenticate") != challenge {
			t.Errorf("%s: WWW-Authenticate %q, want %q", what, r.header.Get("WWW-Authenticate"), challenge)
		}
	}
	refused("garbage token", ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(keystoneLease, "garbage-lease"), authTok("gAAAAABgarbage")), 401, "the token is not valid")
	refused("garbage token, host", ksCall(t, "POST", s.url+"/v1/os-hosts", `{"name": "node-g"}`, authTok("garbage")), 401, "the token is not valid")
	refused("no token", ksCall(t, "POST", s.url+"/v1/os-hosts", `{"name": "node-g"}`, nil), 401, "X-Auth-Token")
	refused("a token's tail", ksCall(t, "GET", s.url+"/v1/leases", "", authTok(demo[1:])), 401, "not valid")

	// X-Service-Token: a service-role token lets the user token through; a token without
	// the role, or an invalid one, is refused.
	with := func(user, svc string) map[string]string {
		return map[string]string{"X-Auth-Token": user, "X-Service-Token": svc}
	}
	if r := ksCall(t, "GET", s.url+"/v1/leases/"+leaseID, "", with(demo, blazar)); r.status != 200 {
		t.Fatalf("demo with blazar's service token: %s", r)
	}
	refused("service token without the service role", ksCall(t, "GET", s.url+"/v1/leases", "", with(demo, demo2)), 401, "none of the service roles (service)")
	refused("invalid service token", ksCall(t, "GET", s.url+"/v1/leases", "", with(demo, "garbage")), 401, "X-Service-Token")
	if after := state(); after != before {
		t.Fatalf("refused requests changed the state:\n%s\n%s", before, after)
	}

	// A revoked token: Keystone refuses it at once, Climate serves it from the cache
	// until the TTL (2 s on the injected clock) ends, then refuses it.
	demoB := k.token(t, "demo", "demopass", "demo")
	if r := ksCall(t, "GET", s.url+"/v1/leases", "", authTok(demoB)); r.status != 200 {
		t.Fatal(r)
	}
	k.revoke(t, admin, demoB)
	if st := k.keystoneStatus(t, blazar, demoB); st != 404 {
		t.Fatalf("Keystone on the revoked token: %d", st)
	}
	nowNS.Add(int64(1500 * time.Millisecond))
	if r := ksCall(t, "GET", s.url+"/v1/leases", "", authTok(demoB)); r.status != 200 {
		t.Fatalf("revoked token within the cache TTL: %s", r)
	}
	nowNS.Add(int64(600 * time.Millisecond))
	refused("revoked token after the cache TTL", ksCall(t, "GET", s.url+"/v1/leases", "", authTok(demoB)), 401, "not valid")

	// The member deletes its lease; the admin a host.
	if r := ksCall(t, "DELETE", s.url+"/v1/leases/"+leaseID, "", authTok(demo)); r.status != 204 {
		t.Fatalf("demo deletes its lease: %s", r)
	}
	hosts := ksCall(t, "GET", s.url+"/v1/os-hosts", "", authTok(admin)).body["hosts"].([]any)
	if len(hosts) != 2 {
		t.Fatalf("hosts: %v", hosts)
	}

	// Tokens never reach the log.
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	logged := s.output.String() + serverLog.String()
	if !strings.Contains(logged, "validating tokens with Keystone") || !strings.Contains(logged, "status=401") {
		t.Fatalf("not the log expected:\n%s", logged)
	}
	for _, tok := range []string{admin, demo, demo2, blazar, demoB} {
		if strings.Contains(logged, tok[:40]) {
			t.Fatalf("a token is in the log:\n%s", logged)
		}
	}
	if strings.Contains(logged, "blazarpass") {
		t.Fatalf("the password is in the log:\n%s", logged)
	}
}

// A user token that has expired passes with a valid service token (allow_expired), as
// with keystonemiddleware; then Keystone dies: cached tokens keep working, new ones get
// 503 with the reason, never 500 nor 200. A second Keystone process on the same database
// and keys issues tokens that expire after 3 s (and is the one killed).
func TestKeystoneExpiredAndDown(t *testing.T) {
	k := needKeystone(t)
	short, err := k.startShortLived(3)
	if err != nil {
		t.Fatal(err)
	}
	defer short.stop()
	o := keystoneServe(short)
	o.keystone.timeout = 2 * time.Second
	serverLog := &bench.CappedBuffer{Max: 1 << 20}
	o.logLevel, o.logTo = "warn", serverLog
	s := startServer(t, o)
	admin := k.token(t, "admin", "adminpass", "admin")
	if r := ksCall(t, "POST", s.url+"/v1/os-hosts", `{"name": "node-1"}`, authTok(admin)); r.status != 201 {
		t.Fatalf("admin creates host: %s", r)
	}
	// demo's lease, with a token of the long-lived Keystone (its creation makes a trust
	// with the caller's token, which an expired token could not).
	demo := k.token(t, "demo", "demopass", "demo")
	if r := ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(keystoneLease, "continued"), authTok(demo)); r.status != 201 {
		t.Fatalf("demo creates a lease: %s", r)
	}
	blazar := k.token(t, "blazar", "blazarpass", "service")
	old := short.token(t, "demo", "demopass", "demo") // expires in 3 s
	deadline := time.Now().Add(30 * time.Second)
	for k.keystoneStatus(t, blazar, old) == 200 {
		if time.Now().After(deadline) {
			t.Fatal("the 3 s token did not expire in 30 s")
		}
		time.Sleep(250 * time.Millisecond)
	}
	r := ksCall(t, "GET", s.url+"/v1/leases", "", authTok(old))
	if r.status != 401 || r.header.Get("WWW-Authenticate") != `Keystone uri="`+short.url+`"` {
		t.Fatalf("expired token alone: %s %v", r, r.header)
	}
	with := map[string]string{"X-Auth-Token": old, "X-Service-Token": blazar}
	if names := leaseNames(t, ksCall(t, "GET", s.url+"/v1/leases", "", with)); len(names) != 1 || names[0] != "continued" {
		t.Fatalf("expired token with a service token: %v", names)
	}

	// Keystone dies. demo's cached token still works; demo2's new one gets 503.
	if names := leaseNames(t, ksCall(t, "GET", s.url+"/v1/leases", "", authTok(demo))); len(names) != 1 || names[0] != "continued" {
		t.Fatalf("demo's leases: %v", names)
	}
	demo2 := k.token(t, "demo2", "demo2pass", "other")
	short.stop()
	if r := ksCall(t, "GET", s.url+"/v1/leases", "", authTok(demo)); r.status != 200 {
		t.Fatalf("cached token with Keystone down: %s", r)
	}
	for _, tok := range []string{demo2, "garbage-never-seen"} {
		r := ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(keystoneLease, "during-outage"), authTok(tok))
		// "unreachable", or "unreachable (renewing Climate's service token)" when the
		// 3-second service token was due for renewal at that moment.
		want := "Cannot validate the token: Keystone at " + short.url + " is unreachable"
		msg, _ := r.body["error_message"].(string)
		if r.status != 503 || !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, "; try again later") || r.body["error_name"] != "SERVICE_UNAVAILABLE" {
			t.Fatalf("new token with Keystone down: %s, want 503 %q…", r, want)
		}
	}
	if names := leaseNames(t, ksCall(t, "GET", s.url+"/v1/leases", "", authTok(demo))); len(names) != 1 {
		t.Fatalf("leases after the outage: %v", names)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(serverLog.String(), "cannot validate new tokens") {
		t.Fatalf("no warning in the log:\n%s", serverLog)
	}
}

// startShortLived runs a second Keystone (the wsgiref server) on k's database and keys,
// whose tokens expire after seconds.
func (k *testKeystone) startShortLived(seconds int) (*testKeystone, error) {
	conf, err := os.ReadFile(filepath.Join(k.dir, "keystone.conf"))
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "climate-keystone-short-")
	if err != nil {
		return nil, err
	}
	short := strings.Replace(string(conf), "expiration = 3600", fmt.Sprintf("expiration = %d", seconds), 1)
	if short == string(conf) {
		return nil, errors.New("keystone.conf has no expiration = 3600")
	}
	if err := os.WriteFile(filepath.Join(dir, "keystone.conf"), []byte(short), 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &testKeystone{dir: dir, port: port, url: fmt.Sprintf("http://127.0.0.1:%d/v3", port)}
	s.cmd = exec.Command(keystoneServer, "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	s.cmd.Env = append(os.Environ(), "OS_KEYSTONE_CONFIG_DIR="+dir)
	logf, err := os.Create(filepath.Join(dir, "keystone.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.launch(); err != nil {
		return nil, err
	}
	if err := s.waitUp(60 * time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// Startup: refused credentials fail at once, an unreachable Keystone after the bounded
// wait, both clearly and without the password; keystone mode may listen on any address.
func TestKeystoneServeStartup(t *testing.T) {
	k := needKeystone(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := keystoneServe(k)
	o.keystone.password = "wrong-password"
	o.dataDir, o.listen, o.role, o.logLevel = t.TempDir(), "127.0.0.1:0", "all", "error"
	start := time.Now()
	err := runServe(context.Background(), &o, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `refused the service credentials of user "blazar" (domain Default) in project "service" (domain Default) (401)`) ||
		strings.Contains(err.Error(), "wrong-password") || time.Since(start) > 10*time.Second {
		t.Fatalf("wrong password: %v", err)
	}
	port, _ := freePort()
	o = keystoneServe(k)
	o.keystone.url = fmt.Sprintf("http://127.0.0.1:%d/v3", port)
	o.keystone.startupWait = 1500 * time.Millisecond
	o.dataDir, o.listen, o.role, o.logLevel = t.TempDir(), "127.0.0.1:0", "all", "error"
	err = runServe(context.Background(), &o, io.Discard)
	if err == nil || err.Error() != fmt.Sprintf("--auth keystone: Keystone at http://127.0.0.1:%d/v3 is unreachable (gave up after 1.5s)", port) {
		t.Fatalf("no Keystone: %v", err)
	}
	for _, tc := range []struct {
		change func(*keystoneOptions)
		want   string
	}{
		{func(o *keystoneOptions) { o.url = "" }, "--auth keystone needs --keystone-url"},
		{func(o *keystoneOptions) { o.password = "" }, "set CLIMATE_KEYSTONE_PASSWORD"},
		{func(o *keystoneOptions) { o.project = "" }, "--keystone-project"},
		{func(o *keystoneOptions) { o.appCredID = "ac" }, "CLIMATE_KEYSTONE_APPLICATION_CREDENTIAL_SECRET"},
		{func(o *keystoneOptions) { o.cacheSize = 0 }, "--keystone-cache-size 0"},
	} {
		o := keystoneServe(k)
		tc.change(&o.keystone)
		if _, err := keystoneConnect(context.Background(), &o.keystone, log); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
	// Like tokens mode, keystone mode may listen beyond loopback (nothing listens here).
	o = keystoneServe(k)
	o.listen = "0.0.0.0:1234"
	ks, err := keystoneConnect(context.Background(), &o.keystone, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := authenticator(&o, ks, log); err != nil {
		t.Fatalf("keystone mode on 0.0.0.0: %v", err)
	}
}

// The real clients through Keystone's catalog with password auth, as users type them:
// openstack reservation host and lease commands as the admin and as a member, blazar
// lease-list, and the member's refusals.
func TestKeystoneOpenStackCLI(t *testing.T) {
	k := needKeystone(t)
	for _, bin := range []string{"/usr/bin/openstack", "/usr/bin/blazar"} {
		if _, err := os.Stat(bin); err != nil {
			if os.Getenv("CLIMATE_TEST_KEYSTONE") == "required" {
				t.Fatalf("%s is required here: %v", bin, err)
			}
			t.Skip(bin + " is not installed")
		}
	}
	o := keystoneServe(k)
	o.listen = strings.TrimSuffix(strings.TrimPrefix(k.climate, "http://"), "/v1") // the catalog's endpoint
	startServer(t, o)
	home := t.TempDir()
	openrc := func(user, password, project string) []string {
		return append(withoutOS(os.Environ()), "HOME="+home, "OS_AUTH_TYPE=password", "OS_AUTH_URL="+k.url,
			"OS_IDENTITY_API_VERSION=3", "OS_USERNAME="+user, "OS_PASSWORD="+password, "OS_PROJECT_NAME="+project,
			"OS_USER_DOMAIN_NAME=Default", "OS_PROJECT_DOMAIN_NAME=Default", "OS_REGION_NAME=RegionOne", "OS_INTERFACE=public")
	}
	adminEnv, demoEnv, demo2Env := openrc("admin", "adminpass", "admin"), openrc("demo", "demopass", "demo"), openrc("demo2", "demo2pass", "other")
	// try runs a client and returns what it printed: its output, or on failure its
	// error text.
	try := func(env []string, bin string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return stderr.String() + stdout.String(), err
		}
		return stdout.String(), nil
	}
	osc := func(env []string, v any, args ...string) string {
		t.Helper()
		if v != nil {
			args = append(args, "-f", "json")
		}
		out, err := try(env, "/usr/bin/openstack", append([]string{"reservation"}, args...)...)
		if err != nil {
			t.Fatalf("openstack reservation %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if v != nil {
			js := out
			if i := strings.IndexAny(js, "{["); i > 0 {
				js = js[i:] // "Created a new …:" comes first
			}
			if err := json.Unmarshal([]byte(js), v); err != nil {
				t.Fatalf("openstack reservation %s: not JSON (%v): %s", strings.Join(args, " "), err, out)
			}
		}
		return out
	}
	refused := func(env []string, want string, bin string, args ...string) {
		t.Helper()
		out, err := try(env, bin, args...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("%s %s: %v, want a refusal with %q:\n%s", bin, strings.Join(args, " "), err, want, out)
		}
	}

	// Hosts, as the admin.
	var host map[string]any
	osc(adminEnv, &host, "host", "create", "--extra", "gpu=true", "node-1")
	if host["hypervisor_hostname"] != "node-1" || host["gpu"] != "true" {
		t.Fatalf("host create: %v", host)
	}
	var hosts []map[string]any
	if osc(adminEnv, &hosts, "host", "list"); len(hosts) != 1 || hosts[0]["hypervisor_hostname"] != "node-1" {
		t.Fatalf("host list: %v", hosts)
	}
	if out := osc(adminEnv, nil, "host", "set", "--extra", "rack=r2", "node-1"); !strings.Contains(out, "Updated host") {
		t.Fatalf("host set: %s", out)
	}
	var shown map[string]any
	if osc(adminEnv, &shown, "host", "show", "node-1"); shown["rack"] != "r2" || shown["gpu"] != "true" {
		t.Fatalf("host show: %v", shown)
	}
	// A member may not create hosts: the CLI shows Blazar's refusal.
	refused(demoEnv, "Policy doesn't allow blazar:oshosts:post to be performed.", "/usr/bin/openstack", "reservation", "host", "create", "node-x")
	refused(demoEnv, "Policy doesn't allow blazar:oshosts:post to be performed.", "/usr/bin/blazar", "host-create", "node-y")

	// Leases, as a member and as the admin.
	lease := func(env []string, name string) map[string]any {
		var l map[string]any
		osc(env, &l, "lease", "create", "--start-date", "2030-01-01 10:00", "--end-date", "2030-01-01 12:00",
			"--reservation", "resource_type=physical:host,min=1,max=1", name)
		if l["name"] != name || l["status"] != "PENDING" {
			t.Fatalf("lease create %s: %v", name, l)
		}
		return l
	}
	names := func(env []string) []string {
		var ls []map[string]any
		osc(env, &ls, "lease", "list")
		var out []string
		for _, l := range ls {
			out = append(out, l["name"].(string))
		}
		return out
	}
	demoLease := lease(demoEnv, "demo-lease")
	if n := names(demoEnv); len(n) != 1 || n[0] != "demo-lease" {
		t.Fatalf("demo's lease list: %v", n)
	}
	osc(demoEnv, nil, "lease", "set", "--name", "demo-renamed", "demo-lease")
	var l map[string]any
	if osc(demoEnv, &l, "lease", "show", "demo-renamed"); l["id"] != demoLease["id"] {
		t.Fatalf("lease show: %v", l)
	}
	// blazar's own CLI lists it too.
	out, err := try(demoEnv, "/usr/bin/blazar", "lease-list", "-f", "json")
	if err != nil || !strings.Contains(out, `"demo-renamed"`) {
		t.Fatalf("blazar lease-list: %v\n%s", err, out)
	}
	// Another project's member sees nothing of it.
	if n := names(demo2Env); len(n) != 0 {
		t.Fatalf("demo2's lease list: %v", n)
	}
	refused(demo2Env, "not found", "/usr/bin/openstack", "reservation", "lease", "show", demoLease["id"].(string))
	if out, err := try(demo2Env, "/usr/bin/blazar", "lease-list", "-f", "json"); err != nil || strings.Contains(out, "demo-renamed") {
		t.Fatalf("demo2's blazar lease-list: %v\n%s", err, out)
	}
	// The admin's own lease (the only free host is held by demo's: a second one first).
	osc(adminEnv, &host, "host", "create", "node-2")
	lease(adminEnv, "admin-lease")
	osc(adminEnv, nil, "lease", "set", "--end-date", "2030-01-01 13:00", "admin-lease")
	if osc(adminEnv, &l, "lease", "show", "admin-lease"); !strings.HasPrefix(fmt.Sprint(l["end_date"]), "2030-01-01T13:00") {
		t.Fatalf("admin's lease after set: %v", l)
	}
	if out := osc(adminEnv, nil, "lease", "delete", "admin-lease"); !strings.Contains(out, "Deleted lease") {
		t.Fatalf("admin lease delete: %s", out)
	}
	if out := osc(demoEnv, nil, "lease", "delete", "demo-renamed"); !strings.Contains(out, "Deleted lease") {
		t.Fatalf("demo lease delete: %s", out)
	}
	if n := names(demoEnv); len(n) != 0 {
		t.Fatalf("after delete: %v", n)
	}
	for _, h := range []string{"node-1", "node-2"} {
		if out := osc(adminEnv, nil, "host", "delete", h); !strings.Contains(out, "Deleted host") {
			t.Fatalf("host delete %s: %s", h, out)
		}
	}
	if osc(adminEnv, &hosts, "host", "list"); len(hosts) != 0 {
		t.Fatalf("hosts after delete: %v", hosts)
	}
}
