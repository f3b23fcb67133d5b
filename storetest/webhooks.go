package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"climate"
)

// canonWebhook is what a store must return for w: times as ts gives them, and empty
// EventTypes as nil (nil and empty both mean all types, and both come back nil).
func canonWebhook(w climate.Webhook) climate.Webhook {
	w.CreatedAt, w.UpdatedAt = ts(w.CreatedAt), ts(w.UpdatedAt)
	if len(w.EventTypes) == 0 {
		w.EventTypes = nil
	}
	return w
}

func webhookIDs(ws []climate.Webhook) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

func getWebhook(t *testing.T, s climate.Store, id string) *climate.Webhook {
	t.Helper()
	var w *climate.Webhook
	view(t, s, func(tx climate.Tx) (err error) {
		w, err = tx.GetWebhook(ctx, id)
		return err
	})
	return w
}

func checkWebhook(t *testing.T, what string, got *climate.Webhook, written climate.Webhook) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: got nil", what)
	}
	if want := canonWebhook(written); !reflect.DeepEqual(*got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, *got, want)
	}
	for _, tm := range []time.Time{got.CreatedAt, got.UpdatedAt} {
		if !tm.IsZero() && tm.Location() != time.UTC {
			t.Errorf("%s: time %v is not UTC", what, tm)
		}
	}
}

// testWebhooks: webhooks round-trip every field, list in creation order (then id) with a
// project filter, update only what UpdateWebhook rewrites, report unknown ids as not
// found, take their deliveries with them, and vanish with a rolled-back transaction.
func testWebhooks(t *testing.T, s climate.Store) {
	full := climate.Webhook{
		ID: "w-b", ProjectID: "p1", UserID: "u1", URL: "https://example.com/hook?a=1&b=é",
		EventTypes: []string{climate.NotifyLeaseCreate, "lease.event.start_lease"}, Secret: "s3cret",
		Enabled: true, CreatedAt: t0, UpdatedAt: t0.Add(time.Second),
	}
	// Same created_at as w-b: the id breaks the tie. No event types, never updated.
	sameTime := climate.Webhook{ID: "w-a", ProjectID: "p1", UserID: "u2", URL: "https://a.example", EventTypes: []string{},
		Secret: "x", Enabled: true, CreatedAt: t0}
	// All projects, disabled, created earlier than the others but inserted after them.
	global := climate.Webhook{ID: "w-z", AllProjects: true, UserID: "admin", URL: "https://all.example", Secret: "y",
		Enabled: false, DisabledReason: "HTTP 410 Gone", CreatedAt: t0.Add(-time.Hour)}
	other := climate.Webhook{ID: "w-0", ProjectID: "p2", UserID: "u3", URL: "https://p2.example", Secret: "z",
		Enabled: true, CreatedAt: t0.Add(time.Hour)}
	update(t, s, func(tx climate.Tx) error {
		for _, w := range []climate.Webhook{full, sameTime, other, global} {
			if err := tx.InsertWebhook(ctx, &w); err != nil {
				return fmt.Errorf("InsertWebhook %s: %w", w.ID, err)
			}
		}
		return nil
	})
	checkWebhook(t, "GetWebhook w-b", getWebhook(t, s, "w-b"), full)
	checkWebhook(t, "GetWebhook w-a (empty event types)", getWebhook(t, s, "w-a"), sameTime)
	checkWebhook(t, "GetWebhook w-z (all projects, disabled)", getWebhook(t, s, "w-z"), global)
	if got := getWebhook(t, s, "w-a"); got.EventTypes != nil {
		t.Errorf("empty EventTypes came back as %#v, want nil", got.EventTypes)
	}

	err := s.Update(ctx, func(tx climate.Tx) error {
		dup := full
		dup.URL = "https://other.example"
		return tx.InsertWebhook(ctx, &dup)
	})
	wantCode(t, "InsertWebhook with a taken id", err, climate.CodeConflict)

	view(t, s, func(tx climate.Tx) error {
		for _, tc := range []struct {
			project string
			want    []string
		}{
			{"", []string{"w-z", "w-a", "w-b", "w-0"}},
			{"p1", []string{"w-a", "w-b"}},
			{"p2", []string{"w-0"}},
			{"p3", []string{}},
		} {
			ws, err := tx.ListWebhooks(ctx, tc.project)
			if err != nil {
				return err
			}
			if got := webhookIDs(ws); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ListWebhooks(%q) = %v, want %v", tc.project, got, tc.want)
			}
			if tc.project == "p1" && len(ws) == 2 {
				checkWebhook(t, "ListWebhooks(p1)[1]", &ws[1], full)
			}
		}
		return nil
	})

	// UpdateWebhook rewrites URL, event types, enabled, reason and UpdatedAt only.
	changed := full
	changed.URL = "https://example.com/new"
	changed.EventTypes = []string{"lease.delete"}
	changed.Enabled = false
	changed.DisabledReason = "too many failures"
	changed.UpdatedAt = t0.Add(time.Minute)
	attempt := changed
	attempt.ProjectID, attempt.UserID, attempt.Secret, attempt.AllProjects = "p9", "u9", "new-secret", true
	attempt.CreatedAt = t0.Add(24 * time.Hour)
	update(t, s, func(tx climate.Tx) error { return tx.UpdateWebhook(ctx, &attempt) })
	checkWebhook(t, "after UpdateWebhook", getWebhook(t, s, "w-b"), changed)
	// Enabled again, with no event types (all of them).
	changed.Enabled, changed.DisabledReason, changed.EventTypes = true, "", nil
	changed.UpdatedAt = t0.Add(2 * time.Minute)
	update(t, s, func(tx climate.Tx) error { c := changed; return tx.UpdateWebhook(ctx, &c) })
	checkWebhook(t, "after re-enabling", getWebhook(t, s, "w-b"), changed)

	// Unknown ids.
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetWebhook(ctx, "nope")
		wantCode(t, "GetWebhook unknown", err, climate.CodeNotFound)
		return nil
	})
	err = s.Update(ctx, func(tx climate.Tx) error {
		return tx.UpdateWebhook(ctx, &climate.Webhook{ID: "nope", URL: "https://x.example", UpdatedAt: t0})
	})
	wantCode(t, "UpdateWebhook unknown", err, climate.CodeNotFound)
	err = s.Update(ctx, func(tx climate.Tx) error { return tx.DeleteWebhook(ctx, "nope") })
	wantCode(t, "DeleteWebhook unknown", err, climate.CodeNotFound)

	// Deleting a webhook takes its deliveries, not another's.
	update(t, s, func(tx climate.Tx) error {
		for _, id := range []string{"w-a", "w-b"} {
			d := &climate.WebhookDelivery{WebhookID: id, NotificationID: "n1", Seq: 1, EventType: "lease.create", LeaseID: "L1",
				Status: climate.DeliveryDelivered, Attempts: 1, ResponseCode: 200, FirstAttemptAt: t0, LastAttemptAt: t0}
			if err := tx.RecordWebhookDelivery(ctx, d); err != nil {
				return err
			}
		}
		return nil
	})
	update(t, s, func(tx climate.Tx) error { return tx.DeleteWebhook(ctx, "w-a") })
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetWebhook(ctx, "w-a")
		wantCode(t, "GetWebhook after DeleteWebhook", err, climate.CodeNotFound)
		if ds, err := tx.WebhookDeliveries(ctx, "w-a", 10); err != nil || len(ds) != 0 {
			t.Errorf("deliveries of a deleted webhook: %+v, %v; want none", ds, err)
		}
		if ds, err := tx.WebhookDeliveries(ctx, "w-b", 10); err != nil || len(ds) != 1 {
			t.Errorf("deliveries of w-b after deleting w-a: %+v, %v; want its one", ds, err)
		}
		ws, err := tx.ListWebhooks(ctx, "")
		if got, want := webhookIDs(ws), []string{"w-z", "w-b", "w-0"}; err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ListWebhooks after DeleteWebhook = %v, %v; want %v", got, err, want)
		}
		return nil
	})
	// Its id is free again: a new webhook starts with no deliveries.
	update(t, s, func(tx climate.Tx) error { w := sameTime; return tx.InsertWebhook(ctx, &w) })
	view(t, s, func(tx climate.Tx) error {
		if ds, err := tx.WebhookDeliveries(ctx, "w-a", 10); err != nil || len(ds) != 0 {
			t.Errorf("deliveries of a re-created webhook: %+v, %v; want none", ds, err)
		}
		return nil
	})

	// A rolled-back transaction leaves nothing: no insert, update, delete or delivery.
	errRollback := errors.New("roll back")
	err = s.Update(ctx, func(tx climate.Tx) error {
		if err := tx.InsertWebhook(ctx, &climate.Webhook{ID: "w-gone", ProjectID: "p1", URL: "https://gone.example", CreatedAt: t0}); err != nil {
			return err
		}
		if err := tx.RecordWebhookDelivery(ctx, &climate.WebhookDelivery{WebhookID: "w-b", NotificationID: "n2", Seq: 2,
			Status: climate.DeliveryFailed, LastAttemptAt: t0}); err != nil {
			return err
		}
		c := changed
		c.URL = "https://rolled-back.example"
		if err := tx.UpdateWebhook(ctx, &c); err != nil {
			return err
		}
		if err := tx.DeleteWebhook(ctx, "w-0"); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Update: got %v, want the callback's error", err)
	}
	checkWebhook(t, "w-b after a rolled-back update", getWebhook(t, s, "w-b"), changed)
	checkWebhook(t, "w-0 after a rolled-back delete", getWebhook(t, s, "w-0"), other)
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetWebhook(ctx, "w-gone")
		wantCode(t, "GetWebhook after a rolled-back insert", err, climate.CodeNotFound)
		ds, err := tx.WebhookDeliveries(ctx, "w-b", 10)
		if err != nil || len(ds) != 1 || ds[0].NotificationID != "n1" {
			t.Errorf("deliveries after a rolled-back record: %+v, %v; want only n1", ds, err)
		}
		return nil
	})

	// Writes in a View are refused and change nothing.
	writes := map[string]func(climate.Tx) error{
		"InsertWebhook": func(tx climate.Tx) error {
			return tx.InsertWebhook(ctx, &climate.Webhook{ID: "w-view", ProjectID: "p1", URL: "https://v.example", CreatedAt: t0})
		},
		"UpdateWebhook": func(tx climate.Tx) error {
			c := changed
			c.URL = "https://view.example"
			return tx.UpdateWebhook(ctx, &c)
		},
		"DeleteWebhook": func(tx climate.Tx) error { return tx.DeleteWebhook(ctx, "w-0") },
		"RecordWebhookDelivery": func(tx climate.Tx) error {
			return tx.RecordWebhookDelivery(ctx, &climate.WebhookDelivery{WebhookID: "w-b", NotificationID: "n3", Seq: 3, Status: climate.DeliveryDelivered})
		},
	}
	for name, write := range writes {
		wantCode(t, name+" in View", s.View(ctx, write), climate.CodeInternal)
	}
	checkWebhook(t, "w-b after View writes", getWebhook(t, s, "w-b"), changed)
	checkWebhook(t, "w-0 after View writes", getWebhook(t, s, "w-0"), other)
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetWebhook(ctx, "w-view")
		wantCode(t, "GetWebhook after a View insert", err, climate.CodeNotFound)
		if ds, err := tx.WebhookDeliveries(ctx, "w-b", 10); err != nil || len(ds) != 1 {
			t.Errorf("deliveries after a View record: %+v, %v; want only n1", ds, err)
		}
		return nil
	})
}

// testWebhookDeliveries: a delivery round-trips and is replaced by a later record of the
// same notification; deliveries come latest first, at most limit of them; only the
// WebhookDeliveriesKept latest are kept per webhook; a webhook that is gone gets nothing.
func testWebhookDeliveries(t *testing.T, s climate.Store) {
	update(t, s, func(tx climate.Tx) error {
		for _, id := range []string{"w1", "w2"} {
			if err := tx.InsertWebhook(ctx, &climate.Webhook{ID: id, ProjectID: "p1", URL: "https://" + id + ".example",
				Secret: "s", Enabled: true, CreatedAt: t0}); err != nil {
				return err
			}
		}
		return nil
	})
	record := func(ds ...climate.WebhookDelivery) {
		t.Helper()
		update(t, s, func(tx climate.Tx) error {
			for _, d := range ds {
				if err := tx.RecordWebhookDelivery(ctx, &d); err != nil {
					return fmt.Errorf("RecordWebhookDelivery %s/%s: %w", d.WebhookID, d.NotificationID, err)
				}
			}
			return nil
		})
	}
	deliveries := func(webhookID string, limit int) []climate.WebhookDelivery {
		t.Helper()
		var ds []climate.WebhookDelivery
		view(t, s, func(tx climate.Tx) (err error) {
			ds, err = tx.WebhookDeliveries(ctx, webhookID, limit)
			return err
		})
		return ds
	}
	canonDelivery := func(d climate.WebhookDelivery) climate.WebhookDelivery {
		d.FirstAttemptAt, d.LastAttemptAt = ts(d.FirstAttemptAt), ts(d.LastAttemptAt)
		return d
	}

	retrying := climate.WebhookDelivery{WebhookID: "w1", NotificationID: "n5", Seq: 5, EventType: "lease.create",
		LeaseID: "L1", Status: climate.DeliveryRetrying, Attempts: 1, LastError: "dial tcp: connection refused",
		FirstAttemptAt: t0, LastAttemptAt: t0}
	record(retrying)
	if got := deliveries("w1", 10); len(got) != 1 || !reflect.DeepEqual(got[0], canonDelivery(retrying)) {
		t.Fatalf("round trip:\n got %+v\nwant [%+v]", got, canonDelivery(retrying))
	} else if got[0].FirstAttemptAt.Location() != time.UTC || got[0].LastAttemptAt.Location() != time.UTC {
		t.Errorf("delivery times not UTC: %+v", got[0])
	}
	// The same notification again: its row is replaced, not added.
	delivered := retrying
	delivered.Status, delivered.Attempts, delivered.ResponseCode, delivered.LastError = climate.DeliveryDelivered, 2, 204, ""
	delivered.LastAttemptAt = t0.Add(3 * time.Second)
	record(delivered)
	if got := deliveries("w1", 10); len(got) != 1 || !reflect.DeepEqual(got[0], canonDelivery(delivered)) {
		t.Errorf("after a second record of n5:\n got %+v\nwant [%+v]", got, canonDelivery(delivered))
	}

	// Recorded out of order, listed latest (highest Seq) first.
	var batch []climate.WebhookDelivery
	for _, seq := range []int64{3, 9, 7} {
		batch = append(batch, climate.WebhookDelivery{WebhookID: "w1", NotificationID: fmt.Sprintf("n%d", seq), Seq: seq,
			EventType: "lease.update", LeaseID: "L1", Status: climate.DeliveryFailed, Attempts: 3, ResponseCode: 500,
			LastError: "HTTP 500", FirstAttemptAt: now, LastAttemptAt: now.Add(time.Hour)})
	}
	record(batch...)
	seqs := func(ds []climate.WebhookDelivery) []int64 {
		out := []int64{}
		for _, d := range ds {
			out = append(out, d.Seq)
		}
		return out
	}
	if got, want := seqs(deliveries("w1", 10)), []int64{9, 7, 5, 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("WebhookDeliveries(w1, 10) seqs = %v, want %v", got, want)
	}
	if got, want := seqs(deliveries("w1", 2)), []int64{9, 7}; !reflect.DeepEqual(got, want) {
		t.Errorf("WebhookDeliveries(w1, 2) seqs = %v, want %v", got, want)
	}
	if got := deliveries("w1", 0); len(got) != 0 {
		t.Errorf("WebhookDeliveries(w1, 0) = %+v, want none", got)
	}
	if got := deliveries("w2", 10); len(got) != 0 {
		t.Errorf("WebhookDeliveries(w2) = %+v, want none (w1's are its own)", got)
	}
	if got := deliveries("unknown", 10); len(got) != 0 {
		t.Errorf("WebhookDeliveries(unknown) = %+v, want none", got)
	}

	// Only the WebhookDeliveriesKept latest are kept, per webhook: w2 gets a few, then w1
	// gets many more than the limit, one per transaction and some in one transaction.
	record(climate.WebhookDelivery{WebhookID: "w2", NotificationID: "n1", Seq: 1, Status: climate.DeliveryDelivered, LastAttemptAt: t0},
		climate.WebhookDelivery{WebhookID: "w2", NotificationID: "n2", Seq: 2, Status: climate.DeliveryDelivered, LastAttemptAt: t0})
	const last = 10 + 2*climate.WebhookDeliveriesKept
	var many []climate.WebhookDelivery
	for seq := int64(10); seq <= last; seq++ {
		d := climate.WebhookDelivery{WebhookID: "w1", NotificationID: fmt.Sprintf("n%d", seq), Seq: seq,
			EventType: "lease.create", Status: climate.DeliveryDelivered, Attempts: 1, ResponseCode: 200, LastAttemptAt: now}
		if seq%50 == 0 {
			record(many...)
			many = nil
			record(d)
		} else {
			many = append(many, d)
		}
	}
	record(many...)
	got := deliveries("w1", 1000)
	if len(got) != climate.WebhookDeliveriesKept {
		t.Fatalf("w1 keeps %d deliveries, want %d", len(got), climate.WebhookDeliveriesKept)
	}
	for i, d := range got {
		if want := int64(last - i); d.Seq != want {
			t.Fatalf("w1's delivery %d has Seq %d, want %d (the latest kept, latest first)", i, d.Seq, want)
		}
	}
	if got, want := seqs(deliveries("w2", 1000)), []int64{2, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("w2's deliveries after w1's pruning: seqs %v, want %v", got, want)
	}
	// Recording an older delivery than the kept ones keeps the count (it is pruned itself).
	record(climate.WebhookDelivery{WebhookID: "w1", NotificationID: "n-old", Seq: 4, Status: climate.DeliveryFailed, LastAttemptAt: now})
	if got := deliveries("w1", 1000); len(got) != climate.WebhookDeliveriesKept || got[0].Seq != last ||
		got[len(got)-1].Seq != last-climate.WebhookDeliveriesKept+1 {
		t.Errorf("after recording an old delivery: seqs %v; want the %d from %d down", seqs(got), climate.WebhookDeliveriesKept, last)
	}

	// A webhook that is gone: nothing written, no error, in a transaction that goes on.
	update(t, s, func(tx climate.Tx) error {
		if err := tx.RecordWebhookDelivery(ctx, &climate.WebhookDelivery{WebhookID: "gone", NotificationID: "n1", Seq: 1,
			Status: climate.DeliveryDelivered, LastAttemptAt: now}); err != nil {
			return fmt.Errorf("RecordWebhookDelivery for a missing webhook: %w", err)
		}
		return tx.RecordWebhookDelivery(ctx, &climate.WebhookDelivery{WebhookID: "w2", NotificationID: "n3", Seq: 3,
			Status: climate.DeliveryDelivered, LastAttemptAt: now})
	})
	if got := deliveries("gone", 10); len(got) != 0 {
		t.Errorf("deliveries of a missing webhook: %+v, want none", got)
	}
	if got, want := seqs(deliveries("w2", 10)), []int64{3, 2, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("w2's deliveries after the missing webhook's record: %v, want %v", got, want)
	}
	// The same after its webhook is deleted in the same transaction.
	update(t, s, func(tx climate.Tx) error {
		if err := tx.DeleteWebhook(ctx, "w2"); err != nil {
			return err
		}
		return tx.RecordWebhookDelivery(ctx, &climate.WebhookDelivery{WebhookID: "w2", NotificationID: "n4", Seq: 4,
			Status: climate.DeliveryDelivered, LastAttemptAt: now})
	})
	if got := deliveries("w2", 10); len(got) != 0 {
		t.Errorf("deliveries of a deleted webhook: %+v, want none", got)
	}
}
