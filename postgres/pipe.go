package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// queryer is what a transaction's statements go through: a pgx.Tx for reads, a pipe for
// writes.
type queryer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// pipe is a write transaction on one connection whose statements share round trips.
// BEGIN is not sent on its own but with the transaction's first statement; statements
// whose only answer is an error (a lease's rows or its deletion, an audit entry, a
// notification, usage records, a charge) are held back and go with the next statement, in the same pgx
// batch, or with COMMIT. A lease creation's transaction went from 12 round trips to 3
// (doc.go). A held
// statement's error is returned by the statement it went with (or by Commit): the
// transaction is aborted either way, and nothing is written.
type pipe struct {
	conn *pgx.Conn
	held pgx.Batch
	// read reads each held statement's result, in order; nil for an Exec.
	read []func(pgx.BatchResults) error
	// sent counts the round trips, so a value read alongside another statement is used
	// only if nothing was sent since (tx.inventory).
	sent int
	// heldFailed is set once a held statement failed (in a batch, perhaps another
	// request's: batch.go).
	heldFailed bool
}

func newPipe(conn *pgx.Conn) *pipe {
	p := &pipe{conn: conn}
	p.hold(nil, "begin")
	return p
}

// hold queues a statement to go with the next one; read, when set, reads its result.
func (p *pipe) hold(read func(pgx.BatchResults) error, sql string, args ...any) {
	p.held.Queue(sql, args...)
	p.read = append(p.read, read)
}

// holdBatch holds b's statements; each one's callback (pgx's QueuedQuery.Exec and the
// like), when it has one, reads its result.
func (p *pipe) holdBatch(b *pgx.Batch) {
	for _, q := range b.QueuedQueries {
		p.held.QueuedQueries = append(p.held.QueuedQueries, q)
		p.read = append(p.read, q.Fn) // nil: read as an Exec
	}
}

// send sends the held statements, then b's, in one round trip, and reads the held ones'
// results; the caller reads b's from what it returns and closes it.
func (p *pipe) send(ctx context.Context, b *pgx.Batch) (pgx.BatchResults, error) {
	all, read := p.held, p.read
	p.held, p.read = pgx.Batch{}, nil
	if b != nil {
		all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
	}
	p.sent++
	br := p.conn.SendBatch(ctx, &all)
	for _, r := range read {
		var err error
		if r != nil {
			err = r(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			p.heldFailed = true
			br.Close()
			return nil, err
		}
	}
	return br, nil
}

// aborted reports whether a statement failed in the transaction (and it was not rolled
// back to a savepoint since).
func (p *pipe) aborted() bool { return p.conn.PgConn().TxStatus() == 'E' }

// rollbackTo rolls an aborted transaction back to a savepoint, at once and in the simple
// protocol: pgx prepares a batch's new statements before running it, which an aborted
// transaction refuses, and it forgets a failed batch's statements without deallocating
// them until the transaction is usable again, so preparing one anew would fail.
func (p *pipe) rollbackTo(ctx context.Context, savepoint string) error {
	p.sent++
	return p.conn.PgConn().Exec(ctx, "rollback to savepoint "+savepoint).Close()
}

// truncate drops the held statements from the n-th on, unsent.
func (p *pipe) truncate(n int) {
	p.held.QueuedQueries, p.read = p.held.QueuedQueries[:n], p.read[:n]
}

func one(sql string, args ...any) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return b
}

func (p *pipe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := p.send(ctx, one(sql, args...))
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (p *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := p.send(ctx, one(sql, args...))
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (p *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return batchRow{p, ctx, one(sql, args...)}
}

func (p *pipe) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br, err := p.send(ctx, b)
	if err != nil {
		return failedBatch{err}
	}
	return br
}

// commit sends the held statements and COMMIT in one round trip; when then is set, sql
// goes after COMMIT in the same round trip (PostgreSQL runs it after the commit, in a
// transaction of its own) and then reads its result if the commit succeeded.
func (p *pipe) commit(ctx context.Context, then func(pgx.BatchResults), sql string, args ...any) error {
	b := one("commit")
	if then != nil {
		b.Queue(sql, args...)
	}
	br, err := p.send(ctx, b)
	if err != nil {
		return err
	}
	tag, err := br.Exec()
	if err == nil && tag.String() == "ROLLBACK" { // an earlier error aborted it
		err = pgx.ErrTxCommitRollback
	}
	if err == nil && then != nil {
		then(br)
	}
	// After a commit that succeeded, the read after it failing (then saw it) is not the
	// write's failure.
	if cerr := br.Close(); err == nil && then == nil {
		err = cerr
	}
	return err
}

// rollback ends a transaction that was not committed; one never begun (its BEGIN still
// held) needs nothing.
func (p *pipe) rollback(ctx context.Context) {
	if p.sent == 0 {
		return
	}
	_, _ = p.conn.Exec(ctx, "rollback")
}

// batchRows closes its batch with its rows, so the connection is free once they are read.
type batchRows struct {
	pgx.Rows
	br       pgx.BatchResults
	closeErr error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		if err := r.br.Close(); err != nil && r.Rows.Err() == nil {
			r.closeErr = err
		}
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.closeErr
}

// batchRow sends its statement when scanned, as pgx's own QueryRow reports its errors.
type batchRow struct {
	p   *pipe
	ctx context.Context
	b   *pgx.Batch
}

func (r batchRow) Scan(dest ...any) error {
	br, err := r.p.send(r.ctx, r.b)
	if err != nil {
		return err
	}
	err = br.QueryRow().Scan(dest...)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// failedBatch is the results of a batch whose held statements failed.
type failedBatch struct{ err error }

func (f failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f failedBatch) Query() (pgx.Rows, error)         { return nil, f.err }
func (f failedBatch) QueryRow() pgx.Row                { return errRow{f.err} }
func (f failedBatch) Close() error                     { return f.err }
func (f failedBatch) Tx() pgx.Tx                       { return nil }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
