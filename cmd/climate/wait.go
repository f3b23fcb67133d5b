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
	f.DurationVar(&w.timeout, "timeout", 0, "give up after this long (e.g. 10m; default: wait as long as it takes)")
	f.DurationVar(&w.interval, "interval", 2*time.Second, "how often to ask the server")
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

// run polls the lease until it reaches w.status, drawing a status line on stderr (redrawn
// in place on a terminal, one line per change otherwise). It polls every interval, and
// right after the lease's start or end is due, when its status should change.
func (w *waitOptions) run(cmd *cobra.Command, c *client.Client, l *api.Lease) (*api.Lease, error) {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	if w.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.timeout)
		defer cancel()
	}
	line := newStatusLine(cmd.ErrOrStderr())
	defer line.done()
	began := time.Now()
	target := slices.Index(leaseProgress, w.status)
	tick := time.NewTicker(time.Second) // redraws the elapsed time
	defer tick.Stop()
	for {
		line.show(l.Status, w.describe(l, began))
		switch at := slices.Index(leaseProgress, l.Status); {
		case l.Status == w.status:
			return l, nil
		case l.Status == "ERROR":
			return nil, fmt.Errorf("lease %s went to ERROR", l.Name)
		case at > target:
			return nil, fmt.Errorf("lease %s is %s: it can no longer become %s", l.Name, l.Status, w.status)
		}
		poll := time.NewTimer(w.nextPoll(l, time.Now()))
	wait:
		for {
			select {
			case <-ctx.Done():
				poll.Stop()
				if cmd.Context().Err() == nil && w.timeout > 0 && time.Since(began) >= w.timeout {
					return nil, fmt.Errorf("lease %s is still %s after %s (--timeout)", l.Name, l.Status, w.timeout)
				}
				return nil, fmt.Errorf("stopped waiting: lease %s is %s", l.Name, l.Status)
			case <-tick.C:
				line.show(l.Status, w.describe(l, began))
			case <-poll.C:
				break wait
			}
		}
		next, err := c.GetLease(ctx, l.ID)
		if client.IsNotFound(err) {
			return nil, fmt.Errorf("lease %s was deleted", l.Name)
		}
		if err != nil {
			if ctx.Err() != nil {
				continue // reported by the select above
			}
			return nil, err
		}
		l = next
	}
}

// describe is the status line: elapsed time, current status and time to start or end.
func (w *waitOptions) describe(l *api.Lease, began time.Time) string {
	now := time.Now()
	return fmt.Sprintf("Waiting for lease %s to be %s: %s, %s (elapsed %s)", l.Name, w.status, l.Status, countdown(l, now), roundDuration(now.Sub(began)))
}

// nextPoll is the interval, shortened to just after the lease's next start or end.
func (w *waitOptions) nextPoll(l *api.Lease, now time.Time) time.Duration {
	d := w.interval
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
