package power

import (
	"time"

	"climate"
)

// Timeline is what the planner knows of one host at an instant.
type Timeline struct {
	HostID string
	// State is the host's power as recorded (unknown when none is, or when a switch
	// recorded long ago never finished).
	State climate.PowerState
	// Reservable hosts are powered off when idle; others (taken out by an operator) are
	// only powered on, when a lease needs them.
	Reservable bool
	// Busy says a lease holds the host now: an allocation's window covers the instant,
	// or its lease has started and not ended yet.
	Busy bool
	// FreeAt, when Busy, is when the windows holding it end (zero: past, or unknown).
	FreeAt time.Time
	// NextStart is the start of the host's next allocation after the instant, if one
	// starts within the horizon (zero: none does).
	NextStart time.Time
	// RetryAt, when after the instant, holds a host whose last switch failed.
	RetryAt time.Time
}

// Decision is a switch to make now.
type Decision struct {
	HostID string
	On     bool
}

// Decide returns the switches due at now and the next instant a host may need one
// (zero: none before horizon, which the caller caps it by). A host is powered on when a
// lease holds it or starts on it within lead, and powered off when it is free, reservable,
// and no lease starts on it within idle (at least lead); in between it stays as it is, so
// a short gap between leases does not cycle its power.
func Decide(now time.Time, hosts []Timeline, lead, idle time.Duration) (switches []Decision, next time.Time) {
	idle = max(idle, lead)
	later := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, h := range hosts {
		soon := !h.NextStart.IsZero() && !h.NextStart.After(now.Add(lead))
		wantOn := h.Busy || soon
		wantOff := !h.Busy && h.Reservable && (h.NextStart.IsZero() || h.NextStart.After(now.Add(idle)))
		switch {
		case h.RetryAt.After(now):
			later(h.RetryAt)
		case wantOn && h.State != climate.PowerOn && h.State != climate.PowerSwitchingOn:
			switches = append(switches, Decision{HostID: h.HostID, On: true})
		case wantOff && h.State != climate.PowerOff && h.State != climate.PowerSwitchingOff:
			switches = append(switches, Decision{HostID: h.HostID, On: false})
		}
		if h.Busy {
			later(h.FreeAt) // it may be free then: the lease's end is handled at that time too
		} else if !h.NextStart.IsZero() {
			later(h.NextStart.Add(-lead))
		}
	}
	return switches, next
}
