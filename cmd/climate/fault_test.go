package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"climate/postgres"
)

// Three replicas with engines on one PostgreSQL schema fire the start and end events of
// 200 short leases due over a few seconds; one replica is SIGKILLed while it holds claimed
// events. Its claims expire (--claim-ttl) and the others take them over. In the end every
// event is DONE, every lease TERMINATED with its reservations deleted, and each event's
// handler changed state exactly once: the replicas log one "event handled" line per
// event whose handler committed its outcome, and no event id appears twice across them.
//
// The killed replica is told apart in the database by its claim length: it runs with a
// claim TTL of 2.5 s, the others 2 s, and a claim sets claimed_until = updated_at + TTL.
func TestReplicaKilledWhileFiringEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3 server subprocesses and kills one")
	}
	dsn := postgres.TestDSN(t)
	bin := buildClimate(t)
	const (
		nLeases   = 200
		bursts    = 40 // leases start in 40 bursts of 5, 75 ms apart
		victimTTL = 2500 * time.Millisecond
		otherTTL  = 2 * time.Second
	)
	logs := []*cappedBuffer{{max: 64 << 20}, {max: 64 << 20}, {max: 64 << 20}}
	common := []string{"--database", dsn, "--log-level", "debug", "--before-end", "0"}
	var replicas []*benchServer
	for i, ttl := range []time.Duration{victimTTL, otherTTL, otherTTL} {
		args := append(append([]string{}, common...), "--claim-ttl", ttl.String())
		replicas = append(replicas, startReplicas(t, bin, 1, []io.Writer{logs[i]}, args...)...)
	}
	victim := replicas[0]

	ctx := context.Background()
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	parallel := func(n int, fn func(c *auditClient, i int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := &auditClient{http: hc, base: replicas[w%len(replicas)].url}
				for i := w; i < n; i += 8 {
					if err := fn(c, i); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	parallel(nLeases, func(c *auditClient, i int) error {
		status, body, err := c.do(ctx, "POST", "/v1/os-hosts", map[string]any{"name": fmt.Sprintf("fault-h%d", i)})
		if err == nil && status != 201 {
			err = fmt.Errorf("create host: HTTP %d %v", status, body)
		}
		return err
	})
	t0 := time.Now().UTC().Add(4 * time.Second)
	parallel(nLeases, func(c *auditClient, i int) error {
		start := t0.Add(time.Duration(i%bursts) * 75 * time.Millisecond)
		end := start.Add(time.Second + time.Duration(i%7)*100*time.Millisecond)
		var status int
		var body map[string]any
		var err error
		// Concurrent creations on three replicas may still lose every race and give up ("try again").
		for try := 0; try < 20 && (try == 0 || status == 409); try++ {
			status, body, err = c.do(ctx, "POST", "/v1/leases", map[string]any{
				"name": fmt.Sprintf("fault-%d", i), "start_date": start.Format(time.RFC3339Nano), "end_date": end.Format(time.RFC3339Nano),
				"reservations": []map[string]any{{"resource_type": "physical:host", "min": 1, "max": 1,
					"hypervisor_properties": "", "resource_properties": ""}},
			})
		}
		if err == nil && status != 201 {
			err = fmt.Errorf("create lease: HTTP %d %v", status, body)
		}
		return err
	})
	if now := time.Now(); now.After(t0) {
		t.Fatalf("creating the leases took until %s after the first start: too slow for this test", now.Sub(t0))
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// Kill the victim once a third of the starts are done and it holds claimed events.
	victimClaims := fmt.Sprintf(`status = 'IN_PROGRESS' AND claimed_until - updated_at = interval '%d milliseconds'`, victimTTL.Milliseconds())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var started, held int
		err := conn.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM events WHERE event_type = 'start_lease' AND status = 'DONE'),
			(SELECT count(*) FROM events WHERE `+victimClaims+`)`).Scan(&started, &held)
		if err != nil {
			t.Fatal(err)
		}
		if started >= nLeases/3 && held > 0 {
			break
		}
		if started == nLeases || time.Now().After(deadline) {
			t.Fatalf("%d/%d starts done and the victim replica never held a claim meanwhile", started, nLeases)
		}
		time.Sleep(2 * time.Millisecond) // polling the database: the replicas' progress is not signalled to the test
	}
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	victim.stop() // reaps it
	type orphan struct {
		id           string
		claimedUntil time.Time
	}
	var orphans []orphan
	rows, err := conn.Query(ctx, `SELECT id, claimed_until FROM events WHERE `+victimClaims)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var o orphan
		if err := rows.Scan(&o.id, &o.claimedUntil); err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, o)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(orphans) == 0 {
		t.Fatal("the victim finished its claims between the check and SIGKILL; nothing was left to take over")
	}

	// Wait until nothing is left to do.
	deadline = time.Now().Add(60 * time.Second)
	for {
		var pending, running int
		err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status IN ('UNDONE', 'IN_PROGRESS')),
			count(*) FILTER (WHERE status = 'IN_PROGRESS') FROM events`).Scan(&pending, &running)
		if err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events still UNDONE or IN_PROGRESS (%d IN_PROGRESS) a minute after the kill", pending, running)
		}
		time.Sleep(20 * time.Millisecond) // polling the database, as above
	}
	tookOver := time.Since(killed)
	for _, r := range replicas[1:] {
		r.stop() // their logs are complete once they have exited
	}

	// Database state: every event DONE once, every lease TERMINATED, reservations deleted.
	var events, done, leases, terminated, reservations, resDeleted int
	err = conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM events), (SELECT count(*) FROM events WHERE status = 'DONE'),
		(SELECT count(*) FROM leases), (SELECT count(*) FROM leases WHERE status = 'TERMINATED'),
		(SELECT count(*) FROM reservations), (SELECT count(*) FROM reservations WHERE status = 'deleted')`).
		Scan(&events, &done, &leases, &terminated, &reservations, &resDeleted)
	if err != nil {
		t.Fatal(err)
	}
	if events != 2*nLeases || done != events || leases != nLeases || terminated != leases || reservations != nLeases || resDeleted != reservations {
		t.Errorf("%d events (%d DONE), %d leases (%d TERMINATED), %d reservations (%d deleted); want %d, %d and %d, all done",
			events, done, leases, terminated, reservations, resDeleted, 2*nLeases, nLeases, nLeases)
	}
	finished := map[string]time.Time{}
	rows, err = conn.Query(ctx, `SELECT id, updated_at FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			t.Fatal(err)
		}
		finished[id] = at
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	// Effects: one "event handled" line per event across the replicas.
	handled := regexp.MustCompile(`msg="event handled" event_id=(\S+) .* failed=(\w+)`)
	count := map[string]int{}
	by := map[string]int{}
	failedLine := regexp.MustCompile(`(?m)^.*msg="event failed".*$`)
	for i, l := range logs {
		for _, line := range failedLine.FindAllString(l.String(), -1) {
			t.Errorf("replica %d: %s", i, line)
		}
		for _, m := range handled.FindAllStringSubmatch(l.String(), -1) {
			count[m[1]]++
			by[m[1]] = i
			if m[2] != "false" {
				t.Errorf("replica %d: event %s failed", i, m[1])
			}
		}
	}
	unlogged := 0
	for id, at := range finished {
		switch n := count[id]; {
		case n > 1:
			t.Errorf("event %s was handled %d times", id, n)
		case n == 0 && at.After(killed):
			t.Errorf("event %s finished at %s, after the kill, but no replica logged handling it", id, at)
		case n == 0:
			unlogged++ // finished by the victim, killed before it logged
		}
	}
	for id := range count {
		if _, ok := finished[id]; !ok {
			t.Errorf("a replica handled event %s, which is not in the database", id)
		}
	}
	for _, o := range orphans {
		if count[o.id] != 1 || by[o.id] == 0 {
			t.Errorf("orphaned event %s: handled %d times, last by replica %d; want once, by a survivor", o.id, count[o.id], by[o.id])
		}
		if at := finished[o.id]; at.Before(o.claimedUntil) {
			t.Errorf("orphaned event %s finished at %s, before the victim's claim expired at %s", o.id, at, o.claimedUntil)
		}
	}
	perReplica := make([]int, len(logs))
	for id := range count {
		perReplica[by[id]]++
	}
	t.Logf("%d events; victim killed holding %d claims; all done %.1f s after the kill; handled per replica %v (victim first); %d finished by the victim just before it died, unlogged",
		events, len(orphans), tookOver.Seconds(), perReplica, unlogged)
}
