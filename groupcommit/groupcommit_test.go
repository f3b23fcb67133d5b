package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// req is a test request: run records the names of each batch it is given.
type req struct {
	Request
	name string
}

func submit(q *Queue[*req], ctx context.Context, name string) <-chan error {
	out := make(chan error, 1)
	go func() { out <- q.Submit(&req{Request: Request{Ctx: ctx}, name: name}) }()
	return out
}

func waitFor(q *Queue[*req], n int) {
	for q.Waiting() < n {
		runtime.Gosched()
	}
}

var errClosed = errors.New("closed")

// The requests queued while the writer is busy go as one batch; a request the store
// hands back goes first in the next batch; one whose context ended while it waited is
// answered without being run.
func TestBatchesCarriedAndCancelled(t *testing.T) {
	var mu sync.Mutex
	var batches [][]string
	busy, release := make(chan struct{}), make(chan struct{})
	carriedOnce := false
	q := Start(1, 8, errClosed, func(batch []*req) []*req {
		var names []string
		for _, r := range batch {
			names = append(names, r.name)
		}
		mu.Lock()
		batches = append(batches, names)
		mu.Unlock()
		if batch[0].name == "first" {
			close(busy)
			<-release
		}
		var carried []*req
		for _, r := range batch {
			if r.name == "b" && !carriedOnce {
				carriedOnce, carried = true, append(carried, r)
				continue
			}
			r.Answer(nil)
		}
		return carried
	})
	defer q.Close()
	first := submit(q, context.Background(), "first")
	<-busy
	ctx, cancel := context.WithCancel(context.Background())
	a := submit(q, context.Background(), "a")
	waitFor(q, 1)
	b := submit(q, context.Background(), "b")
	waitFor(q, 2)
	gone := submit(q, ctx, "gone")
	waitFor(q, 3)
	cancel()
	close(release)
	for name, ch := range map[string]<-chan error{"first": first, "a": a, "b": b} {
		if err := <-ch; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Errorf("the request cancelled while it waited: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := [][]string{{"first"}, {"a", "b"}, {"b"}}
	if len(batches) != len(want) {
		t.Fatalf("batches %v, want %v", batches, want)
	}
	for i := range want {
		if len(batches[i]) != len(want[i]) || batches[i][0] != want[i][0] || len(want[i]) > 1 && batches[i][1] != want[i][1] {
			t.Errorf("batches %v, want %v", batches, want)
		}
	}
}

// A panic in a request's work (Call) panics in the goroutine that submitted it.
func TestPanicPassesToSubmitter(t *testing.T) {
	q := Start(1, 8, errClosed, func(batch []*req) []*req {
		for _, r := range batch {
			r.Answer(Call(func(string) error { panic("boom") }, r.name))
		}
		return nil
	})
	defer q.Close()
	defer func() {
		if v := recover(); v != "boom" {
			t.Errorf("recovered %v, want the request's panic", v)
		}
	}()
	q.Submit(&req{Request: Request{Ctx: context.Background()}})
	t.Error("Submit returned")
}

// Submit on a closed queue fails at once; closing twice is harmless.
func TestSubmitAfterClose(t *testing.T) {
	q := Start(2, 8, errClosed, func(batch []*req) []*req { return nil })
	q.Close()
	q.Close()
	if err := q.Submit(&req{Request: Request{Ctx: context.Background()}}); err != errClosed {
		t.Errorf("Submit after Close: %v", err)
	}
}

// Settle: a request's own failure stands; after a broken batch the others run alone.
func TestSettle(t *testing.T) {
	own := errors.New("own")
	results := []error{nil, own, nil}
	var alone []string
	Settle([]string{"a", "b", "c"}, results, ErrBroken, func(rs []string) ([]error, error) {
		alone = append(alone, rs...)
		if rs[0] == "c" {
			return []error{nil}, errors.New("commit failed")
		}
		return []error{nil}, nil
	})
	if results[0] != nil || results[1] != own || results[2] == nil || len(alone) != 2 || alone[0] != "a" || alone[1] != "c" {
		t.Errorf("results %v, ran alone %v", results, alone)
	}
}

// Counts counts a transaction's successful requests as writes, and a transaction only when
// it held one.
func TestCounts(t *testing.T) {
	var c Counts
	failed := errors.New("refused")
	if n := c.Committed([]error{nil, failed, nil}); n != 1 {
		t.Errorf("after a batch of two writes: %d transactions, want 1", n)
	}
	if n := c.Committed([]error{failed, failed}); n != 1 {
		t.Errorf("after a batch that wrote nothing: %d transactions, want still 1", n)
	}
	c.Committed([]error{nil})
	if w, n := c.Load(); w != 3 || n != 2 {
		t.Errorf("Load: %d writes in %d transactions, want 3 in 2", w, n)
	}
}

// Limit holds writers back: with three writers limited to one, a second request waits
// in the queue while the first runs, until the limit is raised; Limit keeps to at least
// one and at most the writers there are.
func TestLimitHoldsWritersBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running atomic.Int32
		release := make(chan struct{})
		q := Start(3, 1, errClosed, func(batch []*req) []*req {
			running.Add(1)
			<-release
			running.Add(-1)
			for _, r := range batch {
				r.Answer(nil)
			}
			return nil
		})
		q.Limit(1)
		synctest.Wait() // the writers above the limit see it before any request comes
		var outs []<-chan error
		for _, name := range []string{"a", "b", "c"} {
			outs = append(outs, submit(q, context.Background(), name))
		}
		synctest.Wait()
		if n := running.Load(); n != 1 {
			t.Fatalf("limited to one writer: %d batches running", n)
		}
		q.Limit(2)
		synctest.Wait()
		if n := running.Load(); n != 2 {
			t.Fatalf("limited to two writers: %d batches running", n)
		}
		close(release)
		for _, out := range outs {
			if err := <-out; err != nil {
				t.Errorf("Submit: %v", err)
			}
		}
		for n, want := range map[int]int{0: 1, 2: 2, 9: 3} {
			if q.Limit(n); q.Limited() != want {
				t.Errorf("Limit(%d): %d writers; want %d", n, q.Limited(), want)
			}
		}
		q.Close()
	})
}

// yieldingOnce returns a run that hands every request back once, the first time it
// sees it, as a store does with a request that gave up its place for a lock, and
// answers it the second time. Until release is closed, a first run waits for it.
func yieldingOnce(release <-chan struct{}) func([]*req) []*req {
	var mu sync.Mutex
	seen := map[*req]bool{}
	return func(batch []*req) (carried []*req) {
		for _, r := range batch {
			mu.Lock()
			again := seen[r]
			seen[r] = true
			mu.Unlock()
			if again {
				r.Answer(nil)
				continue
			}
			<-release
			carried = append(carried, r)
		}
		return carried
	}
}

// A writer that holds requests handed back runs them again at once, even when the limit
// was lowered below it meanwhile: nothing else would, since no other writer has them.
func TestCarriedRunAboveTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		q := Start(2, 1, errClosed, yieldingOnce(release))
		defer q.Close()
		a, b := submit(q, context.Background(), "a"), submit(q, context.Background(), "b")
		synctest.Wait() // each writer runs one of them
		q.Limit(1)
		close(release)
		synctest.Wait()
		for name, out := range map[string]<-chan error{"a": a, "b": b} {
			select {
			case err := <-out:
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
			default:
				t.Errorf("%s, handed back to the writer above the limit, was not run again", name)
			}
		}
	})
}

// Busy adds up the time writers spend running batches, over all writers, and not the
// time they wait for requests.
func TestBusyCountsRunningNotWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := Start(2, 1, errClosed, func(batch []*req) []*req {
			time.Sleep(3 * time.Second) // the fake clock's: exactly 3 s a batch
			for _, r := range batch {
				r.Answer(nil)
			}
			return nil
		})
		defer q.Close()
		time.Sleep(time.Minute) // idle writers are not busy
		if b := q.Busy(); b != 0 {
			t.Fatalf("idle for a minute: busy %v, want 0", b)
		}
		a, b := submit(q, context.Background(), "a"), submit(q, context.Background(), "b")
		for _, out := range []<-chan error{a, b} {
			if err := <-out; err != nil {
				t.Fatal(err)
			}
		}
		if b := q.Busy(); b != 6*time.Second {
			t.Errorf("two writers, a batch of 3 s each: busy %v, want 6s", b)
		}
	})
}
