package power

import (
	"reflect"
	"testing"
	"time"

	"climate"
)

func TestDecide(t *testing.T) {
	now := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	lead, idle := 10*time.Minute, 30*time.Minute
	on, off, unknown := climate.PowerOn, climate.PowerOff, climate.PowerUnknown
	for _, tc := range []struct {
		name string
		host Timeline
		want []Decision // for host "h"
		next time.Time
	}{
		{"idle, nothing ahead: off", Timeline{State: on, Reservable: true}, []Decision{{"h", false}}, time.Time{}},
		{"unknown and idle: off", Timeline{State: unknown, Reservable: true}, []Decision{{"h", false}}, time.Time{}},
		{"already off", Timeline{State: off, Reservable: true}, nil, time.Time{}},
		{"being powered off", Timeline{State: climate.PowerSwitchingOff, Reservable: true}, nil, time.Time{}},
		{"not reservable: left on", Timeline{State: on}, nil, time.Time{}},
		{"in use: never off", Timeline{State: on, Reservable: true, Busy: true, FreeAt: at(time.Hour)}, nil, at(time.Hour)},
		{"in use past its window (lease not ended yet)", Timeline{State: on, Reservable: true, Busy: true}, nil, time.Time{}},
		{"in use and off: on", Timeline{State: off, Reservable: true, Busy: true, FreeAt: at(time.Hour)}, []Decision{{"h", true}}, at(time.Hour)},
		{"lease within lead: on", Timeline{State: off, Reservable: true, NextStart: at(lead)}, []Decision{{"h", true}}, time.Time{}},
		{"lease within lead, not reservable: on", Timeline{State: off, NextStart: at(5 * time.Minute)}, []Decision{{"h", true}}, time.Time{}},
		{"lease within lead, already powering on", Timeline{State: climate.PowerSwitchingOn, Reservable: true, NextStart: at(time.Minute)}, nil, time.Time{}},
		{"off, lease beyond lead: wait for its lead", Timeline{State: off, Reservable: true, NextStart: at(time.Hour)}, nil, at(50 * time.Minute)},
		{"on, lease within idle: stays on", Timeline{State: on, Reservable: true, NextStart: at(20 * time.Minute)}, nil, at(10 * time.Minute)},
		{"off, lease within idle: stays off until its lead", Timeline{State: off, Reservable: true, NextStart: at(20 * time.Minute)}, nil, at(10 * time.Minute)},
		{"on, lease beyond idle: off", Timeline{State: on, Reservable: true, NextStart: at(31 * time.Minute)}, []Decision{{"h", false}}, at(21 * time.Minute)},
		{"failed lately: left until its retry", Timeline{State: unknown, Reservable: true, RetryAt: at(time.Minute)}, nil, at(time.Minute)},
		{"failed, retry due", Timeline{State: unknown, Reservable: true, RetryAt: now}, []Decision{{"h", false}}, time.Time{}},
	} {
		tc.host.HostID = "h"
		got, next := Decide(now, []Timeline{tc.host}, lead, idle)
		if !reflect.DeepEqual(got, tc.want) || !next.Equal(tc.next) {
			t.Errorf("%s: %v, next %v; want %v, next %v", tc.name, got, next, tc.want, tc.next)
		}
	}
	// Idle below lead counts as lead: a host is never off within a lease's lead.
	got, _ := Decide(now, []Timeline{{HostID: "h", State: on, Reservable: true, NextStart: at(8 * time.Minute)}}, lead, time.Minute)
	if got != nil {
		t.Errorf("idle < lead: %v, want the host left on", got)
	}
	// The earliest instant over all hosts.
	_, next := Decide(now, []Timeline{
		{HostID: "a", State: off, Reservable: true, NextStart: at(2 * time.Hour)},
		{HostID: "b", State: on, Busy: true, FreeAt: at(40 * time.Minute)},
		{HostID: "c", State: off, Reservable: true, NextStart: at(time.Hour)},
	}, lead, idle)
	if !next.Equal(at(40 * time.Minute)) {
		t.Errorf("next %v, want b's end", next)
	}
}
