package storetest

import (
	"reflect"
	"testing"
	"time"

	"climate"
)

// eventLease returns a childless lease holding the given events.
func eventLease(id string, evs ...climate.Event) *climate.Lease {
	for i := range evs {
		evs[i].LeaseID, evs[i].CreatedAt = id, t0
	}
	return &climate.Lease{ID: id, Name: id, UserID: "u", ProjectID: "p1", Start: now.Add(-time.Hour), End: now.Add(time.Hour),
		Status: climate.LeasePending, CreatedAt: t0, Events: evs}
}

func testClaimDueEvents(t *testing.T, s climate.Store) {
	next := func(want time.Time) {
		t.Helper()
		view(t, s, func(tx climate.Tx) error {
			got, ok, err := tx.NextEventTime(ctx)
			switch {
			case err != nil:
				t.Errorf("NextEventTime: %v", err)
			case want.IsZero() && ok:
				t.Errorf("NextEventTime: %v, want none", got)
			case !want.IsZero() && (!ok || !got.Equal(want)):
				t.Errorf("NextEventTime: %v (ok %v), want %v", got, ok, want)
			}
			return nil
		})
	}
	// takenOver is the events each claim must report as another run's lapsed claims.
	takenOver := map[string]bool{}
	claim := func(owner string, at, until time.Time, limit int, want ...string) []climate.Event {
		t.Helper()
		var evs []climate.Event
		update(t, s, func(tx climate.Tx) (err error) {
			evs, err = tx.ClaimDueEvents(ctx, owner, at, until, limit)
			return err
		})
		if got := eventIDs(evs); !reflect.DeepEqual(got, append([]string{}, want...)) {
			t.Errorf("ClaimDueEvents(%s, %v, limit %d): got %v, want %v", owner, at.Sub(now), limit, got, want)
		}
		for _, e := range evs {
			if e.ClaimedBy != owner {
				t.Errorf("ClaimDueEvents(%s): %s claimed by %q", owner, e.ID, e.ClaimedBy)
			}
			if e.TakenOver != takenOver[e.ID] {
				t.Errorf("ClaimDueEvents(%s): %s TakenOver %v, want %v", owner, e.ID, e.TakenOver, takenOver[e.ID])
			}
		}
		return evs
	}
	renew := func(owner string, until time.Time, want int) {
		t.Helper()
		update(t, s, func(tx climate.Tx) error {
			if n, err := tx.RenewClaims(ctx, owner, until); err != nil || n != want {
				t.Errorf("RenewClaims(%s): %d, %v; want %d", owner, n, err, want)
			}
			return nil
		})
	}
	claimedBy := func(lease string, want map[string]string) {
		t.Helper()
		for _, e := range getLease(t, s, lease).Events {
			if w, ok := want[e.ID]; ok && e.ClaimedBy != w {
				t.Errorf("GetLease(%s): %s claimed by %q, want %q", lease, e.ID, e.ClaimedBy, w)
			}
		}
	}

	next(time.Time{})
	claim("run-1", now, now.Add(time.Minute), 10)
	// Finished events are never due.
	insertLeases(t, s, eventLease("finished",
		climate.Event{ID: "f-done", Type: climate.EventStartLease, Time: now.Add(-3 * time.Hour), Status: climate.EventDone},
		climate.Event{ID: "f-error", Type: climate.EventEndLease, Time: now.Add(-3 * time.Hour), Status: climate.EventError},
	))
	next(time.Time{})

	tie := now.Add(-time.Hour)
	insertLeases(t, s,
		eventLease("a",
			climate.Event{ID: "a-start", Type: climate.EventStartLease, Time: now.Add(-2 * time.Hour), Status: climate.EventUndone},
			climate.Event{ID: "a-end", Type: climate.EventEndLease, Time: now.Add(2 * time.Hour), Status: climate.EventUndone}),
		// Ids sort against the tie rank, so the rank must decide.
		eventLease("b",
			climate.Event{ID: "t0-custom", Type: "custom", Time: tie, Status: climate.EventUndone},
			climate.Event{ID: "t1-start", Type: climate.EventStartLease, Time: tie, Status: climate.EventUndone},
			climate.Event{ID: "t2-before", Type: climate.EventBeforeEndLease, Time: tie, Status: climate.EventUndone}),
		eventLease("c",
			climate.Event{ID: "t4-end", Type: climate.EventEndLease, Time: tie, Status: climate.EventUndone},
			climate.Event{ID: "t3-end", Type: climate.EventEndLease, Time: tie, Status: climate.EventUndone},
			climate.Event{ID: "n-now", Type: climate.EventStartLease, Time: now, Status: climate.EventUndone},
			climate.Event{ID: "n-later", Type: climate.EventStartLease, Time: now.Add(time.Microsecond), Status: climate.EventUndone}),
	)
	next(now.Add(-2 * time.Hour))

	claimUntil := now.Add(time.Minute)
	evs := claim("run-1", now, claimUntil, 3, "a-start", "t3-end", "t4-end")
	want := climate.Event{ID: "a-start", LeaseID: "a", Type: climate.EventStartLease, Time: now.Add(-2 * time.Hour),
		Status: climate.EventInProgress, ClaimedBy: "run-1", CreatedAt: ts(t0), UpdatedAt: now}
	if len(evs) > 0 && !reflect.DeepEqual(evs[0], want) {
		t.Errorf("claimed event:\n got %+v\nwant %+v", evs[0], want)
	}
	next(tie)
	claim("run-1", now, claimUntil, 10, "t2-before", "t1-start", "t0-custom", "n-now")
	next(now.Add(time.Microsecond))
	// Claimed events are not claimed again while their claim lasts, by anyone.
	claim("run-1", now, claimUntil, 10)
	claim("run-2", now.Add(30*time.Second), now.Add(90*time.Second), 10, "n-later")
	next(claimUntil)

	// A heartbeat moves the expiry of its owner's claims only.
	renew("run-1", now.Add(100*time.Second), 7)
	next(now.Add(90 * time.Second))
	renew("run-2", now.Add(2*time.Minute), 1)
	next(now.Add(100 * time.Second))
	renew("nobody", now.Add(time.Hour), 0)
	claim("run-3", claimUntil, now.Add(3*time.Minute), 10)
	// Once a claim expires (at its expiry exactly), its events are due again, in order, and
	// the new claimer holds them: the old one's heartbeat no longer reaches them.
	takenOver = map[string]bool{"a-start": true, "t3-end": true, "t4-end": true, "t2-before": true, "t1-start": true, "t0-custom": true, "n-now": true}
	claim("run-3", now.Add(100*time.Second), now.Add(3*time.Minute), 10, "a-start", "t3-end", "t4-end", "t2-before", "t1-start", "t0-custom", "n-now")
	next(now.Add(2 * time.Minute))
	renew("run-1", now.Add(time.Hour), 0)
	next(now.Add(2 * time.Minute))

	l := getLease(t, s, "c")
	if e := l.Events; len(e) != 4 || e[0].ID != "n-later" || e[0].Status != climate.EventInProgress || !e[0].UpdatedAt.Equal(now.Add(30*time.Second)) {
		t.Errorf("claimed event as GetLease shows it: %+v; want IN_PROGRESS, updated at the claim (not the renewal)", e)
	}
	claimedBy("c", map[string]string{"n-later": "run-2", "t3-end": "run-3", "n-now": "run-3"})

	// Handing every claim back makes the events due at their own times, unclaimed.
	update(t, s, func(tx climate.Tx) error {
		if n, err := tx.ReleaseClaims(ctx); err != nil || n != 8 {
			t.Errorf("ReleaseClaims: %d, %v; want 8", n, err)
		}
		return nil
	})
	next(now.Add(-2 * time.Hour))
	claimedBy("c", map[string]string{"n-later": "", "t3-end": "", "n-now": ""})
	for _, e := range getLease(t, s, "c").Events {
		if e.Status != climate.EventUndone {
			t.Errorf("%s is %s after ReleaseClaims, want UNDONE", e.ID, e.Status)
		}
	}
	takenOver = map[string]bool{} // handed back: claimed afresh
	claim("run-4", now.Add(time.Microsecond), now.Add(time.Hour), 10,
		"a-start", "t3-end", "t4-end", "t2-before", "t1-start", "t0-custom", "n-now", "n-later")
	renew("run-3", now.Add(2*time.Hour), 0)
}
