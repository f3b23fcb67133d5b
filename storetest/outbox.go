package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"climate"
)

// testOutbox: notifications get increasing Seqs in commit order, round-trip, page by Seq,
// vanish with a rolled-back transaction; cursors round-trip and never move back.
func testOutbox(t *testing.T, s climate.Store) {
	var seqs []int64
	for i := range 3 {
		n := &climate.Notification{ID: fmt.Sprintf("n%d", i), EventType: climate.NotifyLeaseCreate, LeaseID: "L1",
			ProjectID: "p", Payload: []byte(`{"lease_id": "L1", "x": "é\u0000"}`), Error: "boom", CreatedAt: t0}
		update(t, s, func(tx climate.Tx) error { return tx.AddNotification(ctx, n) })
		var last int64 // the Seq is given by commit time, in commit order
		view(t, s, func(tx climate.Tx) (err error) { last, err = tx.LastNotificationSeq(ctx); return err })
		if last <= 0 || (len(seqs) > 0 && last <= seqs[len(seqs)-1]) {
			t.Fatalf("notification %d: Seq %d after %v", i, last, seqs)
		}
		seqs = append(seqs, last)
	}
	errRollback := errors.New("roll back")
	err := s.Update(ctx, func(tx climate.Tx) error {
		if err := tx.AddNotification(ctx, &climate.Notification{ID: "gone", EventType: "x", LeaseID: "L1", Payload: []byte("{}"), CreatedAt: t0}); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Update: %v", err)
	}
	view(t, s, func(tx climate.Tx) error {
		all, err := tx.Notifications(ctx, 0, 10)
		if err != nil {
			return err
		}
		if len(all) != 3 || all[0].Seq != seqs[0] || all[2].Seq != seqs[2] {
			t.Fatalf("Notifications(0): %+v, want seqs %v (a rolled-back one is not kept)", all, seqs)
		}
		n := all[0]
		if n.ID != "n0" || n.EventType != climate.NotifyLeaseCreate || n.LeaseID != "L1" || n.ProjectID != "p" ||
			string(n.Payload) != `{"lease_id": "L1", "x": "é\u0000"}` || n.Error != "boom" || !n.CreatedAt.Equal(t0.Truncate(time.Microsecond)) || n.CreatedAt.Location() != time.UTC {
			t.Errorf("round trip: %+v", n)
		}
		page, err := tx.Notifications(ctx, seqs[0], 1)
		if err != nil {
			return err
		}
		if len(page) != 1 || page[0].ID != "n1" {
			t.Errorf("Notifications(after first, 1): %+v", page)
		}
		last, err := tx.LastNotificationSeq(ctx)
		if err != nil || last != seqs[2] {
			t.Errorf("LastNotificationSeq = %d, %v; want %d", last, err, seqs[2])
		}
		_, ok, err := tx.DeliveryCursor(ctx, "log")
		if err != nil || ok {
			t.Errorf("DeliveryCursor before any: ok %v, %v", ok, err)
		}
		return nil
	})

	save := func(c climate.DeliveryCursor) {
		update(t, s, func(tx climate.Tx) error { return tx.SaveDeliveryCursor(ctx, &c) })
	}
	get := func() climate.DeliveryCursor {
		var c climate.DeliveryCursor
		view(t, s, func(tx climate.Tx) error {
			var ok bool
			var err error
			if c, ok, err = tx.DeliveryCursor(ctx, "log"); err == nil && !ok {
				t.Fatal("cursor not found after save")
			}
			return err
		})
		return c
	}
	failing := climate.DeliveryCursor{Destination: "log", Position: seqs[1], Attempts: 2, NextAttempt: now.Add(time.Minute), LastError: "HTTP 500", UpdatedAt: now}
	save(failing)
	if c := get(); c != failing {
		t.Errorf("cursor round trip: %+v, want %+v", c, failing)
	}
	save(climate.DeliveryCursor{Destination: "log", Position: seqs[0], UpdatedAt: now.Add(time.Second)}) // a stale writer
	if c := get(); c.Position != seqs[1] || c.Attempts != 2 || c.LastError != "HTTP 500" {
		t.Errorf("a stale save moved the cursor: %+v", c)
	}
	done := climate.DeliveryCursor{Destination: "log", Position: seqs[2], UpdatedAt: now.Add(2 * time.Second)}
	save(done)
	if c := get(); c != done {
		t.Errorf("cursor after success: %+v, want %+v", c, done)
	}
}

// testDeleteDeliveryCursor: a deleted cursor is gone, others stay, deleting a missing
// one is not an error, and a View cannot delete.
func testDeleteDeliveryCursor(t *testing.T, s climate.Store) {
	keep := climate.DeliveryCursor{Destination: "webhook:keep", Position: 7, Attempts: 1, LastError: "HTTP 502", UpdatedAt: now}
	update(t, s, func(tx climate.Tx) error {
		for _, c := range []climate.DeliveryCursor{{Destination: "webhook:w1", Position: 3, UpdatedAt: now}, keep} {
			if err := tx.SaveDeliveryCursor(ctx, &c); err != nil {
				return err
			}
		}
		return nil
	})
	err := s.View(ctx, func(tx climate.Tx) error { return tx.DeleteDeliveryCursor(ctx, "webhook:w1") })
	wantCode(t, "DeleteDeliveryCursor in View", err, climate.CodeInternal)
	exists := func(destination string) bool {
		t.Helper()
		var ok bool
		view(t, s, func(tx climate.Tx) (err error) {
			_, ok, err = tx.DeliveryCursor(ctx, destination)
			return err
		})
		return ok
	}
	if !exists("webhook:w1") {
		t.Fatal("cursor gone after a View's delete")
	}
	update(t, s, func(tx climate.Tx) error { return tx.DeleteDeliveryCursor(ctx, "webhook:w1") })
	if exists("webhook:w1") {
		t.Error("cursor still there after DeleteDeliveryCursor")
	}
	update(t, s, func(tx climate.Tx) error { return tx.DeleteDeliveryCursor(ctx, "webhook:w1") })
	update(t, s, func(tx climate.Tx) error { return tx.DeleteDeliveryCursor(ctx, "never-saved") })
	view(t, s, func(tx climate.Tx) error {
		c, ok, err := tx.DeliveryCursor(ctx, "webhook:keep")
		if err != nil || !ok || c != keep {
			t.Errorf("other cursor after deletes: %+v, ok %v, %v; want %+v", c, ok, err, keep)
		}
		return nil
	})
	// A new cursor under the deleted name starts afresh, from where it is saved.
	update(t, s, func(tx climate.Tx) error {
		return tx.SaveDeliveryCursor(ctx, &climate.DeliveryCursor{Destination: "webhook:w1", Position: 1, UpdatedAt: now})
	})
	view(t, s, func(tx climate.Tx) error {
		c, ok, err := tx.DeliveryCursor(ctx, "webhook:w1")
		if err != nil || !ok || c.Position != 1 {
			t.Errorf("re-created cursor: %+v, ok %v, %v; want position 1 (the old 3 forgotten)", c, ok, err)
		}
		return nil
	})
}
