package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"climate"
	"climate/clock"
)

// Defaults of a Runner's bounds.
const (
	DefaultTimeout  = time.Minute
	DefaultAttempts = 3
	DefaultBackoff  = 2 * time.Second
	// DefaultOutputLimit is how much of each output stream of a command is kept (its end).
	DefaultOutputLimit = 64 << 10
	// maxMessage bounds the part of a hook's output quoted in an error message.
	maxMessage = 512
)

// Runner runs hooks within bounds: a timeout per attempt, a number of attempts, and a
// wait before each retry that doubles. Its zero value uses the defaults.
type Runner struct {
	Timeout  time.Duration // per attempt (DefaultTimeout)
	Attempts int           // in all, at least 1 (DefaultAttempts)
	// Backoff is the wait before the second attempt, doubled before each later one
	// (DefaultBackoff); negative means no wait.
	Backoff time.Duration
	// OutputLimit is how many bytes of a command's stdout and of its stderr are kept.
	OutputLimit int
	Clock       climate.Clock // for the waits between attempts (real when nil)
	Client      *http.Client  // for webhooks (one that follows no redirects when nil)
	Logger      *slog.Logger

	once sync.Once
}

func (r *Runner) init() {
	r.once.Do(func() {
		if r.Timeout <= 0 {
			r.Timeout = DefaultTimeout
		}
		if r.Attempts <= 0 {
			r.Attempts = DefaultAttempts
		}
		if r.Backoff == 0 {
			r.Backoff = DefaultBackoff
		}
		if r.OutputLimit <= 0 {
			r.OutputLimit = DefaultOutputLimit
		}
		if r.Clock == nil {
			r.Clock = clock.Real{}
		}
		if r.Client == nil {
			// A redirect would turn the POST into a GET: a 3xx is an answer, and a failure.
			r.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		}
		if r.Logger == nil {
			r.Logger = slog.Default()
		}
	})
}

// Run runs h for v until an attempt succeeds or the attempts are spent, and returns the
// last attempt's error, which says what failed and how often it was tried.
func (r *Runner) Run(ctx context.Context, h Hook, v Vars) error {
	r.init()
	wait := r.Backoff
	var err error
	for attempt := 1; attempt <= r.Attempts; attempt++ {
		if attempt > 1 {
			if !r.sleep(ctx, wait) {
				break
			}
			wait *= 2
		}
		start := time.Now()
		err = r.attempt(ctx, h, v)
		log := r.Logger.With("hook", h.String(), "event", v.Event, "lease", v.LeaseID, "host", v.HostName, "attempt", attempt)
		if err == nil {
			log.Debug("hook done", "took", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		log.Warn("hook failed", "err", err, "attempts", r.Attempts)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w (stopped: %w)", h, err, context.Cause(ctx))
	}
	return fmt.Errorf("%s: %w (%d attempts)", h, err, r.Attempts)
}

// sleep waits d (nothing when negative), or until ctx is done (false).
func (r *Runner) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := r.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// attempt runs h once, within the timeout.
func (r *Runner) attempt(ctx context.Context, h Hook, v Vars) error {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	var err error
	switch {
	case h.URL != "":
		err = r.post(ctx, h.URL, v)
	case len(h.Argv) > 0:
		err = r.exec(ctx, h.Argv, v)
	default:
		return errors.New("no command or URL")
	}
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %s", r.Timeout)
	}
	return err
}

// exec runs a command in a process group of its own, killed whole when ctx is done.
func (r *Runner) exec(ctx context.Context, argv []string, v Vars) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(environ(), v.Env()...)
	stdout, stderr := &tail{max: r.OutputLimit}, &tail{max: r.OutputLimit}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	killGroup(cmd)
	// A background child still holding the output pipes does not keep Run waiting.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // the command itself exited 0
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		return nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		msg := stderr.lastLine()
		if msg == "" {
			msg = stdout.lastLine()
		}
		if msg == "" {
			return errors.New(exit.String())
		}
		return fmt.Errorf("%s: %s", exit, msg)
	}
	return err
}

// environ is the server's environment less its own CLIMATE_… settings (a database URL
// may hold a password): a command sees only the CLIMATE_… variables Vars.Env sets.
func environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLIMATE_") {
			out = append(out, kv)
		}
	}
	return out
}

// post sends v as JSON to a webhook; a 2xx answer is success.
func (r *Runner) post(ctx context.Context, u string, v Vars) error {
	body, err := json.Marshal(v.payload())
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("request: %w", unwrapURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "climate-hooks")
	req.Header.Set("Idempotency-Key", v.ActionID())
	if v.Token != "" {
		req.Header.Set("X-Auth-Token", v.Token)
	}
	resp, err := r.Client.Do(req)
	if err != nil {
		return unwrapURL(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxMessage))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	msg := firstLine(string(answer))
	if msg == "" {
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	return fmt.Errorf("HTTP %s: %s", resp.Status, msg)
}

// unwrapURL drops the URL net/http puts in its errors: it may carry a secret.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToUpper(ue.Op), ue.Err)
	}
	return err
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return clip(strings.TrimSpace(s))
}

func clip(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) > maxMessage {
		s = strings.ToValidUTF8(s[:maxMessage], "") + "…"
	}
	return s
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// lastLine returns the last non-blank line kept.
func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	s := strings.TrimRight(string(b), " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return clip(strings.TrimSpace(s))
}
