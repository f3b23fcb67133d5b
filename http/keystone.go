package http

import (
	contlist "container/list"
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"climate"
	"climate/keystone"
)

// Challenger is an Authenticator that names, in a 401's WWW-Authenticate header, where
// callers get credentials.
type Challenger interface {
	Challenge() string
}

// TokenValidator asks Keystone about a token (keystone.Client).
type TokenValidator interface {
	Validate(ctx context.Context, token string, allowExpired bool) (*keystone.Token, error)
	AuthURL() string
}

// KeystoneConfig tunes a Keystone authenticator; zero values take the defaults.
type KeystoneConfig struct {
	// CacheTTL is how long a validation is reused, at most until the token expires
	// (keystonemiddleware's token_cache_time); DefaultKeystoneCacheTTL if 0.
	CacheTTL time.Duration
	// CacheSize bounds the cached validations (least recently used go first), and
	// separately the cached refusals; DefaultKeystoneCacheSize if 0.
	CacheSize int
	// NegativeTTL is how long a token Keystone refused is refused without asking again,
	// so that floods of garbage tokens do not reach Keystone; DefaultKeystoneNegativeTTL
	// if 0, no negative caching if below 0.
	NegativeTTL time.Duration
	// ServiceRoles are the roles an X-Service-Token must carry, one of them at least
	// (keystonemiddleware's service_token_roles, with service_token_roles_required);
	// ["service"] if empty.
	ServiceRoles []string
	// Now tells the time for the cache; nil means time.Now.
	Now func() time.Time
	// Logger hears about Keystone being unavailable; nil means slog.Default().
	Logger *slog.Logger
}

// Defaults of KeystoneConfig.
const (
	DefaultKeystoneCacheTTL    = 300 * time.Second
	DefaultKeystoneCacheSize   = 10000
	DefaultKeystoneNegativeTTL = 10 * time.Second
)

// Keystone authenticates X-Auth-Token with Keystone, as keystonemiddleware's auth_token
// does: each new token is validated once (GET /v3/auth/tokens with Climate's service
// token) and the answer reused for the cache TTL, at most until the token expires.
// Cached tokens keep working while Keystone is unreachable; new ones get 503, never
// accepted and never a 500. A request may add a service's own token in X-Service-Token:
// if it is valid and carries a service role, the user token is accepted even if it has
// expired (a long operation that a service continues on a user's behalf). The cache is
// keyed by the tokens' SHA-256 digests: tokens are not kept, logged nor echoed.
type Keystone struct {
	v            TokenValidator
	ttl, negTTL  time.Duration
	serviceRoles []string
	now          func() time.Time
	log          *slog.Logger
	challenge    string

	valid   *lru[validEntry]
	invalid *lru[time.Time] // refusals, until when
	flight  singleflight.Group

	hits, misses atomic.Int64
	lastWarn     atomic.Int64 // unix nanoseconds of the last "unavailable" warning
}

type validEntry struct {
	token *keystone.Token
	until time.Time
}

// NewKeystone returns an authenticator that validates tokens with v.
func NewKeystone(v TokenValidator, cfg KeystoneConfig) *Keystone {
	k := &Keystone{v: v, ttl: cfg.CacheTTL, negTTL: cfg.NegativeTTL, serviceRoles: cfg.ServiceRoles, now: cfg.Now, log: cfg.Logger}
	if k.ttl == 0 {
		k.ttl = DefaultKeystoneCacheTTL
	}
	if k.negTTL == 0 {
		k.negTTL = DefaultKeystoneNegativeTTL
	}
	if len(k.serviceRoles) == 0 {
		k.serviceRoles = []string{"service"}
	}
	if k.now == nil {
		k.now = time.Now
	}
	if k.log == nil {
		k.log = slog.Default()
	}
	size := cfg.CacheSize
	if size <= 0 {
		size = DefaultKeystoneCacheSize
	}
	k.valid, k.invalid = newLRU[validEntry](size), newLRU[time.Time](size)
	k.challenge = `Keystone uri="` + strings.ReplaceAll(v.AuthURL(), `"`, "%22") + `"`
	return k
}

// Challenge is the WWW-Authenticate header of a 401: Keystone uri="<auth URL>", as
// keystonemiddleware sends, so that clients know where to get a token.
func (k *Keystone) Challenge() string { return k.challenge }

// CacheStats counts the validations answered from the cache (hits, refusals included)
// and those that asked Keystone (misses).
func (k *Keystone) CacheStats() (hits, misses int64) { return k.hits.Load(), k.misses.Load() }

// Authenticate validates X-Auth-Token (and X-Service-Token, when sent).
func (k *Keystone) Authenticate(r *http.Request) (climate.Identity, error) {
	token := r.Header.Get("X-Auth-Token")
	if token == "" {
		return climate.Identity{}, climate.Errorf(climate.CodeUnauthorized, "Authentication required: send a Keystone token in the X-Auth-Token header")
	}
	allowExpired := false
	if svc := r.Header.Get("X-Service-Token"); svc != "" {
		st, err := k.validate(r.Context(), svc, false)
		if errors.Is(err, keystone.ErrInvalidToken) {
			return climate.Identity{}, climate.Errorf(climate.CodeUnauthorized, "The service token (X-Service-Token) is not valid")
		}
		if err != nil {
			return climate.Identity{}, err
		}
		if !slices.ContainsFunc(st.Roles, func(role string) bool { return slices.Contains(k.serviceRoles, role) }) {
			return climate.Identity{}, climate.Errorf(climate.CodeUnauthorized, "The service token (X-Service-Token) carries none of the service roles (%s)", strings.Join(k.serviceRoles, ", "))
		}
		allowExpired = true
	}
	t, err := k.validate(r.Context(), token, allowExpired)
	if errors.Is(err, keystone.ErrInvalidToken) {
		return climate.Identity{}, climate.Errorf(climate.CodeUnauthorized, "The request you have made requires authentication: the token is not valid (unknown, expired or revoked)")
	}
	if err != nil {
		return climate.Identity{}, err
	}
	if t.ProjectID == "" {
		scope := "unscoped"
		switch {
		case t.System:
			scope = "system-scoped"
		case t.DomainID != "":
			scope = "domain-scoped"
		}
		return climate.Identity{}, climate.Errorf(climate.CodeForbidden, "The token is %s: Climate needs a project-scoped token (leases belong to projects)", scope)
	}
	return climate.Identity{
		UserID: t.UserID, ProjectID: t.ProjectID, Roles: t.Roles,
		UserName: t.UserName, ProjectName: t.ProjectName, UserDomainID: t.UserDomainID, ProjectDomainID: t.ProjectDomainID,
		Token: token,
	}, nil
}

// validate answers from the caches, else asks Keystone once for all concurrent callers
// of the same token. Errors: keystone.ErrInvalidToken, or a 503 *climate.Error.
func (k *Keystone) validate(ctx context.Context, token string, allowExpired bool) (*keystone.Token, error) {
	h := sha256.New()
	if allowExpired {
		h.Write([]byte{1}) // a separate entry: valid only beside a service token
	} else {
		h.Write([]byte{0})
	}
	h.Write([]byte(token))
	var key [32]byte
	h.Sum(key[:0])
	now := k.now()
	if e, ok := k.valid.get(key); ok && now.Before(e.until) {
		k.hits.Add(1)
		return e.token, nil
	}
	if until, ok := k.invalid.get(key); ok && now.Before(until) {
		k.hits.Add(1)
		return nil, keystone.ErrInvalidToken
	}
	k.misses.Add(1)
	v, err, _ := k.flight.Do(string(key[:]), func() (any, error) {
		// Not cancelled with the first caller: the others wait for the same answer.
		// keystone.Client bounds each request.
		t, err := k.v.Validate(context.WithoutCancel(ctx), token, allowExpired)
		now := k.now()
		if err == nil && !allowExpired && !now.Before(t.ExpiresAt) {
			err = keystone.ErrInvalidToken // expired by our clock already
		}
		switch {
		case err == nil:
			until := now.Add(k.ttl)
			if !allowExpired && t.ExpiresAt.Before(until) {
				until = t.ExpiresAt
			}
			k.valid.put(key, validEntry{t, until})
			k.invalid.remove(key)
		case errors.Is(err, keystone.ErrInvalidToken):
			k.valid.remove(key)
			if k.negTTL > 0 {
				k.invalid.put(key, now.Add(k.negTTL))
			}
		}
		return t, err
	})
	if err == nil {
		return v.(*keystone.Token), nil
	}
	if errors.Is(err, keystone.ErrInvalidToken) {
		return nil, err
	}
	var ue *keystone.UnavailableError
	if !errors.As(err, &ue) {
		ue = &keystone.UnavailableError{URL: k.v.AuthURL(), Reason: "is unreachable", Err: err}
	}
	k.warnUnavailable(ue)
	return nil, &climate.Error{Code: climate.CodeUnavailable, Message: "Cannot validate the token: " + ue.Error() + "; try again later", Err: ue}
}

// warnUnavailable logs Keystone's unavailability at most every 10 s.
func (k *Keystone) warnUnavailable(ue *keystone.UnavailableError) {
	now := time.Now().UnixNano()
	last := k.lastWarn.Load()
	if now-last < int64(10*time.Second) || !k.lastWarn.CompareAndSwap(last, now) {
		return
	}
	k.log.Warn("cannot validate new tokens: cached ones still work, new ones get 503", "keystone", ue.URL, "problem", ue.Reason, "err", ue.Err)
}

// lru is a bounded map from token digests that forgets the least recently used entry.
type lru[V any] struct {
	mu    sync.Mutex
	max   int
	order *contlist.List // front: most recently used; elements hold *lruItem[V]
	items map[[32]byte]*contlist.Element
}

type lruItem[V any] struct {
	key   [32]byte
	value V
}

func newLRU[V any](max int) *lru[V] {
	return &lru[V]{max: max, order: contlist.New(), items: make(map[[32]byte]*contlist.Element)}
}

func (c *lru[V]) get(key [32]byte) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*lruItem[V]).value, true
	}
	var zero V
	return zero, false
}

func (c *lru[V]) put(key [32]byte, value V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		el.Value.(*lruItem[V]).value = value
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&lruItem[V]{key, value})
	for c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruItem[V]).key)
	}
}

func (c *lru[V]) remove(key [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.Remove(el)
		delete(c.items, key)
	}
}

func (c *lru[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
