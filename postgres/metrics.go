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

// WALBytes returns the cluster's WAL insert position in bytes: how much every database
// of the cluster has written to the WAL since it was created. Two readings bracket what
// a benchmark made PostgreSQL write, a figure the machine's noise does not move.
func (s *Store) WALBytes(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint`).Scan(&n)
	return n, dbError(err)
}
