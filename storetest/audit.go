package storetest

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"climate"
)

// testAudit: entries round-trip, list in id order, filter by lease, host, project and
// time, page by keyset, and vanish with a rolled-back transaction.
func testAudit(t *testing.T, s climate.Store) {
	base := now
	entries := []climate.AuditEntry{
		{Time: base, Actor: climate.AuditActorUser, ActorUserID: "u1", ActorProjectID: "p1", RequestID: "req-1", Action: "lease.create",
			TargetType: "lease", TargetID: "l1", LeaseID: "l1", ProjectID: "p1", After: `{"name":"a"}`},
		{Time: base.Add(time.Minute), Actor: climate.AuditActorUser, ActorUserID: "admin", Action: "host.create",
			TargetType: "host", TargetID: "1", HostID: "1", After: `{"hypervisor_hostname":"h1"}`},
		{Time: base.Add(2 * time.Minute), Actor: climate.AuditActorSystem, Action: "lease.healed", Reason: "host 1 in maintenance",
			TargetType: "lease", TargetID: "l1", LeaseID: "l1", HostID: "1", ProjectID: "p1", Before: `{"hosts":["1"]}`, After: `{"hosts":["2"]}`},
		{Time: base.Add(3 * time.Minute), Actor: climate.AuditActorUser, ActorUserID: "u2", ActorProjectID: "p2", Action: "lease.delete",
			TargetType: "lease", TargetID: "l2", LeaseID: "l2", ProjectID: "p2", Before: `{"name":"b"}`},
	}
	update(t, s, func(tx climate.Tx) error {
		for i := range entries {
			if err := tx.InsertAudit(ctx, &entries[i]); err != nil {
				return err
			}
		}
		return nil
	})
	for i := 1; i < len(entries); i++ {
		if entries[i].ID <= entries[i-1].ID {
			t.Fatalf("ids not increasing: %d then %d", entries[i-1].ID, entries[i].ID)
		}
	}
	list := func(f climate.AuditFilter) []climate.AuditEntry {
		t.Helper()
		var out []climate.AuditEntry
		view(t, s, func(tx climate.Tx) (err error) {
			out, err = tx.ListAudit(ctx, f)
			return err
		})
		return out
	}
	ids := func(es []climate.AuditEntry) []int64 {
		var out []int64
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	idsOf := func(is ...int) []int64 {
		var out []int64
		for _, i := range is {
			out = append(out, entries[i].ID)
		}
		return out
	}
	all := list(climate.AuditFilter{})
	if !reflect.DeepEqual(all, entries) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", all, entries)
	}
	for _, tc := range []struct {
		name string
		f    climate.AuditFilter
		want []int64
	}{
		{"lease", climate.AuditFilter{LeaseID: "l1"}, idsOf(0, 2)},
		{"host", climate.AuditFilter{HostID: "1"}, idsOf(1, 2)},
		{"project", climate.AuditFilter{ProjectID: "p2"}, idsOf(3)},
		{"since", climate.AuditFilter{Since: base.Add(time.Minute)}, idsOf(1, 2, 3)},
		{"until", climate.AuditFilter{Until: base.Add(2 * time.Minute)}, idsOf(0, 1)},
		{"window and lease", climate.AuditFilter{LeaseID: "l1", Since: base.Add(time.Second), Until: base.Add(time.Hour)}, idsOf(2)},
		{"after", climate.AuditFilter{After: entries[1].ID}, idsOf(2, 3)},
		{"limit", climate.AuditFilter{Limit: 2}, idsOf(0, 1)},
		{"after and limit", climate.AuditFilter{After: entries[0].ID, Limit: 2}, idsOf(1, 2)},
		{"nothing", climate.AuditFilter{LeaseID: "nope"}, nil},
	} {
		if got := ids(list(tc.f)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}

	// A rolled-back transaction leaves no entry, and its id is never handed out again in
	// a way that sorts before the committed ones.
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx climate.Tx) error {
		if err := climate.Audit(ctx, tx, climate.ByUser(climate.Identity{UserID: "u"}), "lease.create",
			climate.AuditTarget{Type: "lease", ID: "gone", LeaseID: "gone"}, nil, map[string]any{"name": "x"}, base); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update: %v, want boom", err)
	}
	if got := list(climate.AuditFilter{LeaseID: "gone"}); len(got) != 0 {
		t.Fatalf("a rolled-back change left audit rows: %+v", got)
	}

	// The helper keeps only changed fields on an update, records the request id and the
	// system actor, and drops secrets whatever the caller passes.
	rctx := climate.WithRequestID(ctx, "req-00000000-0000-0000-0000-000000000001")
	update(t, s, func(tx climate.Tx) error {
		return climate.Audit(rctx, tx, climate.BySystem("booked"), "webhook.update",
			climate.AuditTarget{Type: "webhook", ID: "w1", ProjectID: "p1"},
			map[string]any{"url": "https://a/", "enabled": true, "secret": "s3cr3t-before"},
			map[string]any{"url": "https://a/", "enabled": false, "Secret": "s3cr3t-after", "token": "t0ken"}, base)
	})
	got := list(climate.AuditFilter{ProjectID: "p1", After: entries[3].ID})
	if len(got) != 1 {
		t.Fatalf("helper's entry: got %+v", got)
	}
	e := got[0]
	if e.Actor != climate.AuditActorSystem || e.ActorUserID != "" || e.Reason != "booked" ||
		e.RequestID != "req-00000000-0000-0000-0000-000000000001" || e.Action != "webhook.update" || e.TargetID != "w1" {
		t.Errorf("helper's entry: %+v", e)
	}
	if e.Before != `{"enabled":true}` || e.After != `{"enabled":false}` {
		t.Errorf("before/after = %s / %s, want only the changed field", e.Before, e.After)
	}
	for _, secret := range []string{"s3cr3t", "t0ken"} {
		if strings.Contains(e.Before+e.After, secret) {
			t.Errorf("a secret reached the audit trail: %+v", e)
		}
	}
}
