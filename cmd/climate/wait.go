package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"climate/http/api"
	"climate/http/client"
)

// leaseProgress is the order a lease's statuses come in; a lease waiting for one status
// can no longer reach it once it is past it.
var leaseProgress = []string{"PENDING", "STARTING", "ACTIVE", "TERMINATING", "TERMINATED"}

// waitOptions are the flags of lease wait and lease create --wait.
type waitOptions struct {
	enabled  bool
	status   string
	timeout  time.Duration
	interval time.Duration
}

func (w *waitOptions) addFlags(cmd *cobra.Command, waitUsage string) {
	f := cmd.Flags()
	if waitUsage != "" {
		f.BoolVar(&w.enabled, "wait", false, waitUsage)
	}
	f.StringVar(&w.status, "status", "ACTIVE", "status to wait for: "+strings.Join(leaseProgress, ", "))
	_ = cmd.RegisterFlagCompletionFunc("status", completeStatuses(leaseProgress))
	f.DurationVar(&w.timeout, "timeout", 0, "give up after this long (e.g. 10m; default: wait as long as it takes)")
	f.DurationVar(&w.interval, "interval", 2*time.Second, "with a server that cannot push changes (no /v1/events/stream): the longest time between two polls")
}

func (w *waitOptions) check() error {
	w.status = strings.ToUpper(w.status)
	if !slices.Contains(leaseProgress, w.status) {
		return fmt.Errorf("--status %q: want one of %s", w.status, strings.Join(leaseProgress, ", "))
	}
	if w.interval <= 0 {
		return fmt.Errorf("--interval %s: must be positive", w.interval)
	}
	if w.timeout < 0 {
		return fmt.Errorf("--timeout %s: must not be negative", w.timeout)
	}
	return nil
}

// run waits until the lease reaches w.status, drawing a status line on stderr (redrawn
// in place on a terminal, one line per change otherwise). The server pushes the lease's
// changes (GET /v1/events/stream): the stream is opened first, then the lease is read, so
// a change made before the stream opened is in what is read and every later one comes
// through the stream. A server without the stream is polled instead: soon, then less and
// less often up to every --interval, and right after the lease's start or end is due.
func (w *waitOptions) run(cmd *cobra.Command, c *client.Client, l *api.Lease) (*api.Lease, error) {
	// began is read before the timeout's deadline is set, so a wait the deadline ended
	// has always lasted the timeout (stopped tells the two apart by it).
	began := time.Now()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	if w.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.timeout)
		defer cancel()
	}
	line := newStatusLine(cmd.ErrOrStderr())
	defer line.done()
	stopped := func() error {
		if cmd.Context().Err() == nil && w.timeout > 0 && time.Since(began) >= w.timeout {
			return fmt.Errorf("lease %s is still %s after %s (--timeout)", l.Name, l.Status, w.timeout)
		}
		return fmt.Errorf("stopped waiting: lease %s is %s", l.Name, l.Status)
	}
	target := slices.Index(leaseProgress, w.status)

	var events <-chan api.Notification // nil: poll
	poll := time.Duration(0)           // until the next poll; 0: at once
	st, err := c.Watch(ctx, client.WatchQuery{LeaseID: l.ID})
	switch {
	case err == nil:
		defer st.Close()
		events = st.Notifications()
	case ctx.Err() != nil:
		return nil, stopped()
	case !streamUnsupported(err):
		return nil, err
	}
	backoff := firstPoll
	failure := ""                       // the failed action's message, when the lease went to ERROR
	tick := time.NewTicker(time.Second) // redraws the elapsed time
	defer tick.Stop()
	for {
		if poll == 0 { // read the lease: at first, and when polling
			next, err := c.GetLease(ctx, l.ID)
			switch {
			case client.IsNotFound(err):
				return nil, fmt.Errorf("lease %s was deleted", l.Name)
			case err != nil && ctx.Err() != nil:
				return nil, stopped()
			case err != nil:
				return nil, err
			}
			l = next
			if events == nil {
				poll = w.nextPoll(l, time.Now(), backoff)
				backoff = min(2*backoff, w.interval)
			} else {
				poll = -1 // the stream tells
			}
		}
		line.show(l.Status, w.describe(l, began))
		switch at := slices.Index(leaseProgress, l.Status); {
		case l.Status == w.status:
			return l, nil
		case l.Status == "ERROR" && failure != "":
			return nil, fmt.Errorf("lease %s went to ERROR: %s", l.Name, failure)
		case l.Status == "ERROR":
			return nil, fmt.Errorf("lease %s went to ERROR", l.Name)
		case l.Status == "FAILED" || l.Status == "TIMEDOUT":
			return nil, fmt.Errorf("lease %s is %s: it never fitted before its retry_until", l.Name, l.Status)
		case at > target:
			return nil, fmt.Errorf("lease %s is %s: it can no longer become %s", l.Name, l.Status, w.status)
		}
		var timer <-chan time.Time
		var t *time.Timer
		if poll > 0 {
			t = time.NewTimer(poll)
			timer = t.C
		}
		stopTimer := func() {
			if t != nil {
				t.Stop()
			}
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				stopTimer()
				return nil, stopped()
			case <-tick.C:
				line.show(l.Status, w.describe(l, began))
			case <-timer:
				poll = 0
				break wait
			case n, ok := <-events:
				if !ok { // the stream ended for good: poll from now on
					if ctx.Err() != nil {
						return nil, stopped()
					}
					events, poll = nil, 0
					break wait
				}
				if n.EventType == "lease.delete" {
					return nil, fmt.Errorf("lease %s was deleted", l.Name)
				}
				next, err := n.Lease()
				if err != nil {
					return nil, err
				}
				l, failure = next, n.Error
				break wait
			}
		}
		stopTimer()
	}
}

// firstPoll is the first interval when polling: a lease created to start now is started
// within milliseconds, so the first polls come soon and back off to --interval.
const firstPoll = 250 * time.Millisecond

// describe is the status line: elapsed time, current status and time to start or end.
func (w *waitOptions) describe(l *api.Lease, began time.Time) string {
	now := time.Now()
	return fmt.Sprintf("Waiting for lease %s to be %s: %s, %s (elapsed %s)", l.Name, w.status, l.Status, countdown(l, now), roundDuration(now.Sub(began)))
}

// nextPoll is d, shortened to just after the lease's next start or end.
func (w *waitOptions) nextPoll(l *api.Lease, now time.Time, d time.Duration) time.Duration {
	for _, s := range []string{l.StartDate, l.EndDate} {
		if t, err := api.ParseTime(s); err == nil && t.After(now) && t.Sub(now)+50*time.Millisecond < d {
			d = t.Sub(now) + 50*time.Millisecond
		}
	}
	return d
}

// countdown says how long until the lease starts or ends.
func countdown(l *api.Lease, now time.Time) string {
	if t, err := api.ParseTime(l.StartDate); err == nil && t.After(now) {
		return "starts in " + roundDuration(t.Sub(now))
	}
	if t, err := api.ParseTime(l.EndDate); err == nil && t.After(now) {
		return "ends in " + roundDuration(t.Sub(now))
	}
	return "past its end"
}

func roundDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// statusLine draws a one-line status: in place on a terminal, else a line per change.
type statusLine struct {
	w    io.Writer
	tty  bool
	last string
}

func newStatusLine(w io.Writer) *statusLine {
	f, ok := w.(*os.File)
	tty := false
	if ok {
		if info, err := f.Stat(); err == nil {
			tty = info.Mode()&os.ModeCharDevice != 0
		}
	}
	return &statusLine{w: w, tty: tty}
}

func (s *statusLine) show(status, text string) {
	if s.tty {
		fmt.Fprintf(s.w, "\r\033[K%s", text)
		s.last = text
		return
	}
	if status != s.last { // without a terminal, a line per status change
		fmt.Fprintln(s.w, text)
		s.last = status
	}
}

func (s *statusLine) done() {
	if s.tty && s.last != "" {
		fmt.Fprintln(s.w)
	}
}
