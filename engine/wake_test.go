package engine

import (
	"testing"
	"time"
)

// WakeFor wakes an engine unless it sleeps until no later than the event is due: its
// timer comes first. Unknown times, an engine sleeping until woken and an engine at work
// (whose next look at the store might have missed the event) are always woken.
func TestWakeForLetsAnEngineSleepUntilItsTimer(t *testing.T) {
	until := time.Date(2031, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		sleeping bool
		until    time.Time
		due      time.Time
		woken    bool
	}{
		{"due after the timer", true, until, until.Add(time.Hour), false},
		{"due at the timer", true, until, until, false},
		{"due before the timer", true, until, until.Add(-time.Second), true},
		{"due unknown", true, until, time.Time{}, true},
		{"asleep until woken", true, time.Time{}, until.Add(time.Hour), true},
		{"at work", false, until, until.Add(time.Hour), true},
	} {
		e := New(nil, nil, Config{})
		e.sleeping, e.until = tc.sleeping, tc.until
		e.WakeFor(tc.due)
		if got := len(e.wake) == 1; got != tc.woken {
			t.Errorf("%s: woken %v, want %v", tc.name, got, tc.woken)
		}
	}
}
