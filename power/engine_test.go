package power

import (
	"context"
	"reflect"
	"testing"
	"time"

	"climate"
	"climate/engine"
	"climate/hooks"
)

// A lease whose host is off when it starts (its lead passed while nothing planned, or the
// lease was created to start at once) powers the host on as part of its start: the lease is
// ACTIVE, not ERROR. If the power-on fails, the lease is ERROR with its message.
func TestLeaseStartPowersOnAnOffHost(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	if calls, _ := w.round(); len(calls) != 2 {
		t.Fatalf("calls %v, want both hosts off", calls)
	}
	w.sw.fail["n2"] = true
	ok := w.lease(t0, t0.Add(time.Hour), "n1")
	bad := w.lease(t0, t0.Add(time.Hour), "n2")
	reports := make(chan engine.Report, 8)
	acts := &hooks.Actions{Store: w.store, Runner: &hooks.Runner{Logger: quiet}, PrepareStart: w.pm.EnsureOn}
	eng := engine.New(w.store, w.clock, engine.Config{Actions: acts, Logger: quiet, Observe: func(r engine.Report) { reports <- r }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	defer func() { cancel(); <-done }()
	got := map[string]engine.Report{}
	for len(got) < 2 {
		select {
		case r := <-reports:
			got[r.Event.LeaseID] = r
		case <-time.After(10 * time.Second): // a safety net, not a wait
			t.Fatal("the starts were not handled")
		}
	}
	if r := got[ok]; r.Err != nil || r.Status != climate.LeaseActive {
		t.Errorf("lease on n1: %v, %s; want ACTIVE", r.Err, r.Status)
	}
	if r := got[bad]; r.Err == nil || r.Status != climate.LeaseError ||
		r.Err.Error() != "start_lease failed on 1 of 1 hosts: host n2: power on: BMC unreachable" {
		t.Errorf("lease on n2: %v, %s; want ERROR with the power-on's message", r.Err, r.Status)
	}
	if calls := w.sw.take(); !reflect.DeepEqual(calls, []string{"on n1", "on n2"}) {
		t.Errorf("calls %v, want both powered on", calls)
	}
	if p := w.power("n1"); p.State != climate.PowerOn {
		t.Errorf("n1: %+v, want on", p)
	}
}
