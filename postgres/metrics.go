package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"climate"
)

// SchemaVersion returns the newest migration applied to the schema and the newest
// embedded in this binary: a cheap query, for readiness.
func (s *Store) SchemaVersion(ctx context.Context) (applied, known int, err error) {
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied); err != nil {
		return 0, 0, dbError(err)
	}
	ms, err := loadMigrations()
	if err != nil {
		return 0, 0, err
	}
	for _, m := range ms {
		known = max(known, m.version)
	}
	return applied, known, nil
}

// CountLeases counts leases by status, for metrics, without loading them.
func (t *tx) CountLeases(ctx context.Context) (map[climate.LeaseStatus]int, error) {
	rows, err := t.q.Query(ctx, `SELECT status, count(*) FROM leases GROUP BY status`)
	if err != nil {
		return nil, dbError(err)
	}
	out := map[climate.LeaseStatus]int{}
	var s climate.LeaseStatus
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&s, &n}, func() error { out[s] = n; return nil }); err != nil {
		return nil, dbError(err)
	}
	return out, nil
}
