package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// server is a `climate serve` running in this process on a free loopback port.
type server struct {
	url     string
	dataDir string
	output  *lockedBuffer
	stop    func() error
}

// startServer runs runServe in the background and returns once it listens.
func startServer(t testing.TB, o serveOptions) *server {
	t.Helper()
	if o.dataDir == "" {
		o.dataDir = t.TempDir()
	}
	if o.listen == "" {
		o.listen = "127.0.0.1:0"
	}
	if o.auth == "" {
		o.auth = "noauth"
	}
	if o.role == "" {
		o.role = "all"
	}
	if o.logLevel == "" {
		o.logLevel = "error"
	}
	o.beforeEnd = time.Hour
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, &o, pw)
		pw.Close()
	}()
	s := &server{dataDir: o.dataDir, output: &lockedBuffer{}}
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		line := lines.Text()
		s.output.WriteString(line + "\n")
		if i := strings.Index(line, "listening on "); i >= 0 {
			s.url = strings.Fields(line[i+len("listening on "):])[0]
			break
		}
		if o.role == "engine" && strings.Contains(line, "event engine running") {
			break // no API: no URL
		}
	}
	if s.url == "" && o.role != "engine" {
		cancel()
		t.Fatalf("server did not start: %v\n%s", <-done, s.output)
	}
	drained := make(chan struct{})
	go func() {
		for lines.Scan() {
			s.output.WriteString(lines.Text() + "\n")
		}
		close(drained)
	}()
	var stopped bool
	s.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		err := <-done
		<-drained
		return err
	}
	t.Cleanup(func() { _ = s.stop() })
	return s
}

// lockedBuffer is the server's output, written by its reader goroutine while tests read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestServePrintsAddressAndDataAndStopsCleanly(t *testing.T) {
	s := startServer(t, serveOptions{})
	resp, err := http.Get(s.url + "/v1/leases")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/leases: %d", resp.StatusCode)
	}
	if err := s.stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	out := s.output.String()
	if !strings.Contains(out, "Data: "+filepath.Join(s.dataDir, "climate.db")) || !strings.Contains(out, "Shutting down") {
		t.Fatalf("output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(s.dataDir, "climate.db")); err != nil {
		t.Fatalf("no database file: %v", err)
	}
}

func TestServeRefusesUnsafeSettings(t *testing.T) {
	readable := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(readable, []byte("admin-token root ops admin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		o    serveOptions
		want string
	}{
		{serveOptions{listen: "0.0.0.0:0", auth: "noauth", role: "all"}, "refusing to listen on 0.0.0.0:0 without authentication"},
		{serveOptions{listen: "127.0.0.1:0", auth: "tokens", tokensFile: readable, role: "all"}, "readable by others than its owner): run chmod 600 " + readable},
		{serveOptions{listen: "127.0.0.1:0", auth: "noauth", role: "all", trustedOrigins: []string{"not an origin"}}, `--trusted-origin "not an origin"`},
		{serveOptions{listen: "[::]:0", auth: "noauth", role: "all"}, "without authentication"},
		{serveOptions{listen: "127.0.0.1:0", auth: "tokens", role: "all"}, "--auth tokens needs --tokens-file"},
		{serveOptions{listen: "127.0.0.1:0", auth: "kerberos", role: "all"}, `--auth "kerberos"`},
		{serveOptions{listen: "127.0.0.1:0", auth: "noauth", role: "both"}, `--role "both"`},
		{serveOptions{listen: "127.0.0.1:0", auth: "noauth", role: "all", logLevel: "loud"}, `--log-level "loud"`},
		{serveOptions{listen: "127.0.0.1:0", auth: "noauth", role: "all", claimTTL: 100 * time.Millisecond}, "--claim-ttl 100ms: want at least 1s"},
	}
	for _, tc := range cases {
		o := tc.o
		o.dataDir = t.TempDir()
		if o.logLevel == "" {
			o.logLevel = "error"
		}
		err := runServe(context.Background(), &o, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.o, err, tc.want)
		}
	}
}

func TestEnvironmentSetsFlags(t *testing.T) {
	t.Setenv("CLIMATE_LISTEN", "0.0.0.0:1")
	t.Setenv("CLIMATE_DATA_DIR", t.TempDir())
	cmd := newRootCmd()
	cmd.SetArgs([]string{"serve"})
	cmd.SetOut(io.Discard)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "refusing to listen on 0.0.0.0:1") {
		t.Fatalf("CLIMATE_LISTEN was not applied: %v", err)
	}
	// A flag wins over the environment.
	cmd = newRootCmd()
	cmd.SetArgs([]string{"serve", "--listen", "0.0.0.0:2"})
	err = cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "0.0.0.0:2") {
		t.Fatalf("flag did not win over the environment: %v", err)
	}
}

// Leases and their events live in the database: a lease created by an API-only server (no
// engine, so nothing fires) starts once a full server runs on the same data.
func TestLeaseSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, serveOptions{dataDir: dir, role: "api"})
	post(t, s.url+"/v1/os-hosts", `{"name": "n1"}`, 201)
	start := time.Now().UTC().Add(time.Second).Format(time.RFC3339Nano)
	end := time.Now().UTC().Add(time.Hour).Format("2006-01-02 15:04:05")
	body := post(t, s.url+"/v1/leases", `{"name": "r", "start_date": "`+start+`", "end_date": "`+end+`",
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`, 201)
	id := body["lease"].(map[string]any)["id"].(string)
	if st := get(t, s.url+"/v1/leases/"+id)["lease"].(map[string]any)["status"]; st != "PENDING" {
		t.Fatalf("status %v before any engine ran", st)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, serveOptions{dataDir: dir})
	deadline := time.Now().Add(20 * time.Second)
	for {
		status := get(t, s.url+"/v1/leases/"+id)["lease"].(map[string]any)["status"]
		if status == "ACTIVE" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease is %v after restart", status)
		}
		time.Sleep(50 * time.Millisecond) // polling the API as a client would; the engine is not observable otherwise
	}
}

// One engine per SQLite database: a second one is refused with a message that says what
// to do, while API-only processes share the database freely.
func TestSecondEngineOnSQLiteIsRefused(t *testing.T) {
	dir := t.TempDir()
	startServer(t, serveOptions{dataDir: dir})
	err := runServe(context.Background(), &serveOptions{listen: "127.0.0.1:0", auth: "noauth", role: "engine", logLevel: "error", dataDir: dir}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "another process runs an event engine") || !strings.Contains(err.Error(), "--role api") {
		t.Fatalf("second engine: %v; want refused, pointing to --role api", err)
	}
	api := startServer(t, serveOptions{dataDir: dir, role: "api"})
	get(t, api.url+"/v1/leases")
}

func post(t *testing.T, url, body string, want int) map[string]any {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, resp, want)
}

func get(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, resp, 200)
}

func decode(t *testing.T, resp *http.Response, want int) map[string]any {
	t.Helper()
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", resp.Request.Method, resp.Request.URL, resp.StatusCode, data, want)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("body %q: %v", data, err)
	}
	return out
}

// TestBlazarClient drives the real python-blazarclient (Debian's python3-blazarclient)
// against a running server with token authentication.
func TestBlazarClient(t *testing.T) {
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import blazarclient").Run(); err != nil {
		if os.Getenv("CLIMATE_TEST_BLAZARCLIENT") == "required" {
			t.Fatalf("python3-blazarclient is required here but not importable by %s: %v", python, err)
		}
		t.Skip("python3-blazarclient is not installed (apt-get install python3-blazarclient); CI installs it")
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	err := os.WriteFile(tokens, []byte("# token user project roles\nadmin-token root ops admin\nmember-token alice physics member\nother-token bob chemistry member\n"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serveOptions{auth: "tokens", tokensFile: tokens})
	cmd := exec.Command(python, "testdata/blazarclient_check.py", s.url, "admin-token", "member-token", "other-token")
	out, err := cmd.CombinedOutput()
	t.Logf("blazarclient checks:\n%s", out)
	if err != nil {
		t.Fatalf("blazarclient checks failed: %v", err)
	}
	if !strings.Contains(string(out), " passed, 0 failed") {
		t.Fatal("the checks did not report a result")
	}
}

func TestMigrateAndVersion(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 2; i++ { // migrating twice is a no-op the second time
		var out bytes.Buffer
		cmd := newRootCmd()
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"migrate", "--data-dir", dir})
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "Database "+filepath.Join(dir, "climate.db")+" is up to date") {
			t.Fatalf("migrate printed %q", out.String())
		}
	}
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil || !strings.HasPrefix(out.String(), "climate ") {
		t.Fatalf("version: %v %q", err, out.String())
	}
}
