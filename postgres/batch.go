package postgres

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"climate"
	"climate/groupcommit"
)

// Group commit, as on SQLite (sqlite/batch.go; the queue: package groupcommit). Each write
// transaction pays for BEGIN, COMMIT with its WAL flush, the commit stamp (taken in turn
// by every writer, doc.go) and, for the manager's, the log's read-back; under load most of
// a writer's cost is that. So a few writer goroutines (one per writer connection) each
// take the Updates waiting when it is free and run them in one transaction, each inside a
// savepoint:
//
//   - each request's fn sees the requests of the batch before it: its re-check reads
//     their allocations, and the locks they took are its own;
//   - a request whose fn fails is rolled back to its savepoint, and the others commit;
//   - nobody waits for a batch to fill: one client pays nothing, many share the cost.
//
// Locks would make batches deadlock: a batch's later request, holding its earlier ones'
// locks, could wait for another batch waiting for those. PostgreSQL would find that only
// after deadlock_timeout (a second) and abort a whole batch. So only a batch's first
// request waits for locks as a lone transaction does; the others run under a short
// lock_timeout, and one that times out is rolled back to its savepoint and goes first in
// the writer's next batch. A cycle of waits then always has a request that gives up.
//
// When the transaction itself fails (a statement held from one request failing in
// another's round trip, or COMMIT refused: a deferred constraint), it is rolled back
// whole and the requests that had not failed run again, each alone. A request's
// statements run with the writer's context, never cancelled mid-batch: pgx closes a
// connection whose query is cancelled, which would lose the others' work. A request whose
// context ends while it waits is not run.

// maxBatch bounds a batch: a failure reruns few, and a transaction's subtransactions stay
// within what PostgreSQL caches per backend (64), beyond which every snapshot is dearer.
const maxBatch = 16

// laterLockTimeout is how long a batch's later request waits for a lock before it gives
// up its place (above).
const laterLockTimeout = "10ms"

// sqlLockNotAvailable is lock_timeout's SQLSTATE.
const sqlLockNotAvailable = "55P03"

// writeRequest is one Update waiting for a writer.
type writeRequest struct {
	groupcommit.Request
	fn func(*tx) error
	// since, when not nil, asks for the allocation log after the revision it returns
	// just before COMMIT (unless it declines), read after COMMIT in its round trip
	// (UpdateThenChanges); read is where the batch puts it, for every request it
	// committed.
	since func() (int64, bool)
	read  *changesRead
}

// changesRead is the log read after a batch's commit, shared by the requests that asked.
type changesRead struct {
	inventory, allocation int64
	changes               []climate.AllocationChange
	ok                    bool
}

var errClosed = &climate.Error{Code: climate.CodeInternal, Err: errors.New("postgres: store closed")}

// startWriters starts n writer goroutines.
func (s *Store) startWriters(n int) {
	s.writes = groupcommit.Start(n, maxBatch, errClosed, s.commitBatch)
}

// enqueue runs r in a writer's batch and returns fn's outcome.
func (s *Store) enqueue(r *writeRequest) error { return s.writes.Submit(r) }

// commitBatch runs the requests in one transaction and tells each its outcome, but for
// those that gave up their places for a lock, which it returns.
func (s *Store) commitBatch(live []*writeRequest) (carried []*writeRequest) {
	results, err := s.runBatch(live)
	groupcommit.Settle(live, results, err, s.runBatch)
	for i, r := range live {
		if results[i] == errYielded {
			carried = append(carried, r)
		} else {
			r.Answer(results[i])
		}
	}
	return carried
}

// errYielded: the request gave up its place in the batch for a lock, and was rolled back.
var errYielded = errors.New("postgres: request yielded its place")

// runBatch runs the requests in one transaction, each in a savepoint when there are
// several. results[i] is the error of the i-th request's fn (errYielded for one that
// gave up its place); a request with a nil result is committed when err is nil too.
func (s *Store) runBatch(reqs []*writeRequest) (results []error, err error) {
	results = make([]error, len(reqs))
	// A request's statements run on, whatever becomes of its own context (above), until
	// every request of the batch has stopped waiting.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waiting atomic.Int32
	waiting.Store(int32(len(reqs)))
	for _, r := range reqs {
		stop := context.AfterFunc(r.Ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return results, dbError(err)
	}
	// A connection left mid-transaction (a failed rollback) is closed by Release, not
	// pooled.
	defer conn.Release()
	p := newPipe(conn.Conn())
	committed := false
	defer func() {
		if !committed {
			p.rollback(ctx)
		}
	}()
	if len(reqs) == 1 {
		results[0] = groupcommit.Call(reqs[0].fn, newWriteTx(p, s.schema))
	} else {
		for i, r := range reqs {
			if i == 1 {
				p.hold(nil, `SELECT set_config('lock_timeout', $1, true)`, laterLockTimeout)
			}
			held, sent := len(p.read), p.sent
			p.hold(nil, "savepoint request")
			results[i] = groupcommit.Call(r.fn, newWriteTx(p, s.schema))
			switch {
			case p.heldFailed: // perhaps an earlier request's statement: who failed is unclear
				results[i] = nil // to run again alone, as the others that had not failed
				return results, groupcommit.ErrBroken
			case results[i] == nil && p.aborted(): // it went on past an error
				return results, groupcommit.ErrBroken
			case results[i] == nil:
				p.hold(nil, "release savepoint request")
				continue
			case sent == p.sent: // nothing of it ran: its savepoint is still held
				p.truncate(held)
			default: // everything held is its own, queued since its last round trip
				p.truncate(0)
				if p.aborted() {
					if err := p.rollbackTo(ctx, "request"); err != nil {
						return results, groupcommit.ErrBroken
					}
				} else {
					p.hold(nil, "rollback to savepoint request")
				}
				p.hold(nil, "release savepoint request")
			}
			if i > 0 && sqlState(results[i]) == sqlLockNotAvailable {
				results[i] = errYielded
			}
		}
		p.hold(nil, `SELECT set_config('lock_timeout', '0', true)`) // not for the stamp's lock at COMMIT
	}
	if !slices.Contains(results, nil) {
		return results, nil // nothing to commit
	}
	since, wanted := int64(0), false
	for i, r := range reqs {
		if results[i] == nil && r.since != nil {
			if v, want := r.since(); want && (!wanted || v < since) {
				since, wanted = v, true
			}
		}
	}
	var read *changesRead
	var then func(pgx.BatchResults)
	var args []any
	if wanted {
		read, args = &changesRead{}, []any{since}
		then = func(br pgx.BatchResults) {
			rows, err := br.Query()
			if err == nil {
				read.inventory, read.allocation, read.changes, read.ok, err = scanChanges(rows)
			}
			read.ok = read.ok && err == nil
		}
	}
	if err := p.commit(ctx, then, changesSinceQuery, args...); err != nil {
		if len(reqs) > 1 && (sqlState(err) != "" || errors.Is(err, pgx.ErrTxCommitRollback)) {
			return results, groupcommit.ErrBroken // the server refused it: nothing was written
		}
		return results, dbError(err)
	}
	committed = true
	for i, r := range reqs {
		if results[i] == nil {
			r.read = read
		}
	}
	s.counts.Committed(results)
	s.roundTrips.Add(int64(p.sent))
	return results, nil
}
