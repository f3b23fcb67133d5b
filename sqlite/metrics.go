package sqlite

import (
	"context"
	"io/fs"
	"strconv"
	"strings"

	"climate"
)

// SchemaVersion returns the newest migration applied to the database and the newest
// embedded in this binary: a cheap query, for readiness.
func (s *Store) SchemaVersion(ctx context.Context) (applied, known int, err error) {
	if err := s.r.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied); err != nil {
		return 0, 0, internal(err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return 0, 0, err
	}
	for _, name := range names {
		v, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(name, "migrations/"), "_", 2)[0])
		known = max(known, v)
	}
	return applied, known, nil
}

// CountLeases counts leases by status, for metrics, without loading them.
func (t *tx) CountLeases(ctx context.Context) (map[climate.LeaseStatus]int, error) {
	rows, err := t.q.QueryContext(ctx, `SELECT status, count(*) FROM leases GROUP BY status`)
	if err != nil {
		return nil, internal(err)
	}
	defer rows.Close()
	out := map[climate.LeaseStatus]int{}
	for rows.Next() {
		var s climate.LeaseStatus
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, internal(err)
		}
		out[s] = n
	}
	if err := rows.Err(); err != nil {
		return nil, internal(err)
	}
	return out, nil
}
