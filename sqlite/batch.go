package sqlite

import (
	"context"
	"errors"
	"fmt"

	"climate"
)

// Group commit. SQLite has one writer, so concurrent Updates would commit one after the
// other, each paying for its own transaction: BEGIN, the WAL frames of every page it
// dirtied (the same index and counter pages, again and again) and COMMIT. Instead, one
// goroutine owns the writer connection and runs the Updates waiting for it together, in
// one transaction, each inside a savepoint:
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
	ctx  context.Context
	fn   func(climate.Tx) error
	done chan error // receives fn's outcome once its batch has committed or rolled back
}

// panicked carries a panic in fn back to the goroutine that called Update.
type panicked struct{ value any }

func (p panicked) Error() string { return fmt.Sprint("panic in an Update: ", p.value) }

// startWriter starts the goroutine that owns the writer connection.
func (s *Store) startWriter() {
	s.writes = make(chan *writeRequest, maxBatch)
	s.writerDone = make(chan struct{})
	go s.writeLoop()
}

// stopWriter stops it, after the batch it is running, and the checkpointer. Closing
// twice is harmless.
func (s *Store) stopWriter() {
	if s.closing == nil {
		return
	}
	s.closeOnce.Do(func() { close(s.closing) })
	if s.writerDone != nil {
		<-s.writerDone
	}
}

// Update runs fn in a write transaction, batched with the Updates that wait at the same
// time (group commit, above). fn must not call Update on the same Store: the writer is
// busy running it, so it would wait for ever.
func (s *Store) Update(ctx context.Context, fn func(climate.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return internal(err)
	}
	r := &writeRequest{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.writes <- r:
	case <-ctx.Done():
		return internal(ctx.Err())
	case <-s.closing:
		return errClosed
	}
	var err error
	select {
	case err = <-r.done: // once queued, a request is run to its end: its batch depends on it
	case <-s.writerDone: // closed: the writer answered all it took before it stopped
		select {
		case err = <-r.done:
		default:
			err = errClosed
		}
	}
	if p, ok := err.(panicked); ok {
		panic(p.value)
	}
	return err
}

func (s *Store) writeLoop() {
	defer close(s.writerDone)
	batch := make([]*writeRequest, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case r := <-s.writes:
			batch = append(batch, r)
		case <-s.closing:
			s.refuseQueued()
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case r := <-s.writes:
				batch = append(batch, r)
			default:
				break more
			}
		}
		s.commitBatch(batch)
	}
}

// refuseQueued answers the requests still queued when the store closes.
func (s *Store) refuseQueued() {
	for {
		select {
		case r := <-s.writes:
			r.done <- errClosed
		default:
			return
		}
	}
}

var errClosed = internal(errors.New("sqlite: store closed"))

// commitBatch runs the requests in one transaction and tells each its outcome. When the
// transaction itself breaks (a savepoint cannot be rolled back), it is rolled back whole
// and the requests that had not failed run again, each in a transaction of its own.
func (s *Store) commitBatch(batch []*writeRequest) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- internal(err)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	results, err := s.runBatch(live)
	if err == nil {
		s.committed()
	}
	for i, r := range live {
		switch {
		case results[i] != nil: // its own failure, rolled back whatever happened to the rest
		case errors.Is(err, errBatchBroken):
			results[i] = s.runAlone(r)
		default: // kept, unless BEGIN or COMMIT failed and nothing was
			results[i] = err
		}
	}
	if s.ws.pending() { // the connection is back in the pool: prepare what was new
		s.ws.prepareWanted(context.Background())
	}
	for i, r := range live {
		r.done <- results[i]
	}
}

// errBatchBroken: the batch's transaction can no longer be trusted to hold the requests
// that succeeded in it.
var errBatchBroken = errors.New("sqlite: batch transaction broken")

// runAlone runs one request in a transaction of its own.
func (s *Store) runAlone(r *writeRequest) error {
	results, err := s.runBatch([]*writeRequest{r})
	if results[0] != nil {
		return results[0]
	}
	return err
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
		if results[0] = call(reqs[0].fn, t); results[0] != nil {
			return results, nil
		}
		return results, internal(sqlTx.Commit())
	}
	exec := func(stmt string) bool {
		_, err := sqlTx.ExecContext(ctx, stmt)
		return err == nil
	}
	for i, r := range reqs {
		if !exec("SAVEPOINT request") {
			return results, errBatchBroken
		}
		if results[i] = call(r.fn, t); results[i] != nil && !exec("ROLLBACK TO request") {
			return results, errBatchBroken
		}
		if !exec("RELEASE request") {
			return results, errBatchBroken
		}
	}
	return results, internal(sqlTx.Commit())
}

// call runs fn, turning a panic into an error its caller panics with again.
func call(fn func(climate.Tx) error, t *tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicked{v}
		}
	}()
	return fn(t)
}
