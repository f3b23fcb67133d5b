package postgres

import (
	"context"
	"testing"
	"time"
)

// Replicas count each other through their rows and divide their writers: one replica
// keeps its four, two keep two each, three one each, unless the database is far; a
// replica unseen for three periods no longer counts; ShareWriters removes its row and
// gives the writers back as it stops.
func TestReplicasShareWriters(t *testing.T) {
	dsn := TestDSN(t)
	a, b, c := open(t, dsn), open(t, dsn), open(t, dsn)
	for i, step := range []struct {
		s        *Store
		instance string
		replicas int
		writers  int
	}{{a, "a", 1, 4}, {b, "b", 2, 2}, {c, "c", 3, 1}, {a, "a", 3, 1}} {
		n, err := step.s.renewReplica(ctx, step.instance, time.Minute)
		if err != nil || n != step.replicas {
			t.Fatalf("step %d: %s counts %d replicas, %v; want %d", i, step.instance, n, err, step.replicas)
		}
		if w := step.s.shareWriters(n, 0); w != step.writers {
			t.Errorf("step %d: %s lets %d writers at once; want %d", i, step.instance, w, step.writers)
		}
	}
	for _, far := range []struct {
		rtt     time.Duration
		writers int
	}{{farDatabase - time.Microsecond, 1}, {farDatabase, 4}, {10 * time.Millisecond, 4}} {
		if w := a.shareWriters(3, far.rtt); w != far.writers {
			t.Errorf("3 replicas, database %v away: %d writers at once; want %d", far.rtt, w, far.writers)
		}
	}
	if _, err := a.pool.Exec(ctx, `UPDATE replicas SET seen_at = now() - interval '4 minutes' WHERE instance = 'c'`); err != nil {
		t.Fatal(err)
	}
	if n, err := b.renewReplica(ctx, "b", time.Minute); err != nil || n != 2 {
		t.Errorf("with c unseen for four minutes, b counts %d replicas, %v; want 2", n, err)
	}

	if _, err := a.pool.Exec(ctx, `DELETE FROM replicas WHERE instance = 'c'`); err != nil {
		t.Fatal(err)
	}
	stop, cancel := context.WithCancel(ctx)
	shares := make(chan [2]int, 1)
	done := make(chan struct{})
	go func() {
		c.ShareWriters(stop, time.Hour, func(writers, replicas int, rtt time.Duration) {
			if rtt <= 0 || rtt >= farDatabase {
				t.Errorf("ShareWriters on loopback timed a round trip of %v", rtt)
			}
			shares <- [2]int{writers, replicas}
		})
		close(done)
	}()
	if got := <-shares; got != [2]int{1, 3} {
		t.Errorf("ShareWriters beside a and b: %d writers at once of %d replicas; want 1 of 3", got[0], got[1])
	}
	cancel()
	<-done
	if w := c.writes.Limited(); w != 4 {
		t.Errorf("after ShareWriters stopped: %d writers at once; want all 4", w)
	}
	var rows int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM replicas`).Scan(&rows); err != nil || rows != 2 {
		t.Errorf("after ShareWriters stopped: %d rows, %v; want a's and b's", rows, err)
	}
}

// The distance to the database is the fastest of the last round trips timed, so a few
// slowed down by a busy machine do not make it look far, and an old fast one is forgotten.
func TestRoundTripsFastestOfTheLast(t *testing.T) {
	var r roundTrips
	if got := r.min(); got != 0 {
		t.Errorf("no round trip timed: %v; want 0", got)
	}
	ms := time.Millisecond
	for i, step := range []struct{ add, want time.Duration }{
		{3 * ms, 3 * ms}, {ms, ms}, {9 * ms, ms}, {9 * ms, ms}, {9 * ms, ms}, {9 * ms, ms}, {4 * ms, 4 * ms},
	} {
		r.add(step.add)
		if got := r.min(); got != step.want {
			t.Errorf("step %d: after %v, distance %v; want %v", i, step.add, got, step.want)
		}
	}
}
