package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// climate serve --policy-file: the file's rules apply in every authentication mode, and a
// file that does not parse stops the server at startup.
func TestServePolicyFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(file, []byte(`"blazar:leases:post": "rule:admin"
"blazar:oshosts:get": "rule:project_reader_or_admin"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("tok-alice alice physics member\ntok-rita rita physics reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lease := `{"name": "l", "start_date": "2099-01-01 10:00", "end_date": "2099-01-01 11:00", "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]}`
	for _, mode := range []struct {
		o              serveOptions
		member, reader map[string]string
	}{
		{serveOptions{}, map[string]string{"X-User-Id": "alice", "X-Project-Id": "physics", "X-Roles": "member"},
			map[string]string{"X-User-Id": "rita", "X-Project-Id": "physics", "X-Roles": "reader"}},
		{serveOptions{auth: "tokens", tokensFile: tokens}, map[string]string{"X-Auth-Token": "tok-alice"}, map[string]string{"X-Auth-Token": "tok-rita"}},
	} {
		o := mode.o
		o.policyFile = file
		s := startServer(t, o)
		send := func(method, path, body string, header map[string]string) (int, string) {
			req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			for k, v := range header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, body := send("POST", "/v1/leases", lease, mode.member); code != 403 || !strings.Contains(body, "Policy doesn't allow blazar:leases:post to be performed.") {
			t.Errorf("%s: member creates a lease: %d %s", o.auth, code, body)
		}
		if code, body := send("GET", "/v1/os-hosts", "", mode.reader); code != 200 || !strings.Contains(body, `"hosts"`) {
			t.Errorf("%s: reader lists hosts: %d %s", o.auth, code, body)
		}
		if code, body := send("GET", "/v1/leases", "", mode.reader); code != 200 {
			t.Errorf("%s: reader lists leases: %d %s", o.auth, code, body)
		}
	}

	if err := os.WriteFile(file, []byte(`"blazar:leases:post": "role:admin or"`), 0o644); err != nil {
		t.Fatal(err)
	}
	o := serveOptions{listen: "127.0.0.1:0", auth: "noauth", role: "all", logLevel: "error", dataDir: t.TempDir(), policyFile: file}
	err := runServe(context.Background(), &o, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "policy file "+file+`: rule "blazar:leases:post": column 14: the rule ends after 'or'`) {
		t.Errorf("a bad policy file: %v", err)
	}
}
