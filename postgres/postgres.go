package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"climate"
	"climate/groupcommit"
	"climate/sqlcore"
)

// Store is the PostgreSQL implementation of climate.Store. Its transactions also
// implement climate.AllocationLog.
type Store struct {
	pool   *pgxpool.Pool
	schema string // where this installation's tables live: the first entry of search_path
	// writes queues Updates for the writer goroutines (batch.go), one for each of the
	// pool's connections but readConns, so writers waiting for a lock never take every
	// connection away from Views.
	writes *groupcommit.Queue[*writeRequest]
	// own holds the server process ids of the pool's connections: WatchEvents passes over
	// what they notify, which this process was told of as it committed.
	own sync.Map
	// The writes (Updates) committed and the transactions (batches) that held them
	// (Writes); the round trips those took (WriteRoundTrips).
	counts     groupcommit.Counts
	roundTrips atomic.Int64
}

var (
	_ climate.Store        = (*Store)(nil)
	_ climate.CommitReader = (*Store)(nil)
)

// Open connects to the database at dsn (a postgres:// URL or key=value string) and applies
// pending migrations. A search_path parameter selects the schema of this installation
// (created if missing), so several can share one database; public is appended to the
// path when absent, for the btree_gist operator classes.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, schema, err := parseConfig(dsn)
	if err != nil {
		return nil, err
	}
	s := &Store{schema: schema}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		s.own.Store(c.PgConn().PID(), struct{}{})
		return nil
	}
	cfg.BeforeClose = func(c *pgx.Conn) { s.own.Delete(c.PgConn().PID()) }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if !poolSized(dsn) {
		// A far database gets the writers its round trips need (farMaxConns).
		if rtt, err := fastestRoundTrip(ctx, pool); err == nil && rtt >= farDatabase {
			pool.Close()
			cfg.MaxConns = farMaxConns
			if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
				return nil, fmt.Errorf("postgres: %w", err)
			}
		}
	}
	s.pool = pool
	if s.schema == "" {
		// No search_path given: the server's default decides, as for any client.
		var cur *string
		if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&cur); err != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres: %w", err)
		}
		if cur == nil {
			pool.Close()
			return nil, errors.New("postgres: no schema in the search path exists: add ?search_path=NAME to the URL")
		}
		s.schema = *cur
	}
	if err := s.Migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	s.startWriters(max(1, int(cfg.MaxConns)-readConns))
	return s, nil
}

// defaultMaxConns is the pool's size when the URL sets no pool_max_conns: readConns for
// Views and four for writers. More writers at once only queue on PostgreSQL's locks
// (every commit that changed allocations takes the commit stamp's in turn, see doc.go),
// where waiting costs the database far more than in the process, and more connections
// make every backend's snapshots dearer. On a 2-core machine 16 clients made 130-132
// creations/s with 24 connections (PostgreSQL's CPU 10.5-10.7 ms a creation), 142-152/s
// with 20 reading and 4 writing, and 165-168/s with 8 (7.7 ms); behind a 1 ms round trip
// 126/s with 24 and 145/s with 8.
const defaultMaxConns = 8

// farMaxConns is the pool's size when the URL sets none and the database is far
// (farDatabase, timed as the store opens): sixteen writers. There a transaction's time is
// its round trips, during which it holds nothing the others wait for, so a request needs
// a writer of its own more than a place in a batch: a batch runs its requests' round
// trips one after another, and a writer that found eight requests waiting kept them all
// for 17 round trips. Behind a 10 ms round trip one replica at 16 clients made 122–129/s
// with four writers, 202–235/s with eight and 295–351/s with sixteen
// (docs/performance-log.md, fifteenth session). The pool opens connections as writers
// need them; three replicas' pools, 60 at most, stay within PostgreSQL's default of 100
// connections.
const farMaxConns = readConns + 16

// readConns is how many of the pool's connections are kept from writers for Views.
const readConns = 4

// poolSized says whether dsn sets the pool's size.
func poolSized(dsn string) bool { return strings.Contains(dsn, "pool_max_conns") }

// parseConfig parses dsn and returns the schema named first in its search_path ("" when
// there is none), with public appended to the path.
func parseConfig(dsn string) (*pgxpool.Config, string, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, "", fmt.Errorf("postgres: %w", err) // pgx redacts the password
	}
	if !poolSized(dsn) {
		cfg.MaxConns = defaultMaxConns
	}
	path, ok := cfg.ConnConfig.RuntimeParams["search_path"]
	if !ok || strings.TrimSpace(path) == "" {
		return cfg, "", nil
	}
	names := splitSearchPath(path, cfg.ConnConfig.User)
	hasPublic := false
	for _, n := range names {
		hasPublic = hasPublic || n == "public"
	}
	if !hasPublic {
		path += ", public"
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = path
	return cfg, names[0], nil
}

// splitSearchPath returns the schema names of a search_path value as the server reads
// them: unquoted names fold to lower case, "$user" is the user's own schema.
func splitSearchPath(path, user string) []string {
	var out []string
	for _, part := range strings.Split(path, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "$user":
			part = user
		case len(part) >= 2 && part[0] == '"' && part[len(part)-1] == '"':
			part = strings.ReplaceAll(part[1:len(part)-1], `""`, `"`)
		default:
			part = strings.ToLower(part)
		}
		out = append(out, part)
	}
	return out
}

// Schema returns the schema holding this store's tables.
func (s *Store) Schema() string { return s.schema }

// Close closes the connection pool. WatchEvents calls stop when their context is done.
func (s *Store) Close() error {
	s.writes.Close()
	s.pool.Close()
	return nil
}

// View runs fn in a read-only REPEATABLE READ transaction: one consistent snapshot.
func (s *Store) View(ctx context.Context, fn func(climate.Tx) error) error {
	pgTx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return dbError(err)
	}
	defer rollback(ctx, pgTx)
	return fn(newTx(pgTx, false, ""))
}

// Update runs fn in a write transaction, batched with the Updates waiting at the same
// time (group commit, batch.go). Writers run side by side: they serialize only on the
// resources whose allocations they read to re-check (ListAllocations), and, for the
// instant of the commit, on the allocation revision (see doc.go). fn must not call Update
// on the same Store.
func (s *Store) Update(ctx context.Context, fn func(climate.Tx) error) error {
	return s.write(ctx, func(t *tx) error { return fn(t) })
}

// StampsAtCommit implements climate.CommitStamped: allocation changes get their revisions
// at commit (doc.go), so a write transaction cannot see its own.
func (*Store) StampsAtCommit() {}

// write is Update for the store's own maintenance writes.
func (s *Store) write(ctx context.Context, fn func(*tx) error) error {
	return s.enqueue(&writeRequest{Request: groupcommit.Request{Ctx: ctx}, fn: fn})
}

// Writes returns how many writes (Updates) this Store has committed and in how many
// transactions (metrics.WriteCounter): group commit runs several in one.
func (s *Store) Writes() (writes, transactions int64) {
	return s.counts.Load()
}

// WriterBusy returns how long the writers have spent running write transactions, summed
// over writers (metrics.WriterBusyCounter).
func (s *Store) WriterBusy() time.Duration { return s.writes.Busy() }

// WriteRoundTrips returns how many round trips to the database those transactions took
// in all, BEGIN and COMMIT included (metrics.RoundTripCounter): what a database a network
// away costs each write.
func (s *Store) WriteRoundTrips() int64 {
	return s.roundTrips.Load()
}

// rollback ends a transaction that was not committed. It runs even when ctx is cancelled,
// so a healthy connection goes back to the pool clean.
func rollback(ctx context.Context, pgTx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = pgTx.Rollback(ctx) // after Commit: a no-op; on a broken connection the pool drops it
}

// tx implements climate.Tx and climate.AllocationLog over one transaction: sqlcore's
// shared reads and writes, and this store's own where PostgreSQL differs.
type tx struct {
	sqlcore.Tx
	q      queryer
	p      *pipe  // a write transaction's, to hold statements back (pipe.go)
	schema string // keys this installation's resource locks (lockResources)
	// The inventory revision read with the chosen resources' locks, and the pipe's round
	// trip it came in.
	inventory   *int64
	inventoryAt int
}

func newTx(pgTx pgx.Tx, write bool, schema string) *tx {
	return &tx{Tx: sqlcore.Tx{Q: querier{pgTx}, D: dialect, Write: write}, q: pgTx, schema: schema}
}

func newWriteTx(p *pipe, schema string) *tx {
	return &tx{Tx: sqlcore.Tx{Q: querier{p}, D: dialect, Write: true}, q: p, p: p, schema: schema}
}

var (
	_ climate.Tx            = (*tx)(nil)
	_ climate.AllocationLog = (*tx)(nil)
)

var errReadOnly = &climate.Error{Code: climate.CodeInternal, Err: errors.New("postgres: write in a read-only transaction")}

// dialect is how PostgreSQL writes what sqlcore's queries leave open: $n placeholders
// (querier rebinds), timestamptz times, lists as a text[] parameter read by ANY, and
// inventory revisions moved by triggers.
var dialect = &sqlcore.Dialect{
	Time:            func(t time.Time) any { return ts(t) },
	NullTime:        nullTS,
	List:            func(ids []string) any { return ids },
	InList:          " = ANY(?)",
	False:           "NOT %s",
	AllocationOrder: "resource_id, start_at, id",
	Err:             dbError,
	ErrReadOnly:     errReadOnly,
}

// rebinder numbers the '?' placeholders of sqlcore's queries, once per query text.
var rebinder sqlcore.Rebinder

// querier runs sqlcore's queries in a pgx transaction.
type querier struct{ tx queryer }

func (q querier) Query(ctx context.Context, query string, args ...any) (sqlcore.Rows, error) {
	rows, err := q.tx.Query(ctx, rebinder.Rebind(query), args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (q querier) QueryRow(ctx context.Context, query string, args ...any) sqlcore.Row {
	return q.tx.QueryRow(ctx, rebinder.Rebind(query), args...)
}

func (q querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := q.tx.Exec(ctx, rebinder.Rebind(query), args...)
	return tag.RowsAffected(), err
}

// Time conversions: UTC, truncated to the microseconds timestamptz keeps; NULL for the
// zero time in nullable columns.

func ts(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func nullTS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ts(t)
}

func fromTS(t time.Time) time.Time { return t.UTC() }
