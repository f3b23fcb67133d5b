package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// TryLead makes holder the leader of name for ttl if nobody else is, or renews its lead.
// It reports whether holder leads now. Expiry uses the database's clock, so replicas
// with skewed clocks agree; a leader must renew well within ttl, and stop leading work
// when TryLead says false or fails.
func (s *Store) TryLead(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, errors.New("postgres: TryLead: ttl must be positive")
	}
	// One statement: concurrent callers race on the primary key, and ON CONFLICT lets
	// exactly one of them insert or take over.
	var got string
	err := s.pool.QueryRow(ctx, `INSERT INTO leaders (name, holder, expires_at)
		VALUES ($1, $2, clock_timestamp() + $3 * interval '1 microsecond')
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
		WHERE leaders.holder = EXCLUDED.holder OR leaders.expires_at <= clock_timestamp()
		RETURNING holder`, name, holder, ttl.Microseconds()).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, dbError(err)
	}
	return true, nil
}

// Resign gives up holder's lead of name, if it has it, so another replica can take over
// without waiting for the ttl.
func (s *Store) Resign(ctx context.Context, name, holder string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM leaders WHERE name = $1 AND holder = $2`, name, holder)
	return dbError(err)
}

// Lead is holder's lead of name for callers that ask whether they lead far more often
// than it needs renewing (the notification deliverer asks on every wake-up, once per
// lease created at low load, on every replica). Lead.Try renews it with TryLead only
// once a third of ttl has passed since the last renewal began; in between it answers
// true without a write. The lead it reports is sound: the database keeps it until at
// least the start of that renewal plus ttl. A holder told no asks again only a tenth of
// ttl later: TryLead's upsert locks the leader row even when it changes nothing, which
// makes every asking replica's transaction a write of its own to commit.
type Lead struct {
	store        *Store
	name, holder string
	ttl          time.Duration
	now          func() time.Time // time.Now; tests move it

	mu      sync.Mutex
	renewed time.Time // when the last successful renewal began; zero: not leading
	refused time.Time // when the last refusal was asked for; zero: none since leading
}

// NewLead returns holder's lead of name, not yet taken.
func (s *Store) NewLead(name, holder string, ttl time.Duration) *Lead {
	return &Lead{store: s, name: name, holder: holder, ttl: ttl, now: time.Now}
}

// Try reports whether the holder leads, renewing or taking the lead when a third of ttl
// has passed since the last renewal (TryLead).
func (l *Lead) Try(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := l.now()
	if !l.renewed.IsZero() && start.Sub(l.renewed) < l.ttl/3 {
		return true, nil
	}
	if !l.refused.IsZero() && start.Sub(l.refused) < l.ttl/10 {
		return false, nil
	}
	ok, err := l.store.TryLead(ctx, l.name, l.holder, l.ttl)
	l.renewed, l.refused = time.Time{}, time.Time{}
	switch {
	case err != nil:
		return false, err
	case !ok:
		l.refused = start
		return false, nil
	}
	l.renewed = start
	return true, nil
}
