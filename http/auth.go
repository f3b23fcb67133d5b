package http

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"climate"
)

// Authenticator turns a request's credentials into an identity.
type Authenticator interface {
	Authenticate(r *http.Request) (climate.Identity, error)
}

// NoAuth trusts identity headers (X-User-Id, X-Project-Id, X-Roles) and makes callers
// admin by default. It is for a single user on loopback; the server refuses to expose it.
type NoAuth struct{}

// Authenticate reads the identity headers, defaulting to an admin in project "admin".
// It answers only requests addressed to a loopback name: a web page that rebinds its own
// DNS name to 127.0.0.1 still sends that name as Host, and must not reach an API that
// makes every caller an admin.
func (NoAuth) Authenticate(r *http.Request) (climate.Identity, error) {
	if !loopbackHost(r.Host) {
		return climate.Identity{}, climate.Errorf(climate.CodeForbidden,
			"Host %q is not a loopback address: without authentication Climate answers only requests to localhost, 127.0.0.1 or [::1]", r.Host)
	}
	for _, h := range []string{"X-User-Id", "X-Project-Id", "X-Roles"} {
		if err := climate.CheckText(h, r.Header.Get(h), climate.MaxNameLength); err != nil {
			return climate.Identity{}, err
		}
	}
	id := climate.Identity{UserID: r.Header.Get("X-User-Id"), ProjectID: r.Header.Get("X-Project-Id")}
	if id.UserID == "" {
		id.UserID = "admin"
	}
	if id.ProjectID == "" {
		id.ProjectID = "admin"
	}
	id.Roles = splitRoles(r.Header.Get("X-Roles"))
	if len(id.Roles) == 0 {
		id.Roles = []string{"admin"}
	}
	return id, nil
}

// loopbackHost reports whether a Host header names this machine's loopback interface.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func splitRoles(s string) []string {
	var roles []string
	for _, r := range strings.Split(s, ",") {
		if r = strings.TrimSpace(r); r != "" {
			roles = append(roles, r)
		}
	}
	return roles
}

// Tokens authenticates X-Auth-Token against a fixed table. Tokens are kept only as SHA-256
// digests, so lookups do not compare secrets byte by byte.
type Tokens struct {
	byDigest map[[32]byte]climate.Identity
}

// LoadTokens reads a tokens file: one token per line as "TOKEN USER_ID PROJECT_ID ROLES",
// ROLES comma-separated (e.g. admin or member,reader); blank lines and # comments are
// skipped.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t := &Tokens{byDigest: map[[32]byte]climate.Identity{}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 {
			return nil, fmt.Errorf("%s:%d: want \"TOKEN USER_ID PROJECT_ID ROLE[,ROLE…]\", got %d fields", path, n, len(fields))
		}
		for i, what := range []string{"user id", "project id", "roles"} {
			if len(fields[i+1]) > climate.MaxNameLength {
				return nil, fmt.Errorf("%s:%d: the %s is longer than %d characters", path, n, what, climate.MaxNameLength)
			}
		}
		t.byDigest[sha256.Sum256([]byte(fields[0]))] = climate.Identity{UserID: fields[1], ProjectID: fields[2], Roles: splitRoles(fields[3])}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(t.byDigest) == 0 {
		return nil, fmt.Errorf("%s: no tokens", path)
	}
	return t, nil
}

// Authenticate looks the request's X-Auth-Token up.
func (t *Tokens) Authenticate(r *http.Request) (climate.Identity, error) {
	token := r.Header.Get("X-Auth-Token")
	if token == "" {
		return climate.Identity{}, climate.Errorf(climate.CodeUnauthorized, "Authentication required: send a token in the X-Auth-Token header")
	}
	id, ok := t.byDigest[sha256.Sum256([]byte(token))]
	if !ok {
		return climate.Identity{}, climate.Errorf(climate.CodeUnauthorized, "The request you have made requires authentication: the token is not valid")
	}
	return id, nil
}
