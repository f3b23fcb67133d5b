// Package clock provides the real clock and a fake one that tests advance by hand.
package clock

import (
	"sort"
	"sync"
	"time"

	"climate"
)

// Real is the system clock, in UTC.
type Real struct{}

// Now returns the current UTC time.
func (Real) Now() time.Time { return time.Now().UTC() }

// NewTimer returns a real timer.
func (Real) NewTimer(d time.Duration) climate.Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Fake is a clock that moves only when told to. Timers fire when Advance or Set passes
// their deadline. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	waiters []waiter
}

// waiter is a TimerAt call waiting for a timer due at at.
type waiter struct {
	at time.Time
	c  chan struct{}
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t.UTC()} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when the fake time reaches now+d.
func (f *Fake) NewTimer(d time.Duration) climate.Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{clock: f, at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
		t.fired = true
	} else {
		f.timers = append(f.timers, t)
	}
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.at.Equal(t.at) {
			close(w.c)
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
	return t
}

// Advance moves the fake time forward by d and fires the timers it passes.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the fake time to t (never backwards) and fires the timers it passes.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.now = t.UTC()
	}
	sort.Slice(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
	kept := f.timers[:0]
	for _, tm := range f.timers {
		if !tm.at.After(f.now) {
			tm.fired = true
			tm.c <- f.now
		} else {
			kept = append(kept, tm)
		}
	}
	f.timers = kept
}

// TimerAt returns a channel closed once a timer due at at is pending (at once if one is),
// so a test can wait until a sleeper has armed its timer for that instant before moving
// time; timers armed for other instants (another goroutine's) do not count.
func (f *Fake) TimerAt(at time.Time) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan struct{})
	for _, t := range f.timers {
		if t.at.Equal(at) {
			close(c)
			return c
		}
	}
	f.waiters = append(f.waiters, waiter{at: at, c: c})
	return c
}

type fakeTimer struct {
	clock *Fake
	at    time.Time
	c     chan time.Time
	fired bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.fired {
		return false
	}
	for i, tm := range f.timers {
		if tm == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			break
		}
	}
	t.fired = true
	return true
}
