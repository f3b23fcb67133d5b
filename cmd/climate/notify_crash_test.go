//go:build unix

package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"climate/bench"
	"climate/postgres"
)

// notificationLine matches the log destination's line for one delivered notification.
var notificationLine = regexp.MustCompile(`msg=notification .*? id=(\S+) seq=(\d+)`)

// delivered counts the notifications each log names, by notification id.
func delivered(logs ...*bench.CappedBuffer) []map[string]int {
	out := make([]map[string]int, len(logs))
	for i, l := range logs {
		out[i] = map[string]int{}
		for _, m := range notificationLine.FindAllStringSubmatch(l.String(), -1) {
			out[i][m[1]]++
		}
	}
	return out
}

// outbox reads a store's outbox and delivery cursors for the tests.
type outbox struct {
	q func(query string, dest ...any) error
	// order is the notifications' column that delivery cursors count in: seq on SQLite,
	// position on PostgreSQL, where seq is taken at insert (a rolled-back creation leaves
	// a gap) and position at commit.
	order string
}

// outboxProgress reads, through o, the outbox's last position and how far destination has got.
func outboxProgress(t *testing.T, o outbox, destination string) (last, position int64) {
	t.Helper()
	if err := o.q(`SELECT coalesce(max(`+o.order+`), 0), coalesce((SELECT position FROM delivery_cursors WHERE destination = '`+destination+`'), 0) FROM notifications`, &last, &position); err != nil {
		t.Fatal(err)
	}
	return last, position
}

// createWebhook subscribes url through c and returns the name of its delivery cursor.
func createWebhook(t *testing.T, c *auditClient, url string) string {
	t.Helper()
	status, body, err := c.do(context.Background(), "POST", "/v1/webhooks", map[string]any{"url": url})
	if err != nil || status != 201 {
		t.Fatalf("create webhook: HTTP %d %v %v", status, body, err)
	}
	w, _ := body["webhook"].(map[string]any)
	id, _ := w["id"].(string)
	if id == "" {
		t.Fatalf("create webhook: %v", body)
	}
	return "webhook:" + id
}

// A server on SQLite is SIGKILLed with notifications committed and not delivered (its
// webhook's receiver holds deliveries, so they pile up; the log may be behind too);
// restarted on the same data directory, it delivers every notification the dead process
// committed and had not delivered: to the webhook each exactly once (none was received
// before the kill), to the log each at least once (duplicates only for deliveries the
// dead process made but had not recorded: the log's cursor is saved at most once a
// second or once a batch of 100 is owed, notify.Replayable, so fewer than two batches).
func TestKilledServerDeliversCommittedNotifications(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills a server subprocess")
	}
	bin := climateBinary(t)
	dir := t.TempDir()
	logs := []*bench.CappedBuffer{{Max: 64 << 20}, {Max: 64 << 20}}
	args := []string{"--data-dir", dir, "--before-end", "0", "--webhook-allow-private"}
	first := startReplicas(t, bin, 1, []io.Writer{logs[0]}, args...)[0]
	ctx := context.Background()
	c := &auditClient{http: &http.Client{Timeout: time.Minute}, base: first.URL}
	hook := newHookReceiver(t) // a second destination, in the test process: it outlives the kill
	dest := createWebhook(t, c, hook.url)
	release := hook.hold()
	const nLeases = 300
	inParallel(t, 20, func(i int) error {
		status, body, err := c.do(ctx, "POST", "/v1/os-hosts", map[string]any{"name": fmt.Sprintf("n-h%d", i)})
		if err == nil && status != 201 {
			err = fmt.Errorf("create host: HTTP %d %v", status, body)
		}
		return err
	})
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "climate.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	query := outbox{func(q string, dest ...any) error { return db.QueryRow(q).Scan(dest...) }, "seq"}

	// Create leases from 4 clients in the background; freeze the server once the outbox
	// is ahead of the webhook (the freeze makes what it sees the state it dies with), then
	// kill it.
	start := time.Now().UTC().Add(time.Hour)
	creating := make(chan struct{})
	go func() {
		defer close(creating)
		inParallel(t, nLeases, func(i int) error {
			s := start.Add(time.Duration(i) * time.Hour)
			// Errors are expected: the server is killed under these requests.
			_, _, _ = c.do(ctx, "POST", "/v1/leases", map[string]any{
				"name": fmt.Sprintf("n-%d", i), "start_date": s.Format(time.RFC3339), "end_date": s.Add(time.Hour).Format(time.RFC3339),
				"reservations": []map[string]any{{"resource_type": "physical:host", "min": 1, "max": 1}},
			})
			return nil
		})
	}()
	last, position := freezeBehind(t, first, query, dest)
	_, logPosition := outboxProgress(t, query, "log")
	if err := first.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.Stop()
	<-creating
	release()
	second := startReplicas(t, bin, 1, []io.Writer{logs[1]}, args...)[0]
	final := waitDelivered(t, query, dest, time.Minute)
	waitDelivered(t, query, "log", time.Minute)
	hooked := hook.waitFor(t, int(final), time.Minute)
	second.Stop()

	rows, err := db.Query(`SELECT id, seq FROM notifications ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	by := delivered(logs[0], logs[1])
	missing, twice, afterRestart, hookMissing, hookTwice := 0, 0, 0, 0, 0
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		n := by[0][id] + by[1][id]
		switch {
		case n == 0:
			missing++
		case n > 1:
			twice++
		}
		if seq > logPosition && by[1][id] > 0 {
			afterRestart++
		}
		switch hooked[id] {
		case 0:
			hookMissing++
		case 1:
		default:
			hookTwice++
		}
	}
	if missing > 0 || twice >= 200 {
		t.Errorf("%d notifications never logged, %d logged twice (fewer than two batches of 100 may be)", missing, twice)
	}
	if hookMissing > 0 || hookTwice > 0 || len(hooked) != int(final) {
		t.Errorf("webhook: %d notifications never delivered, %d twice, %d received of %d", hookMissing, hookTwice, len(hooked), final)
	}
	if afterRestart != int(last-logPosition) {
		t.Errorf("the restarted server logged %d of the %d notifications committed but not logged at the kill", afterRestart, last-logPosition)
	}
	t.Logf("killed with %d notifications committed, the webhook at %d, the log at %d; the restarted server logged the other %d; %d in all; the log had %d twice, the webhook received %d, %d twice",
		last, position, logPosition, afterRestart, final, twice, len(hooked), hookTwice)
}

// freezeBehind waits until the outbox is ahead of destination, then stops srv (SIGSTOP)
// with it behind, and returns the outbox's last Seq and the destination's position as srv
// left them: what it dies with when the caller kills it.
func freezeBehind(t *testing.T, srv *bench.Server, query outbox, destination string) (last, position int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		if last, position = outboxProgress(t, query, destination); last > position+5 {
			freeze(t, srv)
			if last, position = outboxProgress(t, query, destination); last > position {
				return last, position
			}
			_ = srv.Cmd.Process.Signal(syscall.SIGCONT)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never fell behind the outbox (%d, %d)", destination, last, position)
		}
		time.Sleep(time.Millisecond) // polling the database: the server's progress is not signalled to the test
	}
}

// waitDelivered waits until destination has been delivered the whole outbox, and returns
// its last Seq.
func waitDelivered(t *testing.T, query outbox, destination string, within time.Duration) int64 {
	t.Helper()
	for deadline := time.Now().Add(within); ; {
		final, pos := outboxProgress(t, query, destination)
		if pos == final {
			return final
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is at %d of %d after %v", destination, pos, final, within)
		}
		time.Sleep(5 * time.Millisecond) // polling the database: delivery is not signalled to the test
	}
}

// Two replicas on PostgreSQL: one delivers at a time (the "deliver" leader), so each
// notification reaches each destination (the log, a webhook created on the other replica)
// exactly once while neither dies.
func TestReplicasDeliverEachNotificationOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 server subprocesses")
	}
	dsn := postgres.TestDSN(t)
	bin := climateBinary(t)
	logs := []*bench.CappedBuffer{{Max: 64 << 20}, {Max: 64 << 20}}
	var replicas []*bench.Server
	for i := range 2 {
		replicas = append(replicas, startReplicas(t, bin, 1, []io.Writer{logs[i]}, "--database", dsn, "--before-end", "0", "--webhook-allow-private")...)
	}
	ctx := context.Background()
	hc := &http.Client{Timeout: time.Minute}
	hook := newHookReceiver(t)
	if status, body, err := (&auditClient{http: hc, base: replicas[1].URL}).do(ctx, "POST", "/v1/webhooks", map[string]any{"url": hook.url}); err != nil || status != 201 {
		t.Fatalf("create webhook: HTTP %d %v %v", status, body, err)
	}
	const nLeases = 200
	inParallel(t, 20, func(i int) error {
		c := &auditClient{http: hc, base: replicas[i%2].URL}
		status, body, err := c.do(ctx, "POST", "/v1/os-hosts", map[string]any{"name": fmt.Sprintf("r-h%d", i)})
		if err == nil && status != 201 {
			err = fmt.Errorf("create host: HTTP %d %v", status, body)
		}
		return err
	})
	start := time.Now().UTC().Add(time.Hour)
	inParallel(t, nLeases, func(i int) error {
		c := &auditClient{http: hc, base: replicas[i%2].URL}
		s := start.Add(time.Duration(i) * time.Hour)
		status, body, err := c.do(ctx, "POST", "/v1/leases", map[string]any{
			"name": fmt.Sprintf("r-%d", i), "start_date": s.Format(time.RFC3339), "end_date": s.Add(time.Hour).Format(time.RFC3339),
			"reservations": []map[string]any{{"resource_type": "physical:host", "min": 1, "max": 1}},
		})
		if err == nil && status != 201 {
			err = fmt.Errorf("create lease: HTTP %d %v", status, body)
		}
		return err
	})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	query := outbox{func(q string, dest ...any) error { return conn.QueryRow(ctx, q).Scan(dest...) }, "position"}
	for deadline := time.Now().Add(time.Minute); ; {
		last, pos := outboxProgress(t, query, "log")
		if last == nLeases && pos == last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log destination is at %d of %d (%d leases)", pos, last, nLeases)
		}
		time.Sleep(5 * time.Millisecond) // polling the database: delivery is not signalled to the test
	}
	hooked := hook.waitFor(t, nLeases, time.Minute)
	for _, r := range replicas {
		r.Stop()
	}
	for id, n := range hooked {
		if n != 1 {
			t.Errorf("the webhook received notification %s %d times", id, n)
		}
	}
	if len(hooked) != nLeases {
		t.Errorf("the webhook received %d notifications, want %d", len(hooked), nLeases)
	}
	by := delivered(logs...)
	ids, twice := map[string]bool{}, 0
	for _, m := range by {
		for id, n := range m {
			if ids[id] || n > 1 {
				twice++
			}
			ids[id] = true
		}
	}
	if len(ids) != nLeases || twice != 0 {
		t.Errorf("%d distinct notifications delivered (want %d), %d more than once (want 0)", len(ids), nLeases, twice)
	}
	t.Logf("%d notifications, delivered by the replicas %d and %d times; none twice", nLeases, len(by[0]), len(by[1]))
}

// Two replicas on PostgreSQL; the one delivering (the "deliver" leader) is SIGKILLed with
// notifications committed and not delivered. The other takes the lead over once the dead
// one's lapses (10 s) and delivers the rest to each destination: every notification
// arrives, and only a delivery the dead replica made without recording it arrives twice
// (at most one per destination). The duplicates are counted in the log.
func TestReplicaTakesOverDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 server subprocesses and kills one")
	}
	dsn := postgres.TestDSN(t)
	bin := climateBinary(t)
	logs := []*bench.CappedBuffer{{Max: 64 << 20}, {Max: 64 << 20}}
	var replicas []*bench.Server
	for i := range logs {
		replicas = append(replicas, startReplicas(t, bin, 1, []io.Writer{logs[i]}, "--database", dsn, "--before-end", "0", "--webhook-allow-private")...)
	}
	ctx := context.Background()
	hc := &http.Client{Timeout: time.Minute}
	client := func(i int) *auditClient { return &auditClient{http: hc, base: replicas[i%2].URL} }
	hook := newHookReceiver(t)
	dest := createWebhook(t, client(0), hook.url)
	const nLeases = 300
	inParallel(t, 20, func(i int) error {
		status, body, err := client(i).do(ctx, "POST", "/v1/os-hosts", map[string]any{"name": fmt.Sprintf("t-h%d", i)})
		if err == nil && status != 201 {
			err = fmt.Errorf("create host: HTTP %d %v", status, body)
		}
		return err
	})
	start := time.Now().UTC().Add(time.Hour)
	lease := func(i int) error {
		s := start.Add(time.Duration(i) * time.Hour)
		_, _, err := client(i).do(ctx, "POST", "/v1/leases", map[string]any{
			"name": fmt.Sprintf("t-%d", i), "start_date": s.Format(time.RFC3339), "end_date": s.Add(time.Hour).Format(time.RFC3339),
			"reservations": []map[string]any{{"resource_type": "physical:host", "min": 1, "max": 1}},
		})
		return err
	}
	if err := lease(0); err != nil {
		t.Fatal(err)
	}
	victim := -1 // the leader: the replica whose log shows the first notification
	for deadline := time.Now().Add(time.Minute); victim < 0; {
		for i, l := range logs {
			if notificationLine.MatchString(l.String()) {
				victim = i
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no replica logged the first notification")
		}
		time.Sleep(time.Millisecond) // polling the logs: they come through pipes
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	query := outbox{func(q string, dest ...any) error { return conn.QueryRow(ctx, q).Scan(dest...) }, "position"}

	// The webhook's receiver holds what comes next, so notifications pile up undelivered.
	hook.waitFor(t, 1, time.Minute)
	release := hook.hold()
	creating := make(chan struct{})
	go func() {
		defer close(creating)
		inParallel(t, nLeases-1, func(i int) error {
			_ = lease(i + 1) // errors are expected from the replica killed under these requests
			return nil
		})
	}()
	last, position := freezeBehind(t, replicas[victim], query, dest)
	if err := replicas[victim].Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	replicas[victim].Stop()
	release()
	<-creating
	final := waitDelivered(t, query, dest, time.Minute)
	caughtUp := time.Since(killed)
	waitDelivered(t, query, "log", time.Minute)
	hooked := hook.waitFor(t, int(final), time.Minute)
	replicas[1-victim].Stop()

	by := delivered(logs...)
	logTwice, hookTwice, missing := 0, 0, 0
	rows, err := conn.Query(ctx, `SELECT id FROM notifications ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		n := by[0][id] + by[1][id]
		if n == 0 || hooked[id] == 0 {
			missing++
		}
		if n > 1 {
			logTwice++
		}
		if hooked[id] > 1 {
			hookTwice++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The log's cursor is saved at most once a second, or once a batch of 100 is owed
	// (notify.Replayable), so the survivor may log again what the victim logged since its
	// last save: fewer than two batches.
	if missing > 0 || logTwice >= 200 || hookTwice > 1 {
		t.Errorf("%d notifications missing at a destination; delivered twice: %d to the log (fewer than two batches), %d to the webhook (at most the one in flight)", missing, logTwice, hookTwice)
	}
	t.Logf("killed the deliverer with %d notifications committed, the webhook at %d; the survivor delivered up to %d, %.1f s after the kill; duplicates after the takeover: %d to the log, %d to the webhook",
		last, position, final, caughtUp.Seconds(), logTwice, hookTwice)
}
