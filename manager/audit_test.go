package manager_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/manager"
)

func auditOf(t *testing.T, m *manager.Manager, q climate.AuditQuery) []climate.AuditEntry {
	t.Helper()
	es, _, err := manager.CollectAudit(context.Background(), m, admin, q)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	if s == "" {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("summary %q: %v", s, err)
	}
	return m
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A lease's create, update and delete through the manager record three entries, each
// with the caller, the request id, and a summary of what changed.
func TestAuditLeaseCreateUpdateDelete(t *testing.T) {
	m, _, _ := setup(t)
	hosts := addHosts(t, m, 1, nil)
	const reqID = "req-11111111-2222-3333-4444-555555555555"
	ctx := climate.WithRequestID(context.Background(), reqID)
	l, err := m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "exp", Start: at(time.Hour), End: at(2 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Name: ptr("exp-2")}); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteLease(ctx, alice, l.ID); err != nil {
		t.Fatal(err)
	}
	es := auditOf(t, m, climate.AuditQuery{LeaseID: l.ID})
	var actions []string
	for _, e := range es {
		actions = append(actions, e.Action)
		if e.Actor != climate.AuditActorUser || e.ActorUserID != "alice" || e.ActorProjectID != "physics" || e.RequestID != reqID ||
			e.TargetType != "lease" || e.TargetID != l.ID || e.ProjectID != "physics" {
			t.Errorf("%s: %+v", e.Action, e)
		}
	}
	if want := []string{"lease.create", "lease.update", "lease.delete"}; !reflect.DeepEqual(actions, want) {
		t.Fatalf("actions %v, want %v", actions, want)
	}
	created := decode(t, es[0].After)
	if es[0].Before != "" || created["name"] != "exp" || created["status"] != "PENDING" ||
		!reflect.DeepEqual(created["resources"], []any{hosts[0]}) {
		t.Errorf("create: before %q, after %v", es[0].Before, created)
	}
	// An update shows only the fields that changed.
	before, after := decode(t, es[1].Before), decode(t, es[1].After)
	if !reflect.DeepEqual(before, map[string]any{"name": "exp"}) || !reflect.DeepEqual(after, map[string]any{"name": "exp-2"}) {
		t.Errorf("update: before %v, after %v", before, after)
	}
	deleted := decode(t, es[2].Before)
	if deleted["name"] != "exp-2" || es[2].After != "" {
		t.Errorf("delete: before %v, after %q", deleted, es[2].After)
	}
	// The host's creation was recorded too, by the admin, without a request id.
	hs := auditOf(t, m, climate.AuditQuery{HostID: hosts[0]})
	if len(hs) != 1 || hs[0].Action != "host.create" || hs[0].ActorUserID != "root" || hs[0].RequestID != "" {
		t.Errorf("host entries: %+v", hs)
	}
}

// failingStore makes every write transaction fail when it writes a notification: after
// the change and its audit entry, before the commit.
type failingStore struct{ climate.Store }

type failingTx struct{ climate.Tx }

var errOutbox = errors.New("outbox down")

func (failingTx) AddNotification(context.Context, *climate.Notification) error { return errOutbox }

func (s failingStore) Update(ctx context.Context, fn func(climate.Tx) error) error {
	return s.Store.Update(ctx, func(tx climate.Tx) error { return fn(failingTx{tx}) })
}

// A change that rolls back leaves no audit entry: a lease refused at commit, and one whose
// transaction fails after its audit entry was written.
func TestAuditRolledBackChangeLeavesNoEntry(t *testing.T) {
	ctx := context.Background()
	m, st, clk := setup(t)
	addHosts(t, m, 1, nil)
	create(t, m, alice, time.Hour, 2*time.Hour, hostReq(1, 1, ""))
	n := len(auditOf(t, m, climate.AuditQuery{}))
	// Refused: the host is taken.
	_, err := m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "late", Start: at(time.Hour), End: at(2 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts")
	// Failed inside the transaction, after the lease and its audit entry were written.
	broken := manager.New(failingStore{st}, clk, manager.Config{BeforeEnd: manager.DefaultBeforeEnd})
	_, err = broken.CreateLease(ctx, bob, climate.LeaseRequest{Name: "broken", Start: at(3 * time.Hour), End: at(4 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	if !errors.Is(err, errOutbox) {
		t.Fatalf("CreateLease: %v, want the outbox's error", err)
	}
	if err := broken.DeleteLease(ctx, alice, mustOnlyLease(t, m).ID); !errors.Is(err, errOutbox) {
		t.Fatalf("DeleteLease: %v, want the outbox's error", err)
	}
	if es := auditOf(t, m, climate.AuditQuery{}); len(es) != n {
		t.Fatalf("%d entries, want %d: the rolled-back changes left %+v", len(es), n, es[n:])
	}
	if es := auditOf(t, m, climate.AuditQuery{ProjectID: "chemistry"}); len(es) != 0 {
		t.Fatalf("bob's refused leases were audited: %+v", es)
	}
}

func mustOnlyLease(t *testing.T, m *manager.Manager) *climate.Lease {
	t.Helper()
	ls, _, err := manager.CollectLeases(context.Background(), m, admin, climate.LeaseQuery{})
	if err != nil || len(ls) != 1 {
		t.Fatalf("leases: %v %+v", err, ls)
	}
	return &ls[0]
}

// Only admins read the trail; filters, time windows and pages work through the manager.
func TestAuditListPolicyAndPages(t *testing.T) {
	ctx := context.Background()
	m, _, clk := setup(t)
	addHosts(t, m, 3, nil)
	for _, who := range []climate.Identity{alice, reader} {
		_, _, err := manager.CollectAudit(ctx, m, who, climate.AuditQuery{})
		wantCode(t, err, climate.CodeForbidden, "climate:audit:get")
	}
	clk.Advance(time.Minute)
	a := create(t, m, alice, time.Hour, 2*time.Hour, hostReq(1, 1, ""))
	clk.Advance(time.Minute)
	b := create(t, m, bob, time.Hour, 2*time.Hour, hostReq(1, 1, ""))
	if es := auditOf(t, m, climate.AuditQuery{ProjectID: "chemistry"}); len(es) != 1 || es[0].LeaseID != b.ID {
		t.Errorf("project filter: %+v", es)
	}
	if es := auditOf(t, m, climate.AuditQuery{Since: t0.Add(time.Minute), Until: t0.Add(2 * time.Minute)}); len(es) != 1 || es[0].LeaseID != a.ID {
		t.Errorf("time window: %+v", es)
	}
	all := auditOf(t, m, climate.AuditQuery{})
	if len(all) != 5 {
		t.Fatalf("%d entries, want 3 hosts and 2 leases", len(all))
	}
	var paged []climate.AuditEntry
	marker := ""
	for {
		page, more, err := manager.CollectAudit(ctx, m, admin, climate.AuditQuery{Limit: 2, Marker: marker})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, page...)
		if !more {
			break
		}
		marker = formatID(page[len(page)-1].ID)
	}
	if !reflect.DeepEqual(paged, all) {
		t.Fatalf("pages of 2 give %d entries, want %d", len(paged), len(all))
	}
	_, _, err := manager.CollectAudit(ctx, m, admin, climate.AuditQuery{Marker: "abc"})
	wantCode(t, err, climate.CodeInvalid, "marker abc not found")
}

func formatID(id int64) string { return strconv.FormatInt(id, 10) }

// The service's own changes are recorded as the system's, with the reason: a waiting
// lease booked, and a maintenance window's healing.
func TestAuditSystemChanges(t *testing.T) {
	ctx := context.Background()
	m, _, _ := setup(t)
	hosts := addHosts(t, m, 2, nil)
	fits := create(t, m, alice, time.Hour, 3*time.Hour, hostReq(2, 2, ""))
	w, err := m.CreateLease(ctx, bob, typed("waits", climate.LeaseRetry, time.Hour, 2*time.Hour, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteLease(ctx, alice, fits.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := m.RetryWaiting(ctx); err != nil || n != 1 {
		t.Fatalf("RetryWaiting: %d, %v", n, err)
	}
	es := auditOf(t, m, climate.AuditQuery{LeaseID: w.ID})
	if len(es) != 2 || es[1].Action != "lease.booked" || es[1].Actor != climate.AuditActorSystem || es[1].ActorUserID != "" || es[1].Reason == "" {
		t.Fatalf("waiting lease's entries: %+v", es)
	}
	if b := decode(t, es[1].Before); b["status"] != string(climate.LeaseWaiting) {
		t.Errorf("booked: before %v", b)
	}
	booked, _ := m.GetLease(ctx, bob, w.ID)
	held := hostsOf(booked)[0]
	// A maintenance window on its host heals it: the window by the admin, the lease's
	// move by the service.
	if _, _, err := m.CreateMaintenance(ctx, admin, held, climate.MaintenanceRequest{Start: climate.Date{Now: true}, Reason: "disk"}); err != nil {
		t.Fatal(err)
	}
	hs := auditOf(t, m, climate.AuditQuery{HostID: held})
	var got []string
	for _, e := range hs {
		got = append(got, e.Action+"/"+e.Actor)
	}
	if want := []string{"host.create/user", "maintenance.create/user", "lease.healed/climate"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("host %s's entries %v, want %v (hosts %v)", held, got, want, hosts)
	}
	healed := hs[2]
	if healed.LeaseID != w.ID || healed.Reason == "" || len(keys(decode(t, healed.Before))) == 0 {
		t.Errorf("healing entry: %+v", healed)
	}
}

// A preemption cut is recorded on the preemptible lease as the service's, naming the
// lease that took the host back, with the dates it moved.
func TestAuditPreemptionCut(t *testing.T) {
	m, _, _, _ := preemptSetup(t, 0, 1)
	p := mustCreate(t, m, preemptible("sweep", 0, 10*time.Hour, "", 1, 1))
	r := mustCreate(t, m, lease("reserved", 4*time.Hour, 6*time.Hour, 1))
	es := auditOf(t, m, climate.AuditQuery{LeaseID: p.ID})
	if len(es) != 2 || es[1].Action != "lease.preempted" || es[1].Actor != climate.AuditActorSystem || !strings.Contains(es[1].Reason, r.ID) {
		t.Fatalf("preemptible lease's entries %+v", es)
	}
	before, after := decode(t, es[1].Before), decode(t, es[1].After)
	if before["end_date"] != t0.Add(10*time.Hour).Format(time.RFC3339) || after["end_date"] != t0.Add(4*time.Hour).Format(time.RFC3339) {
		t.Errorf("cut: before %v, after %v", before, after)
	}
	if _, ok := after["name"]; ok {
		t.Errorf("unchanged fields in the summary: %v", after)
	}
}
