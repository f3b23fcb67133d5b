package main

import (
	"climate"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	climatehttp "climate/http"
	"climate/keystone"
)

// keystoneOptions configure --auth keystone: Climate's service user in Keystone, and the
// validation cache.
type keystoneOptions struct {
	url                         string
	username, password, project string
	userDomain, projectDomain   string
	appCredID, appCredSecret    string
	caFile                      string
	timeout                     time.Duration
	cacheTTL, negativeTTL       time.Duration
	cacheSize                   int
	serviceRoles                []string
	startupWait                 time.Duration
	// now replaces the validation cache's clock (tests).
	now func() time.Time
	// transport replaces the HTTP transport to Keystone (tests and benchmarks).
	transport http.RoundTripper
	// connected, if not nil, hears of the client once the service user has authenticated
	// (tests and benchmarks count its requests).
	connected func(*keystone.Client, *climatehttp.Keystone)
}

const keystoneHelp = `
With --auth keystone, callers send OpenStack Keystone tokens in X-Auth-Token, as to Blazar
behind keystonemiddleware: Climate validates each new token with Keystone (GET
/v3/auth/tokens) as its own service user, which needs the role service or admin, and
reuses the answer for --keystone-cache-ttl at most (at most until the token expires). A
request may add a service's token in X-Service-Token: if that token carries a role of
--keystone-service-token-roles, the user token is accepted even if it has just expired.
Invalid or missing tokens get 401 with WWW-Authenticate: Keystone uri="<--keystone-url>".
While Keystone is unreachable, cached tokens keep working and new ones get 503. Give the
password in CLIMATE_KEYSTONE_PASSWORD (or an application credential's secret in
CLIMATE_KEYSTONE_APPLICATION_CREDENTIAL_SECRET) rather than as a flag, which ps shows.`

const keystoneExample = `

  # Behind Keystone, as Blazar: register the service and endpoints (see the README), then
  export CLIMATE_KEYSTONE_PASSWORD=blazarpass
  climate serve --auth keystone --listen 0.0.0.0:1234 \
    --keystone-url http://keystone.example.org:5000/v3 \
    --keystone-username blazar --keystone-project service

  # The same with an application credential of the service user
  export CLIMATE_KEYSTONE_APPLICATION_CREDENTIAL_SECRET=…
  climate serve --auth keystone --keystone-url https://keystone.example.org/v3 \
    --keystone-ca-file /etc/ssl/certs/keystone-ca.pem \
    --keystone-application-credential-id 0123456789abcdef0123456789abcdef`

func addKeystoneFlags(f *pflag.FlagSet, o *keystoneOptions) {
	f.StringVar(&o.url, "keystone-url", "", "Keystone's identity URL (with --auth keystone), e.g. http://127.0.0.1:5000/v3")
	f.StringVar(&o.username, "keystone-username", "", "Climate's service user in Keystone (needs the role service or admin on its project)")
	f.StringVar(&o.password, "keystone-password", "", "the service user's password (prefer CLIMATE_KEYSTONE_PASSWORD: a flag's value shows in ps)")
	f.StringVar(&o.project, "keystone-project", "", "the service user's project, e.g. service")
	f.StringVar(&o.userDomain, "keystone-user-domain", "Default", "the service user's domain (name)")
	f.StringVar(&o.projectDomain, "keystone-project-domain", "Default", "the service project's domain (name)")
	f.StringVar(&o.appCredID, "keystone-application-credential-id", "", "authenticate with this application credential instead of a password")
	f.StringVar(&o.appCredSecret, "keystone-application-credential-secret", "", "the application credential's secret (prefer CLIMATE_KEYSTONE_APPLICATION_CREDENTIAL_SECRET)")
	f.StringVar(&o.caFile, "keystone-ca-file", "", "PEM bundle of the authorities of Keystone's certificate (https), instead of the system's")
	f.DurationVar(&o.timeout, "keystone-timeout", keystone.DefaultTimeout, "bound of each request to Keystone")
	f.DurationVar(&o.cacheTTL, "keystone-cache-ttl", climatehttp.DefaultKeystoneCacheTTL, "how long a token's validation is reused (at most until the token expires); a revoked token works that long")
	f.IntVar(&o.cacheSize, "keystone-cache-size", climatehttp.DefaultKeystoneCacheSize, "validations kept (least recently used go first)")
	f.DurationVar(&o.negativeTTL, "keystone-negative-cache-ttl", climatehttp.DefaultKeystoneNegativeTTL, "how long a token Keystone refused is refused without asking again")
	f.StringSliceVar(&o.serviceRoles, "keystone-service-token-roles", []string{"service"}, "roles, one of which an X-Service-Token must carry")
	f.DurationVar(&o.startupWait, "keystone-startup-wait", time.Minute, "how long to wait at startup for an unreachable Keystone before failing")
}

// keystoneConnect authenticates the service user, waiting up to --keystone-startup-wait
// for a Keystone that is not up yet.
func keystoneConnect(ctx context.Context, o *keystoneOptions, log *slog.Logger) (*keystone.Client, error) {
	switch {
	case o.url == "":
		return nil, errors.New("--auth keystone needs --keystone-url (Keystone's identity URL, e.g. http://127.0.0.1:5000/v3)")
	case o.appCredID == "" && (o.username == "" || o.project == ""):
		return nil, errors.New("--auth keystone needs Climate's service user: --keystone-username and --keystone-project (password in CLIMATE_KEYSTONE_PASSWORD), or --keystone-application-credential-id")
	case o.appCredID == "" && o.password == "":
		return nil, fmt.Errorf("--auth keystone: no password for %q: set CLIMATE_KEYSTONE_PASSWORD (or --keystone-password)", o.username)
	case o.appCredID != "" && o.appCredSecret == "":
		return nil, errors.New("--keystone-application-credential-id needs its secret: set CLIMATE_KEYSTONE_APPLICATION_CREDENTIAL_SECRET")
	case o.cacheTTL < 0 || o.negativeTTL < 0:
		return nil, errors.New("--keystone-cache-ttl and --keystone-negative-cache-ttl must not be negative")
	case o.cacheSize < 1:
		return nil, fmt.Errorf("--keystone-cache-size %d: want at least 1", o.cacheSize)
	case o.timeout <= 0:
		return nil, fmt.Errorf("--keystone-timeout %s: must be positive", o.timeout)
	}
	cfg := keystone.Config{AuthURL: o.url, Username: o.username, Password: o.password, Project: o.project,
		UserDomain: o.userDomain, ProjectDomain: o.projectDomain,
		ApplicationCredentialID: o.appCredID, ApplicationCredentialSecret: o.appCredSecret,
		CAFile: o.caFile, Timeout: o.timeout, Transport: o.transport}
	if o.appCredID != "" {
		cfg.Username, cfg.Password, cfg.Project = "", "", ""
	}
	client, err := keystone.Connect(ctx, cfg, o.startupWait, func(err error, next time.Duration) {
		log.Warn("waiting for Keystone", "problem", err.Error(), "retry_in", next)
	})
	if err != nil {
		return nil, fmt.Errorf("--auth keystone: %w", err)
	}
	return client, nil
}

// keystoneTrusts returns the trusts leases are created with, as Blazar's: only when
// Climate authenticates with a password, since Keystone gives no trust-scoped token to
// an application credential (nil then, with a warning).
func keystoneTrusts(client *keystone.Client, o *keystoneOptions, log *slog.Logger) climate.Trusts {
	if client == nil {
		return nil
	}
	if o.appCredID != "" {
		log.Warn("leases get no Keystone trust: trust-scoped tokens need a service user with a password, not an application credential")
		return nil
	}
	return keystone.Trusts{Client: client}
}

// keystoneAuth returns the authenticator validating tokens with client.
func keystoneAuth(client *keystone.Client, o *keystoneOptions, log *slog.Logger) climatehttp.Authenticator {
	negativeTTL := o.negativeTTL
	if negativeTTL == 0 {
		negativeTTL = -1 // the flag's 0 means none; KeystoneConfig's 0 means the default
	}
	cacheTTL := o.cacheTTL
	if cacheTTL == 0 {
		cacheTTL = time.Nanosecond // no reuse
	}
	auth := climatehttp.NewKeystone(client, climatehttp.KeystoneConfig{CacheTTL: cacheTTL, CacheSize: o.cacheSize,
		NegativeTTL: negativeTTL, ServiceRoles: o.serviceRoles, Now: o.now, Logger: log})
	who := "application credential " + o.appCredID
	if o.appCredID == "" {
		who = o.username + " in project " + o.project
	}
	log.Info("validating tokens with Keystone", "keystone", client.AuthURL(), "service_user", who,
		"service_token_expires_at", client.ServiceTokenExpiresAt(), "cache_ttl", o.cacheTTL, "cache_size", o.cacheSize)
	if o.connected != nil {
		o.connected(client, auth)
	}
	return auth
}
