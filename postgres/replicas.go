package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"climate"
)

// ShareWriters divides the writers between the replicas that call it: every period it
// renews this store's row in replicas and counts the replicas seen in the last three
// periods, and, while the database is near, lets only its writers over that count (at
// least one) take new requests, so that the installation keeps about as many at work as
// one replica has (four by default, defaultMaxConns). One writer each, three replicas
// made 286 creations/s on loopback against 222/s with four each, and as many behind a
// 1 ms round trip (docs/performance-log.md, eleventh session): fewer writers make fewer,
// larger transactions, and each commit waits for the stamp anyway. A database farther
// than farDatabase is not shared, but for a bound on all the replicas' writers
// (farWriters). changed, if not nil, is told each new share and the round trip it was
// decided on. ShareWriters returns when ctx is done, after removing the row and giving
// the store back all its writers.
func (s *Store) ShareWriters(ctx context.Context, period time.Duration, changed func(writers, replicas int, roundTrip time.Duration)) {
	instance, last := climate.NewID(), 0
	var trips roundTrips
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = s.pool.Exec(dctx, `DELETE FROM replicas WHERE instance = $1`, instance)
		s.writes.Limit(s.writes.Writers())
	}()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		if rtt, err := fastestRoundTrip(ctx, s.pool); err == nil {
			trips.add(rtt)
		}
		if replicas, err := s.renewReplica(ctx, instance, period); err == nil {
			rtt := trips.min()
			if w := s.shareWriters(replicas, rtt); w != last && changed != nil {
				changed(w, replicas, rtt)
				last = w
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// renewReplica renews instance's row and counts the replicas seen in the last three
// periods, this one included; rows unseen for ten periods go.
func (s *Store) renewReplica(ctx context.Context, instance string, period time.Duration) (int, error) {
	var others int
	err := s.pool.QueryRow(ctx, `WITH seen AS (
			INSERT INTO replicas (instance, seen_at) VALUES ($1, now())
			ON CONFLICT (instance) DO UPDATE SET seen_at = now()),
		gone AS (
			DELETE FROM replicas WHERE seen_at < now() - 10 * make_interval(secs => $2))
		SELECT count(*) FROM replicas WHERE instance <> $1 AND seen_at >= now() - 3 * make_interval(secs => $2)`,
		instance, period.Seconds()).Scan(&others)
	return others + 1, dbError(err)
}

// farDatabase is the round trip from which a store opens more writers (farMaxConns) and
// a replica keeps all its writers at work instead of its share. Far from the database a
// transaction's time is its round trips, during which it holds nothing the others wait
// for, so the writers a replica gives up are throughput lost rather than commits queued
// on the stamp. Behind a 10 ms round trip (bench api --database-delay, H=1,000, 16
// clients) three replicas made 110/s sharing and 255–269/s not, against 125–131/s for
// one; behind 3 ms, 340/s and 378/s; behind 1 ms, where the project's two cores bind,
// sharing won, 432–451/s against 375–416/s. The line is well above a near database's
// round trip: on the project's loaded 2-core machine a ping on loopback took up to 4 ms
// (the fastest of a few stays far below).
const farDatabase = 5 * time.Millisecond

// farWriters is how many writers the replicas of a far database keep at work in all:
// three replicas' sixteen each (farMaxConns). Beyond three, each keeps its part but at
// least farMinWriters: four replicas keep twelve each, five nine, six or more eight, so
// that up to eight replicas' writers, with four connections each for reads, stay within
// PostgreSQL's default of 100 (reads may take more of a pool whose writers are idle: the
// README tells operators of many replicas to size the pool).
const (
	farWriters    = 3 * (farMaxConns - readConns)
	farMinWriters = 8
)

// shareWriters lets only this store's share of its writers among replicas take new
// requests, or, when the database's round trip is farDatabase or more, its part of
// farWriters; it returns how many it lets.
func (s *Store) shareWriters(replicas int, roundTrip time.Duration) int {
	replicas = max(replicas, 1)
	if roundTrip >= farDatabase {
		s.writes.Limit(max(farMinWriters, farWriters/replicas))
	} else {
		s.writes.Limit(s.writes.Writers() / replicas)
	}
	return s.writes.Limited()
}

// fastestRoundTrip times a few round trips to the database on a pooled connection (not
// the wait for one) and returns the fastest.
func fastestRoundTrip(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return 0, dbError(err)
	}
	defer c.Release()
	var trips roundTrips
	for range 3 {
		start := time.Now()
		if err := c.Ping(ctx); err != nil {
			return 0, dbError(err)
		}
		trips.add(time.Since(start))
	}
	return trips.min(), nil
}

// roundTrips keeps the last few round trips timed. Their fastest is the distance to the
// database: a slower one waited for something else too (a busy server or client CPU).
type roundTrips struct {
	last [5]time.Duration
	n    int
}

func (r *roundTrips) add(d time.Duration) {
	r.last[r.n%len(r.last)] = d
	r.n++
}

// min returns the fastest of the round trips kept; 0 when none is.
func (r *roundTrips) min() time.Duration {
	if r.n == 0 {
		return 0
	}
	return slices.Min(r.last[:min(r.n, len(r.last))])
}
