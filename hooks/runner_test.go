package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"climate/clock"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var vars = Vars{Event: "start_lease", LeaseID: "l1", LeaseName: "train", ProjectID: "p1", ReservationID: "r1",
	HostID: "7", HostName: "compute-7", Start: time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC), End: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)}

// noWait is a runner that retries at once.
func noWait(attempts int) *Runner {
	return &Runner{Attempts: attempts, Backoff: -1, Logger: quiet}
}

func sh(script string, args ...string) Hook {
	return Hook{Argv: append([]string{"sh", "-c", script, "hook"}, args...)}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExecSeesTheEventInItsEnvironmentOnly(t *testing.T) {
	t.Setenv("CLIMATE_DATABASE", "postgres://climate:s3cret@db/climate") // the server's own setting
	t.Setenv("HOOK_TEST_INHERITED", "yes")
	out := filepath.Join(t.TempDir(), "env")
	if err := noWait(1).Run(context.Background(), sh(`env | grep -E '^(CLIMATE_|HOOK_TEST_)' | sort > "$1"`, out), vars); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(readFile(t, out)), "\n")
	want := append(vars.Env(), "HOOK_TEST_INHERITED=yes")
	slices.Sort(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("environment:\n got %q\nwant %q", got, want)
	}
}

func TestExecNonZeroExitFailsWithTheLastStderrLine(t *testing.T) {
	err := noWait(3).Run(context.Background(),
		sh(`echo progress; echo "first problem" >&2; echo "BMC of $CLIMATE_HOST_NAME unreachable" >&2; echo; exit 3`), vars)
	if err == nil {
		t.Fatal("a command exiting 3 succeeded")
	}
	want := "command sh: exit status 3: BMC of compute-7 unreachable (3 attempts)"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	// Without stderr, the last line of stdout; without either, the exit status alone.
	err = noWait(1).Run(context.Background(), sh(`echo "no such node"; exit 1`), vars)
	if err == nil || !strings.HasSuffix(err.Error(), "exit status 1: no such node (1 attempts)") {
		t.Errorf("stdout only: %v", err)
	}
	err = noWait(1).Run(context.Background(), sh(`exit 2`), vars)
	if err == nil || err.Error() != "command sh: exit status 2 (1 attempts)" {
		t.Errorf("no output: %v", err)
	}
	err = noWait(1).Run(context.Background(), Hook{Argv: []string{filepath.Join(t.TempDir(), "missing")}}, vars)
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing program: %v", err)
	}
}

func TestExecRetriesUntilAnAttemptSucceeds(t *testing.T) {
	dir := t.TempDir()
	// Fails on its first two runs, succeeds on the third.
	script := `n=$(cat "$1" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$1"; [ $n -ge 3 ] || { echo "attempt $n failed" >&2; exit 1; }`
	count := filepath.Join(dir, "ok")
	if err := noWait(3).Run(context.Background(), sh(script, count), vars); err != nil {
		t.Fatalf("third attempt should succeed: %v", err)
	}
	if got := strings.TrimSpace(readFile(t, count)); got != "3" {
		t.Errorf("ran %s times, want 3", got)
	}
	count = filepath.Join(dir, "fail")
	err := noWait(2).Run(context.Background(), sh(script, count), vars)
	if err == nil || !strings.Contains(err.Error(), "attempt 2 failed (2 attempts)") {
		t.Errorf("two attempts: %v; want the second's message", err)
	}
	if got := strings.TrimSpace(readFile(t, count)); got != "2" {
		t.Errorf("ran %s times, want 2 (bounded)", got)
	}
}

func TestRetriesWaitDoublingBackoffOnTheClock(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	r := &Runner{Attempts: 3, Backoff: time.Minute, Clock: clk, Logger: quiet}
	count := filepath.Join(t.TempDir(), "n")
	done := make(chan error, 1)
	go func() {
		done <- r.Run(context.Background(), sh(`echo x >> "$1"; exit 1`, count), vars)
	}()
	start := clk.Now()
	for _, at := range []time.Duration{time.Minute, 3 * time.Minute} { // 1 min, then 2 more
		select {
		case <-clk.TimerAt(start.Add(at)):
		case err := <-done:
			t.Fatalf("Run returned before waiting until +%s: %v", at, err)
		case <-time.After(10 * time.Second): // a safety net, not a wait
			t.Fatalf("no retry timer for +%s", at)
		}
		clk.Set(start.Add(at))
	}
	if err := <-done; err == nil {
		t.Fatal("a failing command succeeded")
	}
	if got := strings.Count(readFile(t, count), "x"); got != 3 {
		t.Errorf("ran %d times, want 3", got)
	}
}

func TestExecStopsWhenTheContextIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := filepath.Join(t.TempDir(), "started")
	done := make(chan error, 1)
	go func() { done <- noWait(3).Run(ctx, sh(`touch "$1"; exec sleep 60`, started), vars) }()
	for { // wait until the command runs: a poll on a file the command writes, nothing else signals it
		if _, err := os.Stat(started); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	err := <-done
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want the cancellation (no more attempts)", err)
	}
}

func TestWebhookPostsTheEvent(t *testing.T) {
	var mu sync.Mutex
	var got []payload
	var headers []http.Header
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if r.Method != http.MethodPost || r.URL.Path != "/hook" {
			http.Error(w, "wrong route", http.StatusNotFound)
			return
		}
		var p payload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got = append(got, p)
		headers = append(headers, r.Header.Clone())
		if calls < 2 {
			http.Error(w, "busy\nsecond line", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	if err := noWait(3).Run(context.Background(), Hook{URL: srv.URL + "/hook?token=s3cret"}, vars); err != nil {
		t.Fatalf("second attempt answers 204: %v", err)
	}
	want := payload{Event: "start_lease", ActionID: vars.ActionID(), LeaseID: "l1", LeaseName: "train", ProjectID: "p1",
		ReservationID: "r1", HostID: "7", HostName: "compute-7", Start: "2030-01-01T10:00:00Z", End: "2030-01-01T12:00:00Z"}
	if len(got) != 2 || got[0] != want || got[1] != want {
		t.Errorf("bodies %+v, want two of %+v", got, want)
	}
	for _, h := range headers {
		if h.Get("Content-Type") != "application/json" || h.Get("Idempotency-Key") != vars.ActionID() {
			t.Errorf("headers %v: want JSON and the action id as Idempotency-Key", h)
		}
	}
}

func TestWebhookFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fail":
			http.Error(w, "inventory says no", http.StatusConflict)
		case "/redirect":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case "/slow":
			io.Copy(io.Discard, r.Body) // the server notices the client left only once the body is read
			<-r.Context().Done()
		}
	}))
	defer srv.Close()
	for _, tc := range []struct{ path, want string }{
		{"/fail", "webhook " + srv.URL + "/fail: HTTP 409 Conflict: inventory says no (2 attempts)"},
		{"/redirect", "webhook " + srv.URL + "/redirect: HTTP 302 Found (2 attempts)"},
		{"/slow", "webhook " + srv.URL + "/slow: timed out after 100ms (2 attempts)"},
	} {
		r := &Runner{Attempts: 2, Backoff: -1, Timeout: 100 * time.Millisecond, Logger: quiet}
		err := r.Run(context.Background(), Hook{URL: srv.URL + tc.path + "?token=s3cret"}, vars)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.path, err, tc.want)
		}
	}
	// A connection refused names no secret either.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	err := noWait(1).Run(context.Background(), Hook{URL: closed.URL + "/x?token=s3cret"}, vars)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("refused: %v", err)
	}
}
