package engine

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
	"climate/postgres"
)

// countingActions counts action calls.
type countingActions struct{ start, end, beforeEnd int }

func (a *countingActions) OnStart(context.Context, *climate.Lease) error   { a.start++; return nil }
func (a *countingActions) OnEnd(context.Context, *climate.Lease) error     { a.end++; return nil }
func (a *countingActions) BeforeEnd(context.Context, *climate.Lease) error { a.beforeEnd++; return nil }

// A replica claims a due event and stalls (a long GC pause, SIGSTOP, a partition) past its
// claim; another replica takes the event over and finishes it. When the first one resumes
// and runs the handler for the event it claimed, the handler must do nothing: no action,
// no write, no report. On PostgreSQL, as the replicas run.
func TestStaleClaimRerunDoesNothingPostgres(t *testing.T) {
	ctx := context.Background()
	st, err := postgres.Open(ctx, postgres.TestDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	admin := climate.Identity{UserID: "u", ProjectID: "p", Roles: []string{"admin"}}
	mgr := manager.New(st, clk, manager.Config{BeforeEnd: 30 * time.Minute})
	if _, err := mgr.CreateHost(ctx, admin, map[string]string{"name": "h1"}); err != nil {
		t.Fatal(err)
	}
	one := 1
	l, err := mgr.CreateLease(ctx, admin, climate.LeaseRequest{
		Name: "l", Start: climate.Date{Time: t0.Add(time.Minute)}, End: climate.Date{Time: t0.Add(2 * time.Hour)},
		Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one}},
	})
	if err != nil {
		t.Fatal(err)
	}
	newEngine := func(a *countingActions, reports *[]Report) *Engine {
		return New(st, clk, Config{ClaimTTL: time.Minute, Actions: a, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Observe: func(r Report) { *reports = append(*reports, r) }})
	}
	var staleActions, liveActions countingActions
	var staleReports, liveReports []Report
	stale, live := newEngine(&staleActions, &staleReports), newEngine(&liveActions, &liveReports)

	for _, due := range []time.Time{l.Start, l.End.Add(-30 * time.Minute), l.End} {
		clk.Set(due)
		// The stale replica claims what is due, then stalls.
		var claimed []climate.Event
		err := st.Update(ctx, func(tx climate.Tx) error {
			var err error
			claimed, err = tx.ClaimDueEvents(ctx, stale.instance, clk.Now(), clk.Now().Add(time.Minute), 64)
			return err
		})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("at %s: claimed %v, %v; want one event", due, claimed, err)
		}
		// Its claim expires; the live replica takes the event over and handles it.
		clk.Advance(2 * time.Minute)
		n := len(liveReports)
		if _, err := live.runDue(ctx); err != nil {
			t.Fatal(err)
		}
		if len(liveReports) != n+1 || liveReports[n].Event.ID != claimed[0].ID || liveReports[n].Err != nil {
			t.Fatalf("at %s: the live replica reported %+v; want event %s handled", due, liveReports[n:], claimed[0].ID)
		}
		before, err := getLease(ctx, st, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		// The stale replica resumes and runs its handler for the event it had claimed.
		stale.handle(ctx, claimed[0])
		after, err := getLease(ctx, st, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, after) {
			t.Errorf("at %s: the stale re-run of %s changed the lease:\nbefore %+v\nafter  %+v", due, claimed[0].Type, before, after)
		}
	}
	if staleActions != (countingActions{}) || len(staleReports) != 0 {
		t.Errorf("the stale replica ran actions %+v and reported %v; want nothing", staleActions, staleReports)
	}
	if liveActions != (countingActions{1, 1, 1}) {
		t.Errorf("live actions %+v; want each once", liveActions)
	}
	final, _ := getLease(ctx, st, l.ID)
	if final.Status != climate.LeaseTerminated {
		t.Errorf("lease is %s, want TERMINATED", final.Status)
	}
}

func getLease(ctx context.Context, st climate.Store, id string) (*climate.Lease, error) {
	var l *climate.Lease
	err := st.View(ctx, func(tx climate.Tx) error {
		var err error
		l, err = tx.GetLease(ctx, id)
		return err
	})
	return l, err
}
