// Package sqlite is Climate's embedded store: one SQLite file in WAL mode, a single
// writer connection whose transactions start with BEGIN IMMEDIATE (so a check-then-insert
// inside one Update is atomic across goroutines and processes), and a pool of readers that
// each see a consistent snapshot.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"climate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the SQLite implementation of climate.Store.
type Store struct {
	w *sql.DB // one connection: SQLite has one writer
	r *sql.DB // readers
}

var _ climate.Store = (*Store)(nil)

func dsn(path string, write bool) string {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "foreign_keys(1)", "busy_timeout(10000)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	if write {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating it if needed) the database at path and applies pending migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	w, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	r, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(4)
	s := &Store{w: w, r: r}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// Migrate applies every embedded migration not yet recorded, each in its own transaction.
// It is idempotent.
func (s *Store) Migrate(ctx context.Context) error {
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrations table: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		version, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migration %s: name must start with a number", base)
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		if err := s.apply(ctx, version, string(body)); err != nil {
			return fmt.Errorf("migration %s: %w", base, err)
		}
	}
	return nil
}

func (s *Store) apply(ctx context.Context, version int, body string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, version, time.Now().UnixMicro()); err != nil {
		return err
	}
	return tx.Commit()
}

// View runs fn in a read transaction.
func (s *Store) View(ctx context.Context, fn func(climate.Tx) error) error {
	return s.run(ctx, s.r, false, fn)
}

// Update runs fn in a write transaction (BEGIN IMMEDIATE on the single writer).
func (s *Store) Update(ctx context.Context, fn func(climate.Tx) error) error {
	return s.run(ctx, s.w, true, fn)
}

func (s *Store) run(ctx context.Context, db *sql.DB, write bool, fn func(climate.Tx) error) error {
	sqlTx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: !write})
	if err != nil {
		return internal(err)
	}
	defer sqlTx.Rollback()
	if err := fn(&tx{q: sqlTx, write: write}); err != nil {
		return err
	}
	if !write {
		return nil
	}
	return internal(sqlTx.Commit())
}

// tx implements climate.Tx over one SQL transaction.
type tx struct {
	q     *sql.Tx
	write bool
}

var errReadOnly = &climate.Error{Code: climate.CodeInternal, Err: errors.New("sqlite: write in a read-only transaction")}

func (t *tx) writable() error {
	if !t.write {
		return errReadOnly
	}
	return nil
}

// internal wraps unexpected database errors so they are logged, never shown.
func internal(err error) error {
	if err == nil {
		return nil
	}
	var ce *climate.Error
	if errors.As(err, &ce) {
		return err
	}
	return &climate.Error{Code: climate.CodeInternal, Err: err}
}

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// Time conversions: microseconds since the epoch, NULL for the zero time.

func micros(t time.Time) int64 { return t.UTC().UnixMicro() }

func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().UnixMicro()
}

func fromMicros(n int64) time.Time { return time.UnixMicro(n).UTC() }

func fromNullMicros(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromMicros(n.Int64)
}

// placeholders returns "?, ?, …" for n arguments.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
