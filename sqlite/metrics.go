package sqlite

import (
	"context"
	"io/fs"
	"strconv"
	"strings"
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

// CountLeases is sqlcore's.
