// Package groupcommit is the queue of a store's group commit: write requests wait for
// writer goroutines, each of which, when free, takes every request waiting (up to a
// bound) and has the store run them as one batch, in one transaction. Nobody waits for a
// batch to fill: one client pays nothing, many share a transaction's cost. The store
// decides how a batch runs (sqlite/batch.go, postgres/batch.go).
package groupcommit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"climate"
)

// Request is what every queued request carries; a store's request type embeds it.
type Request struct {
	Ctx  context.Context
	done chan error // the outcome, once its batch has committed or rolled back
}

// Answer tells the request its outcome.
func (r *Request) Answer(err error) { r.done <- err }

func (r *Request) request() *Request { return r }

// Queued is a store's request type: a pointer to a struct embedding Request.
type Queued interface{ request() *Request }

// Queue holds the requests waiting for the writers.
type Queue[T Queued] struct {
	ch               chan T
	closing, stopped chan struct{}
	closeOnce        sync.Once
	closed           error
	// run runs a batch of live requests and answers each, but for those it returns,
	// which go first in the writer's next batch.
	run func(batch []T) (carried []T)

	// share says how many of the writers take new requests (Limit).
	share   atomic.Pointer[share]
	writers int
	// busy is the time the writers have spent in run, summed over writers (Busy).
	busy atomic.Int64
}

// Start starts writers goroutines taking batches of at most max requests for run.
// Submit returns closed once the queue is closed.
func Start[T Queued](writers, max int, closed error, run func(batch []T) (carried []T)) *Queue[T] {
	q := &Queue[T]{ch: make(chan T, max), closing: make(chan struct{}), stopped: make(chan struct{}), closed: closed, run: run,
		writers: writers}
	q.share.Store(&share{limit: writers, changed: make(chan struct{})})
	var running sync.WaitGroup
	running.Add(writers)
	for i := range writers {
		go func() {
			defer running.Done()
			q.loop(i)
		}()
	}
	go func() {
		running.Wait()
		close(q.stopped)
	}()
	return q
}

// Close stops the writers after the batches they are running and answers the requests
// still queued. Closing again is harmless.
func (q *Queue[T]) Close() {
	q.closeOnce.Do(func() { close(q.closing) })
	<-q.stopped
}

// share is how many writers take new requests; changed is closed when that changes.
type share struct {
	limit   int
	changed chan struct{}
}

// Limit lets only n of the writers (at least one, at most all) take new requests: the
// others finish what they hold and then wait, so requests queue for those at work and
// make larger batches. That means fewer, larger transactions where every commit waits
// for a lock the whole database shares (postgres/doc.go).
func (q *Queue[T]) Limit(n int) {
	old := q.share.Swap(&share{limit: min(max(n, 1), q.writers), changed: make(chan struct{})})
	close(old.changed) // each share is swapped out once, so closed once
}

// Busy returns how long the writers have spent running batches, summed over writers:
// over a span of time, the busy time it adds divided by the span is how many writers were
// busy on average. A single writer busy all the time is what bounds a store's writes.
func (q *Queue[T]) Busy() time.Duration { return time.Duration(q.busy.Load()) }

// Writers returns how many writers the queue has.
func (q *Queue[T]) Writers() int { return q.writers }

// Limited returns how many writers take new requests.
func (q *Queue[T]) Limited() int { return q.share.Load().limit }

// take waits for a new request for writer i, while i is among the writers the limit
// lets take them; ok is false once the queue closes.
func (q *Queue[T]) take(i int) (r T, ok bool) {
	for {
		sh := q.share.Load()
		wait := q.ch
		if i >= sh.limit {
			wait = nil // this writer idles until the limit changes
		}
		select {
		case r = <-wait:
			return r, true
		case <-sh.changed:
		case <-q.closing:
			return r, false
		}
	}
}

// Waiting returns how many requests wait for a writer.
func (q *Queue[T]) Waiting() int { return len(q.ch) }

// Submit queues r and returns its outcome. A request is run to its end once a writer
// took it (its batch depends on it); one whose context ends while it waits is not run.
// A panic in the request's work (Call) panics here again.
func (q *Queue[T]) Submit(r T) error {
	req := r.request()
	if err := req.Ctx.Err(); err != nil {
		return internal(err)
	}
	req.done = make(chan error, 1)
	select {
	case q.ch <- r:
	case <-req.Ctx.Done():
		return internal(req.Ctx.Err())
	case <-q.closing:
		return q.closed
	}
	var err error
	select {
	case err = <-req.done:
	case <-q.stopped: // the writers answered all they took before they stopped
		select {
		case err = <-req.done:
		default:
			err = q.closed
		}
	}
	if p, ok := err.(Panicked); ok {
		panic(p.Value)
	}
	return err
}

// loop is writer i's. A writer runs the requests its last batch handed back whatever
// the limit: no other writer has them.
func (q *Queue[T]) loop(i int) {
	var carried []T
	max := cap(q.ch)
	batch := make([]T, 0, max)
	for {
		batch = append(batch[:0], carried...)
		if len(batch) == 0 {
			r, ok := q.take(i)
			if !ok {
				q.refuseQueued()
				return
			}
			batch = append(batch, r)
		}
	more:
		for len(batch) < max {
			select {
			case r := <-q.ch:
				batch = append(batch, r)
			default:
				break more
			}
		}
		live := batch[:0:0]
		for _, r := range batch {
			if err := r.request().Ctx.Err(); err != nil {
				r.request().Answer(internal(err))
				continue
			}
			live = append(live, r)
		}
		carried = nil
		if len(live) > 0 {
			t0 := time.Now()
			carried = q.run(live)
			q.busy.Add(int64(time.Since(t0)))
		}
	}
}

// refuseQueued answers the requests still queued when the queue closes.
func (q *Queue[T]) refuseQueued() {
	for {
		select {
		case r := <-q.ch:
			r.request().Answer(q.closed)
		default:
			return
		}
	}
}

func internal(err error) error { return &climate.Error{Code: climate.CodeInternal, Err: err} }

// Panicked carries a panic in a request's work back to the goroutine that submitted it.
type Panicked struct{ Value any }

func (p Panicked) Error() string { return fmt.Sprint("panic in an Update: ", p.Value) }

// Call runs fn(x), turning a panic into Panicked, which Submit panics with again.
func Call[X any](fn func(X) error, x X) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = Panicked{v}
		}
	}()
	return fn(x)
}

// Counts counts the writes (requests) the writers committed and the transactions they
// took: a store's Writes.
type Counts struct{ writes, transactions atomic.Int64 }

// Committed counts a committed transaction whose requests' own outcomes are results (nil
// for each that succeeded), and returns how many transactions holding writes there have
// been. A transaction whose requests all failed wrote nothing and is not counted.
func (c *Counts) Committed(results []error) (transactions int64) {
	writes := 0
	for _, err := range results {
		if err == nil {
			writes++
		}
	}
	if writes == 0 {
		return c.transactions.Load()
	}
	c.writes.Add(int64(writes))
	return c.transactions.Add(1)
}

// Load returns the writes and transactions counted.
func (c *Counts) Load() (writes, transactions int64) {
	return c.writes.Load(), c.transactions.Load()
}

// ErrBroken is a batch's error when its transaction can no longer hold the requests that
// succeeded in it (Settle).
var ErrBroken = errors.New("groupcommit: batch transaction broken")

// Settle turns a batch's outcome into each request's, in results: results[i] is request
// i's own failure (nil if none), err the transaction's. When err is ErrBroken the
// transaction was rolled back whole, and each request that had not failed runs again
// alone, through run.
func Settle[T any](reqs []T, results []error, err error, run func([]T) ([]error, error)) {
	for i := range reqs {
		switch {
		case results[i] != nil: // its own failure, rolled back whatever became of the rest
		case errors.Is(err, ErrBroken):
			alone, err := run(reqs[i : i+1])
			results[i] = cmp.Or(alone[0], err)
		default: // committed, unless BEGIN or COMMIT failed and nothing was
			results[i] = err
		}
	}
}
