package postgres

import (
	"context"
	"testing"
	"time"
)

// Replicas count each other through their rows and divide their writers: one replica
// keeps its four, two keep two each, three one each; a replica unseen for three periods
// no longer counts; ShareWriters removes its row and gives the writers back as it stops.
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
		if w := step.s.shareWriters(n); w != step.writers {
			t.Errorf("step %d: %s lets %d writers at once; want %d", i, step.instance, w, step.writers)
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
		c.ShareWriters(stop, time.Hour, func(writers, replicas int) { shares <- [2]int{writers, replicas} })
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
