package http_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	climatehttp "climate/http"
)

const tokensFile = `# token        user   project   roles
tok-admin      root   ops       admin

tok-alice      alice  physics   member
tok-rita       rita   physics   reader,observer
tok-bob        bob    chemistry member
`

func writeTokens(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func tokenEnv(t *testing.T) *env {
	t.Helper()
	tokens, err := climatehttp.LoadTokens(writeTokens(t, tokensFile))
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, tokens)
}

func token(tok string) map[string]string { return map[string]string{"X-Auth-Token": tok} }

// TestTokens checks X-Auth-Token authentication: who each token is, that identity headers
// cannot override it, and that missing or wrong tokens get 401 and change nothing.
func TestTokens(t *testing.T) {
	e := tokenEnv(t)
	e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-1"}`, header: token("tok-admin")}, http.StatusCreated)
	l := e.mustDo(call{method: "POST", path: "/v1/leases", body: validLease, header: token("tok-alice")}, http.StatusCreated)
	if got := lookup(t, l, "lease.user_id") + "/" + lookup(t, l, "lease.project_id"); got != "alice/physics" {
		t.Errorf("alice's lease belongs to %s, want alice/physics", got)
	}
	lease := lookup(t, l, "lease.id")
	vars := map[string]string{"lease": lease}
	before := e.snapshot(token("tok-admin"), "/v1/leases", "/v1/os-hosts", "/v1/os-hosts/allocations")

	// A forged identity header beside a member's token does not make it admin.
	forged := map[string]string{"X-Auth-Token": "tok-alice", "X-Roles": "admin", "X-Project-Id": "ops", "X-User-Id": "root"}

	cases := []badCase{
		{name: "no token", call: call{method: "GET", path: "/v1/leases"}, status: 401, msg: []string{"X-Auth-Token"}},
		{name: "no token create", call: call{method: "POST", path: "/v1/leases", body: validLease}, status: 401, msg: []string{"Authentication required"}},
		{name: "no token hosts", call: call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-2"}`}, status: 401},
		{name: "identity headers only", call: call{method: "GET", path: "/v1/os-hosts", header: map[string]string{"X-Roles": "admin", "X-User-Id": "root"}}, status: 401},
		{name: "wrong token", call: call{method: "GET", path: "/v1/leases", header: token("tok-nobody")}, status: 401, msg: []string{"not valid"}},
		{name: "token prefix", call: call{method: "DELETE", path: "/v1/leases/{{lease}}", header: token("tok-alic")}, status: 401, msg: []string{"not valid"}},
		{name: "token with comment", call: call{method: "GET", path: "/v1/leases", header: token("#")}, status: 401},
		{name: "token case", call: call{method: "GET", path: "/v1/leases", header: token("TOK-ADMIN")}, status: 401},
		{name: "wrong token update", call: call{method: "PUT", path: "/v1/leases/{{lease}}", body: `{"name": "x"}`, header: token("tok-alicE")}, status: 401},
		{name: "forged headers", call: call{method: "GET", path: "/v1/os-hosts", header: forged}, status: 403},
		{name: "member creates host", call: call{method: "POST", path: "/v1/os-hosts", body: `{"name": "compute-2"}`, header: token("tok-alice")}, status: 403},
		{name: "reader creates lease", call: call{method: "POST", path: "/v1/leases", body: validLease, header: token("tok-rita")}, status: 403},
		{name: "other project reads lease", call: call{method: "GET", path: "/v1/leases/{{lease}}", header: token("tok-bob")}, status: 404},
		{name: "other project deletes lease", call: call{method: "DELETE", path: "/v1/leases/{{lease}}", header: token("tok-bob")}, status: 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.call
			c.path = expand(t, c.path, vars)
			r := e.do(c)
			checkHeaders(t, r)
			checkError(t, r, tc.status, tc.msg...)
			if r.status == http.StatusUnauthorized && !strings.Contains(r.header.Get("WWW-Authenticate"), "X-Auth-Token") {
				t.Errorf("WWW-Authenticate = %q", r.header.Get("WWW-Authenticate"))
			}
			if after := e.snapshot(token("tok-admin"), "/v1/leases", "/v1/os-hosts", "/v1/os-hosts/allocations"); after != before {
				t.Errorf("the state changed: %s", stateDiff(before, after))
				before = after
			}
		})
	}

	t.Run("valid tokens", func(t *testing.T) {
		for _, tc := range []struct {
			tok    string
			leases int
		}{{"tok-admin", 1}, {"tok-alice", 1}, {"tok-rita", 1}, {"tok-bob", 0}} {
			b := e.mustDo(call{method: "GET", path: "/v1/leases", header: token(tc.tok)}, 200)
			if n := len(b["leases"].([]any)); n != tc.leases {
				t.Errorf("%s lists %d leases, want %d", tc.tok, n, tc.leases)
			}
		}
		e.mustDo(call{method: "GET", path: "/v1/leases/" + lease, header: token("tok-rita")}, 200)
		// Version discovery needs no token.
		e.mustDo(call{method: "GET", path: "/"}, http.StatusMultipleChoices)
		e.mustDo(call{method: "DELETE", path: "/v1/leases/" + lease, header: token("tok-alice")}, http.StatusNoContent)
	})
}

func TestLoadTokensErrors(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"empty", "", "no tokens"},
		{"comments only", "# nothing\n\n", "no tokens"},
		{"three fields", "tok user project\n", ":1:"},
		{"five fields", "tok-a u p admin\ntok u p admin extra\n", ":2:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := climatehttp.LoadTokens(writeTokens(t, tc.content))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadTokens: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := climatehttp.LoadTokens(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Errorf("LoadTokens of a missing file succeeded")
	}
}
