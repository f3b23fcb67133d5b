package postgres

import (
	"context"
	"errors"
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
