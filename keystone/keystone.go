// Package keystone validates OpenStack Keystone tokens as keystonemiddleware's auth_token
// does: Climate authenticates as its own service user, then asks Keystone about each user
// token with GET /v3/auth/tokens (X-Auth-Token: the service token, X-Subject-Token: the
// user's). The identity calls go through gophercloud, the OpenStack Go SDK.
//
// Errors fall in two classes that callers must keep apart: ErrInvalidToken (Keystone says
// the token is not valid: 401 for the caller) and *UnavailableError (Keystone could not be
// asked, or refused Climate's own credentials: the token is neither accepted nor refused).
// No error, log line or message of this package holds a token or a password.
package keystone

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
)

// Config says where Keystone is and how Climate's service user authenticates: with a
// password (Username, Password, UserDomain, Project, ProjectDomain) or an application
// credential (ApplicationCredentialID and ApplicationCredentialSecret, which carry their
// own scope).
type Config struct {
	// AuthURL is Keystone's identity endpoint, e.g. http://127.0.0.1:5000/v3.
	AuthURL string

	Username      string
	Password      string
	UserDomain    string // name; "" means Default
	Project       string
	ProjectDomain string // name; "" means Default

	ApplicationCredentialID     string
	ApplicationCredentialSecret string

	// CAFile is a PEM bundle of the authorities that sign Keystone's certificate (https
	// only); "" trusts the system's.
	CAFile string
	// Timeout bounds each request to Keystone; 0 means DefaultTimeout.
	Timeout time.Duration
	// Transport replaces the HTTP transport (tests); nil means a clone of Go's default.
	Transport http.RoundTripper
	// Now tells the time for the service token's renewal; nil means time.Now.
	Now func() time.Time
}

// DefaultTimeout bounds a request to Keystone when Config.Timeout is 0.
const DefaultTimeout = 5 * time.Second

// RenewBefore is how long before its expiry the service token is renewed (keystoneauth
// renews tokens that expire within 2 minutes), or half its lifetime if that is shorter.
const RenewBefore = 2 * time.Minute

// MaxTokenLength bounds the tokens sent to Keystone: fernet tokens are under 300 bytes,
// JWS tokens under 1,000; longer ones are refused without asking.
const MaxTokenLength = 8192

// ErrInvalidToken means Keystone does not recognize the token (unknown, malformed,
// expired or revoked), or the token is not even worth sending to it.
var ErrInvalidToken = errors.New("the token is not valid")

// UnavailableError means the token could not be validated: Keystone is unreachable, slow,
// answers 5xx, or refuses Climate's own service credentials.
type UnavailableError struct {
	URL    string // Keystone's auth URL
	Reason string // what went wrong, after "Keystone at URL", without secrets
	Err    error  // the cause, for logs
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("Keystone at %s %s", e.URL, e.Reason)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Token is what Keystone says about a valid token.
type Token struct {
	UserID, UserName, UserDomainID          string
	ProjectID, ProjectName, ProjectDomainID string
	// DomainID is the domain a domain-scoped token is scoped to ("" otherwise).
	DomainID string
	// System is true for a system-scoped token.
	System bool
	// Roles are the role names, implied roles included (Keystone expands them).
	Roles     []string
	ExpiresAt time.Time
	IssuedAt  time.Time
}

// Client validates tokens with a service user's token, which it renews before it expires
// and again whenever Keystone answers 401 to it.
type Client struct {
	authURL  string
	opts     gophercloud.AuthOptions // the service user's credentials (trust tokens reuse them)
	provider *gophercloud.ProviderClient
	identity *gophercloud.ServiceClient
	now      func() time.Time
	requests atomic.Int64

	mu         sync.Mutex
	knownToken string // the service token expiresAt belongs to
	expiresAt  time.Time
	lifetime   time.Duration
}

// New authenticates the service user once and returns a client ready to validate tokens.
// Credentials Keystone refuses (401) give an error naming the user and the URL; an
// unreachable Keystone gives an *UnavailableError, so the caller may retry.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.AuthURL == "" {
		return nil, errors.New("no Keystone auth URL")
	}
	u, err := url.Parse(cfg.AuthURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("Keystone auth URL %q: want http(s)://HOST[:PORT]/v3", cfg.AuthURL)
	}
	opts := gophercloud.AuthOptions{IdentityEndpoint: cfg.AuthURL, AllowReauth: true}
	switch {
	case cfg.ApplicationCredentialID != "":
		if cfg.ApplicationCredentialSecret == "" {
			return nil, errors.New("an application credential needs its secret")
		}
		opts.ApplicationCredentialID, opts.ApplicationCredentialSecret = cfg.ApplicationCredentialID, cfg.ApplicationCredentialSecret
	case cfg.Username != "":
		if cfg.Password == "" {
			return nil, fmt.Errorf("no password for Keystone user %q", cfg.Username)
		}
		if cfg.Project == "" {
			return nil, fmt.Errorf("no project for Keystone user %q: the service token must be project-scoped", cfg.Username)
		}
		opts.Username, opts.Password = cfg.Username, cfg.Password
		opts.DomainName = orDefault(cfg.UserDomain)
		opts.Scope = &gophercloud.AuthScope{ProjectName: cfg.Project, DomainName: orDefault(cfg.ProjectDomain)}
	default:
		return nil, errors.New("no service credentials: give a username, password and project, or an application credential")
	}
	transport := cfg.Transport
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("Keystone CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("Keystone CA file %s: no PEM certificate in it", cfg.CAFile)
			}
			t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		transport = t
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	c := &Client{authURL: strings.TrimSuffix(cfg.AuthURL, "/"), opts: opts, now: cfg.Now}
	if c.now == nil {
		c.now = time.Now
	}
	provider, err := openstack.NewClient(cfg.AuthURL)
	if err != nil {
		return nil, fmt.Errorf("Keystone auth URL %q: %v", cfg.AuthURL, err)
	}
	provider.HTTPClient = http.Client{Transport: counting{transport, &c.requests}, Timeout: timeout,
		// Keystone never redirects these calls; following one would send the tokens on.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	provider.UserAgent.Prepend("climate")
	c.provider = provider
	if err := openstack.AuthenticateV3(ctx, provider, &opts, gophercloud.EndpointOpts{}); err != nil {
		who := "application credential " + cfg.ApplicationCredentialID
		if cfg.ApplicationCredentialID == "" {
			who = fmt.Sprintf("user %q (domain %s) in project %q (domain %s)", cfg.Username, orDefault(cfg.UserDomain), cfg.Project, orDefault(cfg.ProjectDomain))
		}
		switch {
		case gophercloud.ResponseCodeIs(err, http.StatusUnauthorized):
			return nil, fmt.Errorf("Keystone at %s refused the service credentials of %s (401): check the password, names and domains", c.authURL, who)
		case gophercloud.ResponseCodeIs(err, http.StatusNotFound), gophercloud.ResponseCodeIs(err, http.StatusBadRequest):
			return nil, fmt.Errorf("Keystone at %s refused to authenticate %s: %s", c.authURL, who, responseText(err))
		}
		return nil, c.unavailable(err)
	}
	if c.identity, err = openstack.NewIdentityV3(provider, gophercloud.EndpointOpts{}); err != nil {
		return nil, err
	}
	c.serviceExpiry()
	return c, nil
}

func orDefault(domain string) string {
	if domain == "" {
		return "Default"
	}
	return domain
}

// AuthURL is Keystone's auth URL as configured, without a trailing slash.
func (c *Client) AuthURL() string { return c.authURL }

// Requests counts the HTTP requests sent to Keystone so far (authentications included).
func (c *Client) Requests() int64 { return c.requests.Load() }

// ServiceTokenExpiresAt is when the service token in use expires.
func (c *Client) ServiceTokenExpiresAt() time.Time {
	exp, _ := c.serviceExpiry()
	return exp
}

// serviceExpiry returns the current service token's expiry and lifetime, reading them
// from the last authentication when the token changed (after a renewal).
func (c *Client) serviceExpiry() (time.Time, time.Duration) {
	tok := c.provider.Token()
	c.mu.Lock()
	defer c.mu.Unlock()
	if tok != c.knownToken {
		c.knownToken = tok
		c.expiresAt, c.lifetime = time.Time{}, 0
		if r, ok := c.provider.GetAuthResult().(tokens.CreateResult); ok {
			var body struct {
				ExpiresAt time.Time `json:"expires_at"`
				IssuedAt  time.Time `json:"issued_at"`
			}
			if r.ExtractInto(&body) == nil {
				c.expiresAt, c.lifetime = body.ExpiresAt, body.ExpiresAt.Sub(body.IssuedAt)
			}
		}
	}
	return c.expiresAt, c.lifetime
}

// renewIfDue re-authenticates when the service token expires within RenewBefore (or half
// its lifetime). Concurrent callers share one renewal.
func (c *Client) renewIfDue(ctx context.Context) error {
	exp, life := c.serviceExpiry()
	if exp.IsZero() {
		return nil
	}
	margin := min(RenewBefore, life/2)
	if c.now().Before(exp.Add(-margin)) {
		return nil
	}
	if err := c.provider.Reauthenticate(ctx, c.provider.Token()); err != nil {
		ue := c.unavailable(err)
		ue.Reason += " (renewing Climate's service token)"
		return ue
	}
	return nil
}

// Renew re-authenticates the service user now.
func (c *Client) Renew(ctx context.Context) error {
	if err := c.provider.Reauthenticate(ctx, c.provider.Token()); err != nil {
		return c.unavailable(err)
	}
	return nil
}

// validation is Keystone's answer to GET /v3/auth/tokens.
type validation struct {
	Token struct {
		User struct {
			ID     string `json:"id"`
			Name   string `json:"name"`
			Domain struct {
				ID string `json:"id"`
			} `json:"domain"`
		} `json:"user"`
		Project *struct {
			ID     string `json:"id"`
			Name   string `json:"name"`
			Domain struct {
				ID string `json:"id"`
			} `json:"domain"`
		} `json:"project"`
		Domain *struct {
			ID string `json:"id"`
		} `json:"domain"`
		System map[string]any `json:"system"`
		Roles  []struct {
			Name string `json:"name"`
		} `json:"roles"`
		ExpiresAt time.Time `json:"expires_at"`
		IssuedAt  time.Time `json:"issued_at"`
	} `json:"token"`
}

// Validate asks Keystone about a user token (GET /v3/auth/tokens?nocatalog, with
// allow_expired=1 when allowExpired: Keystone then accepts a token that expired within
// its allow_expired_window, as for a request that carries a valid service token).
func (c *Client) Validate(ctx context.Context, token string, allowExpired bool) (*Token, error) {
	if !wellFormed(token) {
		return nil, ErrInvalidToken
	}
	if err := c.renewIfDue(ctx); err != nil {
		return nil, err
	}
	u := c.identity.ServiceURL("auth", "tokens") + "?nocatalog"
	if allowExpired {
		u += "&allow_expired=1"
	}
	var v validation
	_, err := c.identity.Get(ctx, u, &v, &gophercloud.RequestOpts{
		MoreHeaders: map[string]string{"X-Subject-Token": token},
		OkCodes:     []int{http.StatusOK, http.StatusNonAuthoritativeInfo},
	})
	switch {
	case err == nil:
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return nil, ErrInvalidToken // "Could not recognize Fernet token", "Failed to validate token"
	case gophercloud.ResponseCodeIs(err, http.StatusUnauthorized):
		// Still 401 after a fresh service token: Keystone refuses Climate itself.
		return nil, &UnavailableError{URL: c.authURL, Reason: "refuses Climate's service token (401 after re-authenticating)", Err: err}
	case gophercloud.ResponseCodeIs(err, http.StatusForbidden):
		return nil, &UnavailableError{URL: c.authURL, Reason: "does not let Climate's service user validate tokens (403): give it the service or admin role", Err: err}
	default:
		return nil, c.unavailable(err)
	}
	t := &Token{
		UserID: v.Token.User.ID, UserName: v.Token.User.Name, UserDomainID: v.Token.User.Domain.ID,
		System: v.Token.System != nil, ExpiresAt: v.Token.ExpiresAt, IssuedAt: v.Token.IssuedAt,
	}
	if p := v.Token.Project; p != nil {
		t.ProjectID, t.ProjectName, t.ProjectDomainID = p.ID, p.Name, p.Domain.ID
	}
	if d := v.Token.Domain; d != nil {
		t.DomainID = d.ID
	}
	t.Roles = make([]string, len(v.Token.Roles)) // exact capacity: an append by a caller copies
	for i, r := range v.Token.Roles {
		t.Roles[i] = r.Name
	}
	if t.UserID == "" || t.ExpiresAt.IsZero() {
		return nil, &UnavailableError{URL: c.authURL, Reason: "answered without a user or an expiry", Err: errors.New("incomplete token body")}
	}
	return t, nil
}

// wellFormed reports whether a token is worth asking Keystone about: printable ASCII
// without spaces (fernet, JWS and UUID tokens all are), of bounded length. Anything else
// could not travel as a header anyway.
func wellFormed(token string) bool {
	if token == "" || len(token) > MaxTokenLength {
		return false
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] > '~' {
			return false
		}
	}
	return true
}

// unavailable classifies an error of a request that got no usable answer.
func (c *Client) unavailable(err error) *UnavailableError {
	var code gophercloud.ErrUnexpectedResponseCode
	var reauth *gophercloud.ErrUnableToReauthenticate
	var ue *url.Error
	switch {
	case errors.As(err, &reauth):
		return &UnavailableError{URL: c.authURL, Reason: c.unavailable(reauth.ErrReauth).Reason + " (renewing Climate's service token)", Err: err}
	case errors.As(err, &code):
		return &UnavailableError{URL: c.authURL, Reason: fmt.Sprintf("answered %d", code.Actual), Err: err}
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ue) && ue.Timeout()):
		return &UnavailableError{URL: c.authURL, Reason: "did not answer in time", Err: err}
	case errors.As(err, &ue):
		return &UnavailableError{URL: c.authURL, Reason: "is unreachable", Err: err}
	}
	return &UnavailableError{URL: c.authURL, Reason: "is unreachable", Err: err}
}

// responseText is Keystone's error message from an unexpected response, for a startup
// error (never about a user token).
func responseText(err error) string {
	var code gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &code) {
		return fmt.Sprintf("%d %s", code.Actual, strings.TrimSpace(string(code.Body)))
	}
	return err.Error()
}

// counting counts the requests that go to Keystone.
type counting struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// Connect is New, retried with backoff (0.5 s doubling to 5 s) while Keystone is
// unavailable, for at most wait; other errors (refused credentials) return at once.
// onRetry, if not nil, hears each failed attempt.
func Connect(ctx context.Context, cfg Config, wait time.Duration, onRetry func(err error, next time.Duration)) (*Client, error) {
	deadline := time.Now().Add(wait)
	delay := 500 * time.Millisecond
	for {
		c, err := New(ctx, cfg)
		var ue *UnavailableError
		if err == nil || !errors.As(err, &ue) {
			return c, err
		}
		if left := time.Until(deadline); left <= 0 {
			return nil, fmt.Errorf("%w (gave up after %s)", err, wait)
		} else if delay > left {
			delay = left
		}
		if onRetry != nil {
			onRetry(err, delay)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}
