package sqlite

import (
	"context"
	"database/sql"
	"sync"

	"climate/sqlcore"
)

// maxCachedStatements bounds a pool's statement cache: queries are a fixed set of texts,
// but a few (multi-row inserts) vary with their row count.
const maxCachedStatements = 256

// stmtCache keeps one prepared statement per query text for a pool, so a query is parsed
// once per connection instead of once per call (a parse costs as much as a small query).
//
// A statement is created on the pool, which takes a connection: never inside a
// transaction, whose connection may be the pool's only one (the writer). A query first
// seen in a transaction runs unprepared and is prepared after the transaction ends
// (prepareWanted); Tx.StmtContext then prepares it on each connection once.
type stmtCache struct {
	db     *sql.DB
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	wanted map[string]bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// get returns the statement for query, or nil when it is not prepared yet (it will be,
// unless the cache is full).
func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.stmts[query]; ok {
		return s
	}
	if len(c.stmts)+len(c.wanted) < maxCachedStatements {
		c.wanted[query] = true
	}
	return nil
}

// prepareWanted prepares the queries transactions wanted; called outside any
// transaction. A query that fails to prepare is left unprepared.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	wanted := c.wanted
	c.wanted = map[string]bool{}
	c.mu.Unlock()
	for q := range wanted {
		s, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if _, dup := c.stmts[q]; dup || c.stmts == nil {
			s.Close()
		} else {
			c.stmts[q] = s
		}
		c.mu.Unlock()
	}
}

// pending reports whether queries wait to be prepared.
func (c *stmtCache) pending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.wanted) > 0
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.stmts {
		s.Close()
	}
	c.stmts = nil
}

// conn runs a transaction's queries through its pool's statement cache (Tx.StmtContext
// reuses a statement already prepared on the transaction's connection).
type conn struct {
	tx    *sql.Tx
	cache *stmtCache
	// detached: the statements ignore their context's cancellation (a batch's, batch.go).
	detached bool
}

func (c *conn) context(ctx context.Context) context.Context {
	if c.detached {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

func (c *conn) stmt(ctx context.Context, query string) *sql.Stmt {
	s := c.cache.get(query)
	if s == nil {
		return nil
	}
	return c.tx.StmtContext(ctx, s)
}

func (c *conn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = c.context(ctx)
	if s := c.stmt(ctx, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return c.tx.ExecContext(ctx, query, args...)
}

func (c *conn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = c.context(ctx)
	if s := c.stmt(ctx, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return c.tx.QueryContext(ctx, query, args...)
}

func (c *conn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = c.context(ctx)
	if s := c.stmt(ctx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return c.tx.QueryRowContext(ctx, query, args...)
}

// conn is sqlcore's Querier too.

func (c *conn) Query(ctx context.Context, query string, args ...any) (sqlcore.Rows, error) {
	r, err := c.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rows{r}, nil
}

func (c *conn) QueryRow(ctx context.Context, query string, args ...any) sqlcore.Row {
	return c.QueryRowContext(ctx, query, args...)
}

func (c *conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// rows is sql.Rows as sqlcore.Rows, whose Close reports nothing (Err does).
type rows struct{ *sql.Rows }

func (r rows) Close() { r.Rows.Close() }
