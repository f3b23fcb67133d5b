package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migration is one embedded migration file.
type migration struct {
	version int
	name    string
	body    string
}

func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []migration
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		version, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number", base)
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version, base, string(body)})
	}
	return out, nil
}

// Migrate creates the schema and the btree_gist extension if missing, then applies every
// embedded migration not yet recorded in the schema's schema_migrations table. It is
// idempotent and safe to run from several processes at once: each step holds an
// advisory lock until it commits.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.bootstrap(ctx); err != nil {
		return fmt.Errorf("postgres: prepare schema %s: %w", s.schema, err)
	}
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Keyed by schema: installations in other schemas migrate in parallel.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('climate.migrate'), hashtext($1))`, s.schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("postgres: migrations table: %w", err)
		}
		applied := map[int]bool{}
		rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return err
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return err
		}
		for _, v := range versions {
			applied[int(v)] = true
		}
		// All pending migrations commit together: an upgrade is whole or not at all.
		for _, m := range ms {
			if applied[m.version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.body); err != nil {
				return fmt.Errorf("postgres: migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return err
			}
		}
		return nil
	})
}

// bootstrap creates what migrations need but cannot create themselves without racing
// installations in other schemas: the btree_gist extension (database-wide, in public, so
// dropping one installation's schema never drops it) and the schema. One database-wide
// advisory lock serializes it; nothing is created when it exists already, so a role
// without CREATE privileges works on a prepared database.
func (s *Store) bootstrap(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('climate.bootstrap'))`); err != nil {
			return err
		}
		var hasExt, hasSchema bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'btree_gist'),
			EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, s.schema).Scan(&hasExt, &hasSchema)
		if err != nil {
			return err
		}
		if !hasExt {
			if _, err := tx.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS btree_gist WITH SCHEMA public`); err != nil {
				return fmt.Errorf("create extension btree_gist: %w", err)
			}
		}
		if !hasSchema {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{s.schema}.Sanitize()); err != nil {
				return err
			}
		}
		return nil
	})
}
