package postgres

import (
	"context"
	"net"
	"net/url"
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

// A store whose database is far (here a proxy that holds each chunk it passes on for 3
// ms, so a round trip takes over 6) opens more writers, and keeps them all beside up to
// two other replicas, fewer beside more; one on loopback opens the default pool.
func TestFarDatabaseGetsMoreWriters(t *testing.T) {
	dsn := TestDSN(t)
	near := open(t, dsn)
	if got := near.pool.Config().MaxConns; got != defaultMaxConns {
		t.Errorf("on loopback: a pool of %d; want %d", got, defaultMaxConns)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = delayingProxy(t, u.Host, 3*time.Millisecond)
	far := open(t, u.String())
	if got, writers := far.pool.Config().MaxConns, far.writes.Writers(); got != farMaxConns || writers != farMaxConns-readConns {
		t.Errorf("3 ms each way: a pool of %d with %d writers; want %d with %d", got, writers, farMaxConns, farMaxConns-readConns)
	}
	rtt, err := fastestRoundTrip(ctx, far.pool)
	if err != nil || rtt < farDatabase {
		t.Fatalf("through the proxy a round trip took %v, %v; want at least %v", rtt, err, farDatabase)
	}
	for _, share := range []struct{ replicas, writers int }{
		{1, farMaxConns - readConns}, {3, farMaxConns - readConns}, {4, 12}, {5, 9}, {6, farMinWriters}, {12, farMinWriters},
	} {
		if w := far.shareWriters(share.replicas, rtt); w != share.writers {
			t.Errorf("%d replicas of a far database: %d writers at once; want %d", share.replicas, w, share.writers)
		}
	}
	sized := open(t, u.String()+"&pool_max_conns=6")
	if got := sized.pool.Config().MaxConns; got != 6 {
		t.Errorf("pool_max_conns=6, far: a pool of %d; want 6", got)
	}
}

// delayingProxy forwards connections to target, holding each chunk read for delay
// before passing it on, and returns its address.
func delayingProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	pass := func(dst, src net.Conn) {
		defer dst.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				time.Sleep(delay) // the simulated distance, not a wait for an event
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go pass(d, c)
			go pass(c, d)
		}
	}()
	return l.Addr().String()
}
