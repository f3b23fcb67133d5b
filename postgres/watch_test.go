package postgres

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"climate"
)

// watcher runs s.WatchEvents until the test ends and counts its wake-ups.
type watcher struct {
	wakes atomic.Int64
	woken chan struct{}
}

func watch(t *testing.T, s *Store) *watcher {
	t.Helper()
	w := &watcher{woken: make(chan struct{}, 100)}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.WatchEvents(wctx, func(Change) {
			w.wakes.Add(1)
			w.woken <- struct{}{}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchEvents: %v; want nil once its context is done", err)
		}
	})
	return w
}

// wait waits for the next wake-up; the generous timeout only bounds a broken test.
func (w *watcher) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-w.woken:
	case <-time.After(30 * time.Second):
		t.Fatalf("no wake-up after %s", what)
	}
}

func TestWatchEventsWakesOnOtherStoresCommits(t *testing.T) {
	dsn := TestDSN(t)
	app := "climate-watch-" + randomHex(4)
	a := open(t, dsn+"&application_name="+app)
	b := open(t, dsn)
	other := open(t, TestDSN(t)) // another installation in the same database
	w := watch(t, a)
	w.wait(t, "listening") // once connected, in case something was missed before

	// Another schema's commit must not wake a. Absence cannot be awaited; but
	// notifications arrive in commit order, so a wake-up for it would come first and
	// usually show in the count by the time b's has been received.
	insert(t, other, testLease("o1", t0, t0.Add(time.Hour)))
	insert(t, b, testLease("l1", t0, t0.Add(time.Hour)))
	w.wait(t, "another store committed an event")
	if n := w.wakes.Load(); n != 2 {
		t.Errorf("%d wake-ups; want 2 (listening, then b's event only)", n)
	}

	// A lost connection is re-established, and the engine is woken for what it may have
	// missed meanwhile.
	var killed int
	err := b.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN%'`, app).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminating the listener: %d killed, %v; want 1", killed, err)
	}
	w.wait(t, "reconnecting")
	l := testLease("l2", t0.Add(time.Hour), t0.Add(2*time.Hour))
	insert(t, b, l)
	w.wait(t, "an event committed after reconnecting")

	// Moving an event wakes too.
	l.Events[0].Time = t0.Add(30 * time.Minute)
	if err := b.Update(ctx, func(tx climate.Tx) error { return tx.UpdateLease(ctx, l) }); err != nil {
		t.Fatal(err)
	}
	w.wait(t, "an event moved")
}

// A committed event's notification says when it is due (the earliest of a statement's
// events); an outbox write's says so. What
// the watching store commits itself is passed over (its callers were woken as they
// committed).
func TestWatchEventsSaysWhatChanged(t *testing.T) {
	dsn := TestDSN(t)
	s, other := open(t, dsn), open(t, dsn)
	changes := make(chan Change, 100)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.WatchEvents(wctx, func(c Change) { changes <- c }) }()
	t.Cleanup(func() { cancel(); <-done })
	next := func(what string) Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(30 * time.Second): // bounds a broken test only
			t.Fatalf("no notification after %s", what)
			return Change{}
		}
	}
	if c := next("listening"); c != (Change{}) {
		t.Fatalf("after LISTEN: %+v, want the zero Change (anything may have been missed)", c)
	}
	// Notifications arrive in commit order: had s's own been passed on, it would come first.
	insert(t, s, testLease("mine", t0.Add(time.Hour), t0.Add(2*time.Hour), "h2"))
	// A lease's events make one notification, due when the earliest is: the end event,
	// written first, is not notified at all.
	l := testLease("l", t0, t0.Add(time.Hour), "h1")
	l.Events = append([]climate.Event{{ID: "l-end", LeaseID: "l", Type: climate.EventEndLease, Time: t0.Add(time.Hour),
		Status: climate.EventUndone, CreatedAt: t0}}, l.Events...)
	insert(t, other, l)
	if c := next("a lease's events"); !c.Due.Equal(t0) || c.Outbox {
		t.Errorf("the lease's events' notification: %+v, want due %s (the other store's start event)", c, t0)
	}
	err := other.Update(ctx, func(tx climate.Tx) error {
		return tx.AddNotification(ctx, &climate.Notification{ID: "n", EventType: "lease.create", LeaseID: "l", Payload: []byte(`{}`), CreatedAt: t0})
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := next("an outbox write"); !c.Outbox {
		t.Errorf("the outbox's notification: %+v, want Outbox", c)
	}
}
