package postgres

import "context"

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

// CountLeases is sqlcore's.
