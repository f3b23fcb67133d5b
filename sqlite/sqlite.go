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
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"climate"
	"climate/groupcommit"
	"climate/sqlcore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the SQLite implementation of climate.Store.
type Store struct {
	w *sql.DB // one connection: SQLite has one writer
	r *sql.DB // readers
	// Prepared statements of each pool.
	ws, rs *stmtCache
	// The writer goroutine's queue (batch.go); closing stops it and the checkpointer.
	writes    *groupcommit.Queue[*writeRequest]
	closing   chan struct{}
	closeOnce sync.Once
	// The writes (Updates) committed and the transactions that held them (Writes).
	counts groupcommit.Counts
	// The transactions counted at the allocation log's last pruning (log.go); the writer
	// goroutine's alone.
	prunedAt int64
	// The background checkpointer's connection and signals (checkpoint.go), and the
	// writer's WAL frames when it last asked for a checkpoint.
	ckpt                 *sql.DB
	ckptWanted, ckptDone chan struct{}
	ckptAskedAt          int64
}

var _ climate.Store = (*Store)(nil)

// readers is the size of the read pool: enough for concurrent API reads, few enough that
// idle connections cost little.
const readers = 4

// dsn builds a modernc "file:" URI for path. The pragmas are DSN parameters, not
// statements run once, because database/sql opens connections lazily and each must get
// them; busy_timeout comes first so that switching to WAL waits for a lock.
func dsn(path string, write bool) string {
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	if write {
		// The writer keeps the pages its inserts walk (indexes over every allocation)
		// in a larger cache than a reader's 2 MiB, and leaves checkpoints to checkpoint.go.
		// Not much larger: SQLite walks its page cache's hash table at every commit
		// (pcache1TruncateUnsafe: 9.5% of the server's CPU with 32 MiB, 1.9% with 4 MiB
		// in a profile of 3,000 creations), and in three alternating pairs of bench api
		// (H=5,000, 16 clients) 8 MiB cost 1.99-2.36 ms of server CPU a creation against
		// 2.23-2.79 ms with 32 MiB; 4 MiB lost both its pairs to 8 MiB.
		// Its statement journals (an INSERT with triggers keeps one, to undo the
		// statement alone) stay in memory rather than in a temporary file written page by
		// page; the writer runs no large sorts that temp_store would also keep there.
		q.Add("_pragma", "cache_size(-8192)")
		q.Add("_pragma", "temp_store(MEMORY)")
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", autoCheckpointPages))
		q.Set("_txlock", "immediate")
	} else {
		q.Set("_query_only", "1") // defence in depth: View's Tx refuses writes already
	}
	// Escaped, so a '?', '#' or '%' in the path is not read as URI syntax.
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Open opens (creating it if needed) the database at path and applies pending migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	if err := createPrivate(path); err != nil {
		return nil, err
	}
	w, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)
	s := &Store{w: w, r: r, ws: newStmtCache(w), rs: newStmtCache(r)}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.closing = make(chan struct{})
	if err := s.startCheckpointer(path); err != nil {
		s.Close()
		return nil, err
	}
	s.startWriter()
	return s, nil
}

// createPrivate creates the database file readable by its owner only, unless it exists.
// SQLite gives its -wal and -shm files the database file's permissions, so they follow;
// left to SQLite, all three would be created 0644 and readable by every local user.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// Close closes the database.
func (s *Store) Close() error {
	s.stopWriter()
	var ckptErr error
	if s.ckpt != nil {
		<-s.ckptDone
		ckptErr = s.ckpt.Close()
	}
	s.ws.close()
	s.rs.close()
	return errors.Join(ckptErr, s.r.Close(), s.w.Close())
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

// View runs fn in a read transaction on the reader pool; its Tx refuses writes.
func (s *Store) View(ctx context.Context, fn func(climate.Tx) error) error {
	sqlTx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return internal(err)
	}
	err = func() error {
		defer sqlTx.Rollback()
		return fn(newTx(&conn{tx: sqlTx, cache: s.rs}, false))
	}()
	if s.rs.pending() { // the connection is back in the pool: prepare what was new
		s.rs.prepareWanted(context.WithoutCancel(ctx))
	}
	return err
}

// tx implements climate.Tx over one SQL transaction: sqlcore's shared reads and writes,
// and this store's own where SQLite differs.
type tx struct {
	sqlcore.Tx
	q *conn
}

func newTx(c *conn, write bool) *tx {
	return &tx{Tx: sqlcore.Tx{Q: c, D: dialect, Write: write}, q: c}
}

var errReadOnly = &climate.Error{Code: climate.CodeInternal, Err: errors.New("sqlite: write in a read-only transaction")}

// dialect is how SQLite writes what sqlcore's queries leave open: '?' placeholders as
// they are, times as integer microseconds, lists as a JSON array read by json_each (one
// parameter however many ids, no SQLITE_MAX_VARIABLE_NUMBER limit), and an inventory
// revision moved by the store's own statement.
var dialect = &sqlcore.Dialect{
	Time:     func(t time.Time) any { return micros(t) },
	NullTime: nullMicros,
	List:     func(ids []string) any { return sqlcore.JSONList(ids) },
	InList:   " IN (SELECT value FROM json_each(?))",
	False:    "%s = 0",
	// The unary + stops SQLite from walking a whole index by resource merely to skip a
	// sort: over all resources, searching the end_at index for the window was about twice
	// as fast (see BenchmarkListAllocationsWindow). There has been none since migration
	// 0021; a host's allocations are read by lease (manager.allocationsOn).
	AllocationOrder: "+resource_id, start_at, id",
	Err:             internal,
	ErrReadOnly:     errReadOnly,
	BumpInventory:   `UPDATE meta SET value = value + 1 WHERE key = 'inventory_revision'`,
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

// isUnique reports whether err is a UNIQUE or PRIMARY KEY violation.
func isUnique(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) &&
		(e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
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
