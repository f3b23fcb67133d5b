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
	"sync"
	"syscall"
	"testing"
	"time"

	"climate"
	"climate/bench"
	"climate/sqlite"
)

// One `climate serve` on SQLite fires the starts of 150 leases of 3 s each, all due at
// one instant, and is SIGKILLed just after they are due while it holds claimed starts; it
// is restarted at once on the same data directory. The new process holds the engine lock,
// so it knows its predecessor is dead and takes its claims back at once: every lease starts
// within 5 s of its start time (on the 2-minute claims of old, the killed process's
// starts waited 2 minutes), every lease ends TERMINATED, and no event is handled twice
// (the "event handled" debug lines of both processes name each event at most once).
func TestKilledServerRestartedStartsLeasesOnTime(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills a server subprocess")
	}
	bin := climateBinary(t)
	dir := t.TempDir()
	const (
		nLeases  = 150
		length   = 3 * time.Second
		maxLate  = 5 * time.Second
		deadline = 30 * time.Second
	)
	logs := []*bench.CappedBuffer{{Max: 64 << 20}, {Max: 64 << 20}}
	args := []string{"--data-dir", dir, "--log-level", "debug", "--before-end", "0"}
	first := startReplicas(t, bin, 1, []io.Writer{logs[0]}, args...)[0]

	ctx := context.Background()
	c := &auditClient{http: &http.Client{Timeout: time.Minute}, base: first.URL}
	inParallel(t, nLeases, func(i int) error {
		status, body, err := c.do(ctx, "POST", "/v1/os-hosts", map[string]any{"name": fmt.Sprintf("crash-h%d", i)})
		if err == nil && status != 201 {
			err = fmt.Errorf("create host: HTTP %d %v", status, body)
		}
		return err
	})
	t0 := time.Now().UTC().Add(10 * time.Second) // room for creating 150 leases on a loaded CI machine
	inParallel(t, nLeases, func(i int) error {
		status, body, err := c.do(ctx, "POST", "/v1/leases", map[string]any{
			"name": fmt.Sprintf("crash-%d", i), "start_date": t0.Format(time.RFC3339Nano), "end_date": t0.Add(length).Format(time.RFC3339Nano),
			"reservations": []map[string]any{{"resource_type": "physical:host", "min": 1, "max": 1,
				"hypervisor_properties": "", "resource_properties": ""}},
		})
		if err == nil && status != 201 {
			err = fmt.Errorf("create lease: HTTP %d %v", status, body)
		}
		return err
	})
	if now := time.Now(); now.After(t0) {
		t.Fatalf("creating the leases took until %s after their start: too slow for this test", now.Sub(t0))
	}

	st, err := sqlite.Open(ctx, filepath.Join(dir, "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The progress probe is one cheap query, so polling steals little from the server.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "climate.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	starts := func() (done, held int) {
		t.Helper()
		err := db.QueryRow(`SELECT count(*) FILTER (WHERE status = 'DONE'), count(*) FILTER (WHERE status = 'IN_PROGRESS')
			FROM events WHERE event_type = 'start_lease'`).Scan(&done, &held)
		if err != nil {
			t.Fatal(err)
		}
		return done, held
	}

	// Once some starts are done and others claimed, freeze the process (so the claims seen
	// are the ones it dies with), then kill it.
	for stop := time.Now().Add(deadline); ; {
		done, held := starts()
		if done == nLeases || time.Now().After(stop) {
			t.Fatalf("%d/%d starts done and the server never held a claim meanwhile", done, nLeases)
		}
		if done > 0 && held > 0 {
			freeze(t, first)
			if _, held = starts(); held > 0 {
				break
			}
			_ = first.Cmd.Process.Signal(syscall.SIGCONT) // it finished them meanwhile: go on
		}
		time.Sleep(time.Millisecond) // polling the database: the server's progress is not signalled to the test
	}
	var orphans []climate.Event
	for _, l := range listLeases(t, st) {
		if e := l.Event(climate.EventStartLease); e.Status == climate.EventInProgress {
			orphans = append(orphans, *e)
		}
	}
	if err := first.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	first.Stop() // reaps it
	second := startReplicas(t, bin, 1, []io.Writer{logs[1]}, args...)[0]
	restarted := time.Now()

	var leases []climate.Lease
	for stop := time.Now().Add(deadline); ; {
		leases = listLeases(t, st)
		pending := 0
		for _, l := range leases {
			for _, e := range l.Events {
				if e.Status == climate.EventUndone || e.Status == climate.EventInProgress {
					pending++
				}
			}
		}
		if pending == 0 {
			break
		}
		if time.Now().After(stop) {
			t.Fatalf("%d events still UNDONE or IN_PROGRESS %s after the restart (the killed process held %d claims)", pending, deadline, len(orphans))
		}
		time.Sleep(20 * time.Millisecond) // polling the database, as above
	}
	second.Stop()

	var events []climate.Event
	var late, orphanLate, endLate []time.Duration
	isOrphan := map[string]bool{}
	for _, e := range orphans {
		isOrphan[e.ID] = true
	}
	for _, l := range leases {
		if l.Status != climate.LeaseTerminated {
			t.Errorf("lease %s is %s, want TERMINATED", l.Name, l.Status)
		}
		for _, e := range l.Events {
			events = append(events, e)
			if e.Status != climate.EventDone {
				t.Errorf("lease %s: %s is %s, want DONE", l.Name, e.Type, e.Status)
			}
			d := e.UpdatedAt.Sub(e.Time)
			switch {
			case e.Type == climate.EventEndLease:
				endLate = append(endLate, d)
			case isOrphan[e.ID]:
				orphanLate = append(orphanLate, d)
				late = append(late, d)
			default:
				late = append(late, d)
			}
			if e.Type == climate.EventStartLease && d > maxLate {
				t.Errorf("lease %s started %s after its start time; want within %s", l.Name, d, maxLate)
			}
		}
	}
	count, by, unlogged := checkHandledOnce(t, logs, events, killed)
	for _, e := range orphans {
		if count[e.ID] != 1 || by[e.ID] != 1 {
			t.Errorf("orphaned start %s: handled %d times, last by process %d; want once, by the restarted one", e.ID, count[e.ID], by[e.ID])
		}
	}
	// The restarted process took the claims back at once rather than waiting for them to
	// expire (which would also start the leases within 5 s, with claims of 3 s).
	tookBack := regexp.MustCompile(`msg="event engine: took back events a previous run held when it stopped" events=(\d+)`).FindStringSubmatch(logs[1].String())
	if tookBack == nil || tookBack[1] != fmt.Sprint(len(orphans)) {
		t.Errorf("restarted process: took back %v; want the %d claimed starts", tookBack, len(orphans))
	}
	unstarted := len(regexp.MustCompile(`msg="lease ended without starting`).FindAllString(logs[1].String(), -1))
	t.Logf("%d leases of %s due at one instant; killed %d ms after it holding %d claimed starts; restarted and listening %d ms after the kill",
		nLeases, length, killed.Sub(t0).Milliseconds(), len(orphans), restarted.Sub(killed).Milliseconds())
	t.Logf("start lateness: all %s, orphaned %s; end lateness %s; %d leases ended without starting; %d events finished by the killed process unlogged; handled twice: 0 unless reported above",
		spread(late), spread(orphanLate), spread(endLate), unstarted, unlogged)
}

// freeze stops srv (SIGSTOP) and returns once it has stopped: kill(2) returns before the
// stop takes effect, so a commit may still land meanwhile; the kernel reports the child
// stopped when all its threads are.
func freeze(t *testing.T, srv *bench.Server) {
	t.Helper()
	if err := srv.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(srv.Cmd.Process.Pid, &ws, syscall.WUNTRACED, nil); err != nil || !ws.Stopped() {
		t.Fatalf("waiting for the server to stop: %v (status %v)", err, ws)
	}
}

// inParallel runs fn(i) for i < n on 4 workers and fails the test on the first error.
func inParallel(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				if err := fn(i); err != nil {
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

func listLeases(t *testing.T, st climate.Store) []climate.Lease {
	t.Helper()
	var leases []climate.Lease
	err := st.View(context.Background(), func(tx climate.Tx) (err error) {
		leases, err = tx.ListLeases(context.Background(), climate.LeaseFilter{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return leases
}
