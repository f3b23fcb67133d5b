package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"climate"
	"climate/groupcommit"
)

// Group commit (the queue: package groupcommit). SQLite has one writer, so concurrent
// Updates would commit one after the other, each paying for its own transaction: BEGIN,
// the WAL frames of every page it dirtied (the same index and counter pages, again and
// again) and COMMIT. Instead, one goroutine owns the writer connection and runs the
// Updates waiting for it together, in one transaction, each inside a savepoint:
//
//   - each request's fn sees the requests of the batch before it (their re-checks stay
//     exact, as if they had committed one by one in that order);
//   - a request whose fn fails is rolled back to its savepoint, and the others commit;
//   - nobody waits for a batch to fill: the writer takes whatever queued while the
//     previous batch committed, so one client pays nothing and many share the cost.
//
// A request's statements run with a context that is never cancelled: interrupting a
// statement of an explicit transaction may roll the whole transaction back, which would
// lose the others' work. A request whose context ends while it waits is not run.

// maxBatch bounds a batch, so one transaction stays short and a failure reruns few.
const maxBatch = 64

// writeRequest is one Update waiting for the writer.
type writeRequest struct {
	groupcommit.Request
	fn func(climate.Tx) error
}

// startWriter starts the goroutine that owns the writer connection.
func (s *Store) startWriter() {
	s.writes = groupcommit.Start(1, maxBatch, errClosed, s.commitBatch)
}

// stopWriter stops it, after the batch it is running, and the checkpointer. Closing
// twice is harmless.
func (s *Store) stopWriter() {
	if s.closing == nil {
		return
	}
	s.closeOnce.Do(func() { close(s.closing) })
	if s.writes != nil {
		s.writes.Close()
	}
}

// Update runs fn in a write transaction, batched with the Updates that wait at the same
// time (group commit, above). fn must not call Update on the same Store: the writer is
// busy running it, so it would wait for ever.
func (s *Store) Update(ctx context.Context, fn func(climate.Tx) error) error {
	return s.writes.Submit(&writeRequest{Request: groupcommit.Request{Ctx: ctx}, fn: fn})
}

var errClosed = internal(errors.New("sqlite: store closed"))

// commitBatch runs the requests in one transaction and tells each its outcome. When the
// transaction itself breaks (a savepoint cannot be rolled back), it is rolled back whole
// and the requests that had not failed run again, each in a transaction of its own.
func (s *Store) commitBatch(live []*writeRequest) (carried []*writeRequest) {
	results, err := s.runBatch(live)
	groupcommit.Settle(live, results, err, s.runBatch)
	if s.ws.pending() { // the connection is back in the pool: prepare what was new
		s.ws.prepareWanted(context.Background())
	}
	for i, r := range live {
		r.Answer(results[i])
	}
	// Housekeeping, once the requests have their answers, before the next batch.
	if frames, err := s.framesWritten(context.Background()); err == nil {
		s.walWritten(frames)
	}
	if _, transactions := s.counts.Load(); transactions-s.prunedAt >= pruneLogEvery {
		s.prunedAt = transactions
		s.pruneLog(context.Background())
	}
	return nil // SQLite takes no locks a request could give its place up for
}

// runBatch runs the requests in one transaction, each in a savepoint when there are
// several. results[i] is the error of the i-th request's fn; a request with a nil result
// is committed when err is nil too.
func (s *Store) runBatch(reqs []*writeRequest) (results []error, err error) {
	ctx := context.Background() // see "A request's statements" above
	results = make([]error, len(reqs))
	sqlTx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return results, internal(err)
	}
	defer sqlTx.Rollback() // after Commit: a no-op
	t := newTx(&conn{tx: sqlTx, cache: s.ws, detached: true}, true)
	if len(reqs) == 1 {
		if results[0] = groupcommit.Call(reqs[0].fn, climate.Tx(t)); results[0] != nil {
			return results, nil
		}
		return results, s.commit(sqlTx, results)
	}
	exec := func(stmt string) bool {
		_, err := sqlTx.ExecContext(ctx, stmt)
		return err == nil
	}
	for i, r := range reqs {
		if !exec("SAVEPOINT request") {
			return results, groupcommit.ErrBroken
		}
		if results[i] = groupcommit.Call(r.fn, climate.Tx(t)); results[i] != nil && !exec("ROLLBACK TO request") {
			return results, groupcommit.ErrBroken
		}
		if !exec("RELEASE request") {
			return results, groupcommit.ErrBroken
		}
	}
	return results, s.commit(sqlTx, results)
}

// commit commits a batch's transaction and counts the requests it held that succeeded.
func (s *Store) commit(sqlTx *sql.Tx, results []error) error {
	if err := sqlTx.Commit(); err != nil {
		return internal(err)
	}
	s.counts.Committed(results)
	return nil
}

// Writes returns how many writes (Updates) this Store has committed and in how many
// transactions (metrics.WriteCounter): with group commit, several share one.
func (s *Store) Writes() (writes, transactions int64) {
	return s.counts.Load()
}

// WriterBusy returns how long the writer has spent running write transactions
// (metrics.WriterBusyCounter): SQLite has one, so its share of a span of time is how
// busy the one thing all writes wait for was.
func (s *Store) WriterBusy() time.Duration { return s.writes.Busy() }
