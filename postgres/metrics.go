package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
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

// CountLeases is sqlcore's.

// WALBytes returns the cluster's WAL insert position in bytes: how much every database
// of the cluster has written to the WAL since it was created. Two readings bracket what
// a benchmark made PostgreSQL write, a figure the machine's noise does not move.
func (s *Store) WALBytes(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint`).Scan(&n)
	return n, dbError(err)
}

// Vacuum vacuums and analyzes the schema's tables, as autovacuum would in time: after a
// bulk load the planner then has statistics and the visibility map is set, and the rows
// of deleted leases (and of the allocation log's stamps) are reclaimed. bench load and
// bench api run it after loading a book and after each run's deletions, so that no run
// meets another's dead rows, whether or not the server's autovacuum is on.
func (s *Store) Vacuum(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT format('VACUUM (ANALYZE) %I.%I', schemaname, tablename)
		FROM pg_tables WHERE schemaname = $1 ORDER BY tablename`, s.schema)
	if err != nil {
		return dbError(err)
	}
	stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return dbError(err)
	}
	for _, stmt := range stmts {
		if _, err := s.pool.Exec(ctx, stmt); err != nil {
			return dbError(err)
		}
	}
	return nil
}

// Autovacuum says whether the server's autovacuum is on. The allocation log's stamps and
// deleted leases leave dead rows, and only a vacuum reclaims them (Vacuum, or the
// operator's own).
func (s *Store) Autovacuum(ctx context.Context) (bool, error) {
	var on bool
	err := s.pool.QueryRow(ctx, `SELECT current_setting('autovacuum')::boolean`).Scan(&on)
	return on, dbError(err)
}

// NotAnalyzed returns how many of the schema's tables were never analyzed (by Vacuum,
// autovacuum or an operator).
func (s *Store) NotAnalyzed(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_user_tables
		WHERE schemaname = $1 AND last_analyze IS NULL AND last_autoanalyze IS NULL`, s.schema).Scan(&n)
	return n, dbError(err)
}
