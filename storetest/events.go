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
	claim := func(at, until time.Time, limit int, want ...string) []climate.Event {
		t.Helper()
		var evs []climate.Event
		update(t, s, func(tx climate.Tx) (err error) {
			evs, err = tx.ClaimDueEvents(ctx, at, until, limit)
			return err
		})
		if got := eventIDs(evs); !reflect.DeepEqual(got, append([]string{}, want...)) {
			t.Errorf("ClaimDueEvents(%v, limit %d): got %v, want %v", at.Sub(now), limit, got, want)
		}
		return evs
	}

	next(time.Time{})
	claim(now, now.Add(time.Minute), 10)
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
	evs := claim(now, claimUntil, 3, "a-start", "t3-end", "t4-end")
	want := climate.Event{ID: "a-start", LeaseID: "a", Type: climate.EventStartLease, Time: now.Add(-2 * time.Hour),
		Status: climate.EventInProgress, CreatedAt: ts(t0), UpdatedAt: now}
	if len(evs) > 0 && !reflect.DeepEqual(evs[0], want) {
		t.Errorf("claimed event:\n got %+v\nwant %+v", evs[0], want)
	}
	next(tie)
	claim(now, claimUntil, 10, "t2-before", "t1-start", "t0-custom", "n-now")
	next(now.Add(time.Microsecond))
	// Claimed events are not claimed again while their claim lasts.
	claim(now, claimUntil, 10)
	claim(now.Add(30*time.Second), now.Add(90*time.Second), 10, "n-later")
	next(claimUntil)
	// Once a claim expires (at claimUntil exactly), its events are due again, in order.
	claim(claimUntil, now.Add(2*time.Minute), 10, "a-start", "t3-end", "t4-end", "t2-before", "t1-start", "t0-custom", "n-now")
	next(now.Add(90 * time.Second))

	l := getLease(t, s, "c")
	if e := l.Events; len(e) != 4 || e[0].ID != "n-later" || e[0].Status != climate.EventInProgress || !e[0].UpdatedAt.Equal(now.Add(30*time.Second)) {
		t.Errorf("claimed event as GetLease shows it: %+v; want IN_PROGRESS, updated at the claim", e)
	}
}
