package manager_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
	"climate/postgres"
)

// syncBuffer is a log buffer safe for the manager's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// healEnv is a manager over a store with a fake clock, its log kept.
type healEnv struct {
	m   *manager.Manager
	st  climate.Store
	clk *clock.Fake
	log *syncBuffer
}

func newHealEnv(t *testing.T, st climate.Store) *healEnv {
	t.Helper()
	e := &healEnv{st: st, clk: clock.NewFake(t0), log: &syncBuffer{}}
	logger := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.m = manager.New(st, e.clk, manager.Config{BeforeEnd: manager.DefaultBeforeEnd, Log: logger})
	return e
}

func healSetup(t *testing.T) *healEnv {
	t.Helper()
	st := openStore(t)
	return newHealEnv(t, st)
}

// stores runs fn on SQLite and, with CLIMATE_TEST_POSTGRES, on PostgreSQL.
func stores(t *testing.T, fn func(t *testing.T, e *healEnv)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, healSetup(t)) })
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), postgres.TestDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, newHealEnv(t, st))
	})
}

func (e *healEnv) maintain(t *testing.T, host string, start, end time.Duration, reason string) (*climate.Maintenance, []climate.Healing) {
	t.Helper()
	req := climate.MaintenanceRequest{Start: at(start), Reason: reason}
	if end > 0 {
		req.End = at(end)
	}
	w, healed, err := e.m.CreateMaintenance(context.Background(), admin, host, req)
	if err != nil {
		t.Fatal(err)
	}
	return w, healed
}

func (e *healEnv) lease(t *testing.T, id string) *climate.Lease {
	t.Helper()
	l, err := e.m.GetLease(context.Background(), admin, id)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// notifications returns the outbox's notifications of a lease: type and error.
func (e *healEnv) notifications(t *testing.T, lease string) []climate.Notification {
	t.Helper()
	var out []climate.Notification
	err := e.st.View(context.Background(), func(tx climate.Tx) error {
		ns, err := tx.Notifications(context.Background(), 0, 1000)
		for _, n := range ns {
			if n.LeaseID == lease {
				out = append(out, n)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func lastNotification(t *testing.T, ns []climate.Notification) climate.Notification {
	t.Helper()
	if len(ns) == 0 {
		t.Fatal("no notification")
	}
	return ns[len(ns)-1]
}

func outcome(t *testing.T, healed []climate.Healing, reservation string) climate.Healing {
	t.Helper()
	for _, h := range healed {
		if h.ReservationID == reservation {
			return h
		}
	}
	t.Fatalf("no healing of reservation %s in %+v", reservation, healed)
	return climate.Healing{}
}

func reservationByID(t *testing.T, l *climate.Lease, id string) *climate.Reservation {
	t.Helper()
	for i := range l.Reservations {
		if l.Reservations[i].ID == id {
			return &l.Reservations[i]
		}
	}
	t.Fatalf("lease %s has no reservation %s", l.ID, id)
	return nil
}

func other(hosts []string, not string) string {
	for _, h := range hosts {
		if h != not {
			return h
		}
	}
	return ""
}

// A reservation that has not started moves off a host taken into maintenance, onto
// another matching host; the lease's other reservation keeps its allocation untouched;
// nothing is flagged; the lease is notified lease.healed; the decision is logged.
func TestMaintenanceReplansFutureReservation(t *testing.T) {
	stores(t, func(t *testing.T, e *healEnv) {
		ctx := context.Background()
		hosts := addHosts(t, e.m, 3, nil)
		l := create(t, e.m, alice, time.Hour, 3*time.Hour, hostReq(1, 1, ""), hostReq(1, 1, ""))
		r1, r2 := l.Reservations[0], l.Reservations[1]
		down := r1.Allocations[0].ResourceID
		w, healed := e.maintain(t, down, 2*time.Hour, 0, "PSU replaced")
		if w.HostID != down || !w.UntilFurtherNotice() || w.Reason != "PSU replaced" || !w.Start.Equal(t0.Add(2*time.Hour)) {
			t.Fatalf("maintenance %+v", w)
		}
		o := outcome(t, healed, r1.ID)
		if o.Outcome != climate.HealReplanned || !slices.Equal(o.Down, []string{down}) || len(o.Hosts) != 1 || o.Hosts[0] == down {
			t.Fatalf("healing %+v", o)
		}
		got := e.lease(t, l.ID)
		g1, g2 := *reservationByID(t, got, r1.ID), *reservationByID(t, got, r2.ID)
		if h := g1.Allocations[0].ResourceID; h == down || h == r2.Allocations[0].ResourceID || !slices.Contains(hosts, h) {
			t.Fatalf("reservation moved to %s (down %s, other reservation on %s)", h, down, r2.Allocations[0].ResourceID)
		}
		if a := g1.Allocations[0]; !a.Start.Equal(l.Start) || !a.End.Equal(l.End) {
			t.Errorf("replanned allocation %+v, want the lease's window", a)
		}
		if !slices.Equal(g2.Allocations, r2.Allocations) {
			t.Errorf("the other reservation changed: %+v, was %+v", g2.Allocations, r2.Allocations)
		}
		if got.Degraded || g1.MissingResources || g1.ResourcesChanged || g2.MissingResources {
			t.Errorf("flags after a replan: lease degraded %v, reservation %+v", got.Degraded, g1)
		}
		if n := lastNotification(t, e.notifications(t, l.ID)); n.EventType != climate.NotifyLeaseHealed {
			t.Errorf("last notification %s, want %s", n.EventType, climate.NotifyLeaseHealed)
		}
		for _, want := range []string{"lease=" + l.ID, "reservation=" + r1.ID, "host=" + down, "outcome=replanned", "maintenance=" + w.ID} {
			if !strings.Contains(e.log.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, e.log.String())
			}
		}
		ms, err := e.m.ListMaintenances(ctx, admin, down)
		if err != nil || len(ms) != 1 || ms[0].ID != w.ID {
			t.Fatalf("ListMaintenances: %+v, %v", ms, err)
		}
		if all, err := e.m.ListMaintenances(ctx, admin, ""); err != nil || len(all) != 1 {
			t.Fatalf("ListMaintenances of every host: %+v, %v", all, err)
		}
		if g, err := e.m.GetMaintenance(ctx, admin, down, w.ID); err != nil || *g != *w {
			t.Fatalf("GetMaintenance: %+v, %v; want %+v", g, err, w)
		}
	})
}

// Without a replacement the reservation keeps its host, flagged missing_resources, its
// lease degraded and notified lease.degraded saying why. Deleting the window puts the host
// back: the flags are cleared (Blazar never clears them) and the lease notified
// lease.healed.
func TestMaintenanceDegradesThenRecovers(t *testing.T) {
	stores(t, func(t *testing.T, e *healEnv) {
		ctx := context.Background()
		hosts := addHosts(t, e.m, 2, nil)
		l := create(t, e.m, alice, time.Hour, 3*time.Hour, hostReq(1, 1, ""))
		create(t, e.m, bob, time.Hour, 3*time.Hour, hostReq(1, 1, "")) // the other host, taken
		down := l.Reservations[0].Allocations[0].ResourceID
		w, healed := e.maintain(t, down, 0, 2*time.Hour, "")
		o := outcome(t, healed, l.Reservations[0].ID)
		if o.Outcome != climate.HealDegraded || !strings.Contains(o.Detail, "Not enough hosts available") || !slices.Equal(o.Hosts, []string{down}) {
			t.Fatalf("healing %+v", o)
		}
		got := e.lease(t, l.ID)
		r := got.Reservations[0]
		if !got.Degraded || !r.MissingResources || r.ResourcesChanged || !slices.Equal(r.Allocations, l.Reservations[0].Allocations) {
			t.Fatalf("after a degradation: degraded %v, reservation %+v", got.Degraded, r)
		}
		n := lastNotification(t, e.notifications(t, l.ID))
		if n.EventType != climate.NotifyLeaseDegraded || !strings.Contains(n.Error, "host "+down+" is in maintenance from 2030-01-01 10:00 to 2030-01-01 12:00") ||
			!strings.Contains(n.Error, r.ID) {
			t.Fatalf("notification %s %q", n.EventType, n.Error)
		}
		var payload struct {
			Degraded     bool `json:"degraded"`
			Reservations []struct {
				MissingResources bool `json:"missing_resources"`
			} `json:"reservations"`
		}
		if err := json.Unmarshal(n.Payload, &payload); err != nil || !payload.Degraded || !payload.Reservations[0].MissingResources {
			t.Fatalf("payload %s: %v", n.Payload, err)
		}
		if !strings.Contains(e.log.String(), "outcome=degraded") {
			t.Errorf("log lacks the degradation:\n%s", e.log.String())
		}

		// The host is back.
		healed, err := e.m.DeleteMaintenance(ctx, admin, down, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if o := outcome(t, healed, r.ID); o.Outcome != climate.HealRecovered {
			t.Fatalf("healing after delete %+v", o)
		}
		got = e.lease(t, l.ID)
		if got.Degraded || got.Reservations[0].MissingResources || !slices.Equal(got.Reservations[0].Allocations, l.Reservations[0].Allocations) {
			t.Fatalf("after the host is back: degraded %v, %+v", got.Degraded, got.Reservations[0])
		}
		if n := lastNotification(t, e.notifications(t, l.ID)); n.EventType != climate.NotifyLeaseHealed || n.Error != "" {
			t.Fatalf("notification %s %q", n.EventType, n.Error)
		}
		if ms, _ := e.m.ListMaintenances(ctx, admin, down); len(ms) != 0 {
			t.Fatalf("windows left: %+v", ms)
		}
		_ = hosts
	})
}

// An active reservation losing its host is given a free one for the rest of its window,
// from now: resources_changed, not missing, not degraded. One that finds none is
// flagged, and its lease degraded.
func TestMaintenanceReplacesActiveHost(t *testing.T) {
	stores(t, func(t *testing.T, e *healEnv) {
		hosts := addHosts(t, e.m, 3, nil)
		l := create(t, e.m, alice, 0, 10*time.Hour, hostReq(1, 1, ""))
		startLease(t, e.st, l.ID)
		e.clk.Advance(2 * time.Hour)
		now := t0.Add(2 * time.Hour)
		down := l.Reservations[0].Allocations[0].ResourceID
		// Another lease holds a third host over the rest of the window: one host is left.
		busy := create(t, e.m, bob, 3*time.Hour, 4*time.Hour, hostReq(1, 1, `["!=", "$id", "`+down+`"]`))
		spare := other(other2(hosts, down, hostsOf(busy)[0]), "")
		_, healed := e.maintain(t, down, 5*time.Hour, 0, "")
		o := outcome(t, healed, l.Reservations[0].ID)
		if o.Outcome != climate.HealReplaced || !slices.Equal(o.Hosts, []string{spare}) {
			t.Fatalf("healing %+v, want replaced by %s", o, spare)
		}
		got := e.lease(t, l.ID)
		r := got.Reservations[0]
		if got.Degraded || r.MissingResources || !r.ResourcesChanged {
			t.Fatalf("after a replacement: degraded %v, %+v", got.Degraded, r)
		}
		if a := r.Allocations[0]; a.ResourceID != spare || !a.Start.Equal(now) || !a.End.Equal(l.End) {
			t.Fatalf("replacement allocation %+v, want %s over [now, end)", a, spare)
		}
		if got.Status != climate.LeaseActive || r.Status != climate.ReservationActive {
			t.Fatalf("statuses changed: %s %s", got.Status, r.Status)
		}
		// The spare is down too now: no host is left, the lease is degraded and keeps it.
		_, healed = e.maintain(t, spare, 3*time.Hour, 6*time.Hour, "")
		if o := outcome(t, healed, r.ID); o.Outcome != climate.HealDegraded {
			t.Fatalf("healing %+v", o)
		}
		got = e.lease(t, l.ID)
		if r := got.Reservations[0]; !got.Degraded || !r.MissingResources || !r.ResourcesChanged || r.Allocations[0].ResourceID != spare {
			t.Fatalf("after the spare went down: degraded %v, %+v", got.Degraded, r)
		}
	})
}

func other2(hosts []string, a, b string) []string {
	var out []string
	for _, h := range hosts {
		if h != a && h != b {
			out = append(out, h)
		}
	}
	return out
}

// Instance slots move too: a reservation's slots on a host in maintenance go to another
// host with room, its slots elsewhere stay.
func TestMaintenanceMovesInstanceSlots(t *testing.T) {
	e := healSetup(t)
	hosts := addHosts(t, e.m, 3, map[string]string{"vcpus": "4", "memory_mb": "8192"})
	no := false
	l := create(t, e.m, alice, time.Hour, 3*time.Hour, instReq(2, 2, 1024, &no)) // anti-affinity: two hosts
	before := slotsByHost(&l.Reservations[0])
	if len(before) != 2 {
		t.Fatalf("slots %v", before)
	}
	var down, kept string
	for h := range before {
		if down == "" {
			down = h
		} else {
			kept = h
		}
	}
	_, healed := e.maintain(t, down, 0, 0, "")
	if o := outcome(t, healed, l.Reservations[0].ID); o.Outcome != climate.HealReplanned {
		t.Fatalf("healing %+v", o)
	}
	got := e.lease(t, l.ID)
	after := slotsByHost(&got.Reservations[0])
	third := other2(hosts, down, kept)[0]
	if len(after) != 2 || after[kept] != 1 || after[third] != 1 || after[down] != 0 {
		t.Fatalf("slots after healing %v (down %s, kept %s, third %s)", after, down, kept, third)
	}
	for _, a := range got.Reservations[0].Allocations {
		if a.ResourceID == kept && !slices.Contains(l.Reservations[0].Allocations, a) {
			t.Errorf("the slot on %s was rewritten: %+v", kept, a)
		}
	}
}

// The planner never places anything on a host during its maintenance: whole hosts,
// instance slots, the earliest-window search and the timeline all see it busy, and a
// window until further notice keeps it busy for good.
func TestPlannerAvoidsHostsInMaintenance(t *testing.T) {
	e := healSetup(t)
	ctx := context.Background()
	hosts := addHosts(t, e.m, 2, map[string]string{"vcpus": "8", "memory_mb": "16384"})
	a, b := hosts[0], hosts[1]
	e.maintain(t, a, time.Hour, 5*time.Hour, "")

	_, err := e.m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "x", Start: at(2 * time.Hour), End: at(3 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(2, 2, "")}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available")
	if got := hostsOf(create(t, e.m, alice, 4*time.Hour, 6*time.Hour, hostReq(1, 2, ""))); !slices.Equal(got, []string{b}) {
		t.Fatalf("hosts %v overlapping the window, want only %s", got, b)
	}
	// Slots: b is held whole over [4h, 6h); a is in maintenance until 5h.
	_, err = e.m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "s", Start: at(4 * time.Hour), End: at(5 * time.Hour),
		Reservations: []climate.ReservationRequest{instReq(1, 1, 512, nil)}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available")
	if l := create(t, e.m, alice, 5*time.Hour, 6*time.Hour, instReq(1, 1, 512, nil)); !slices.Equal(hostsOf(l), []string{a}) {
		t.Fatalf("slots on %v, want %s right after its window", hostsOf(l), a)
	}

	// Earliest: two hosts for 2h are free together only once the window and b's lease end.
	l, err := e.m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "e", Start: climate.Date{Earliest: true}, Duration: 2 * time.Hour,
		Reservations: []climate.ReservationRequest{hostReq(2, 2, "")}})
	if err != nil || !l.Start.Equal(t0.Add(6*time.Hour)) {
		t.Fatalf("earliest: %v, %v; want a start at t0+6h", l, err)
	}
	slots, err := e.m.EarliestSlots(ctx, alice, climate.SlotQuery{Count: 1, Duration: 30 * time.Minute, After: t0.Add(90 * time.Minute)})
	if err != nil || len(slots) == 0 || !slots[0].Start.Equal(t0.Add(90*time.Minute)) || slots[0].Free != 1 {
		t.Fatalf("earliest slots: %+v, %v; want one host (b) free at once", slots, err)
	}
	tl, err := e.m.Timeline(ctx, alice, climate.TimelineQuery{From: t0, To: t0.Add(4 * time.Hour), Step: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var free []int
	for _, bk := range tl.Buckets {
		free = append(free, bk.Free)
	}
	if !slices.Equal(free, []int{2, 1, 1, 1}) {
		t.Fatalf("timeline free %v, want a busy from 1h", free)
	}

	// Until further notice: b alone, ever.
	e.maintain(t, a, 8*time.Hour, 0, "decommissioning")
	_, err = e.m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "never", Start: climate.Date{Earliest: true}, Duration: 2 * time.Hour,
		Reservations: []climate.ReservationRequest{hostReq(2, 2, "")}})
	wantCode(t, err, climate.CodeConflict, "Not enough resources available")
	if l := create(t, e.m, alice, 100*24*time.Hour, 101*24*time.Hour, hostReq(1, 2, "")); !slices.Equal(hostsOf(l), []string{b}) {
		t.Fatalf("a lease long after: %v, want only %s", hostsOf(l), b)
	}
}

// Bad requests are refused with 4xx codes and change nothing: no window, no lease change,
// the inventory revision where it was.
func TestMaintenanceBadInput(t *testing.T) {
	e := healSetup(t)
	ctx := context.Background()
	hosts := addHosts(t, e.m, 2, nil)
	l := create(t, e.m, alice, time.Hour, 3*time.Hour, hostReq(1, 1, ""))
	h := l.Reservations[0].Allocations[0].ResourceID
	revision := func() int64 {
		var rev int64
		if err := e.st.View(ctx, func(tx climate.Tx) (err error) { rev, err = tx.InventoryRevision(ctx); return err }); err != nil {
			t.Fatal(err)
		}
		return rev
	}
	rev := revision()
	cases := []struct {
		name string
		who  climate.Identity
		host string
		req  climate.MaintenanceRequest
		code climate.Code
		text string
	}{
		{"member", alice, h, climate.MaintenanceRequest{Start: at(0)}, climate.CodeForbidden, "Policy doesn't allow climate:oshosts:maintenance to be performed."},
		{"reader", reader, h, climate.MaintenanceRequest{Start: at(0)}, climate.CodeForbidden, "Policy doesn't allow climate:oshosts:maintenance to be performed."},
		{"unknown host", admin, "999", climate.MaintenanceRequest{Start: at(0)}, climate.CodeNotFound, "Object with {'host_id': '999'} not found"},
		{"end before start", admin, h, climate.MaintenanceRequest{Start: at(2 * time.Hour), End: at(time.Hour)}, climate.CodeInvalid, "must be later than its start"},
		{"end equal start", admin, h, climate.MaintenanceRequest{Start: at(time.Hour), End: at(time.Hour)}, climate.CodeInvalid, "must be later than its start"},
		{"end in the past", admin, h, climate.MaintenanceRequest{Start: at(-2 * time.Hour), End: at(-time.Hour)}, climate.CodeInvalid, "later than the current date"},
		{"end now", admin, h, climate.MaintenanceRequest{Start: at(-time.Hour), End: climate.Date{Now: true}}, climate.CodeInvalid, "cannot end \"now\""},
		{"no start", admin, h, climate.MaintenanceRequest{End: at(time.Hour)}, climate.CodeInvalid, "Missing parameter start"},
		{"earliest", admin, h, climate.MaintenanceRequest{Start: climate.Date{Earliest: true}}, climate.CodeInvalid, "not \"earliest\""},
		{"NUL in reason", admin, h, climate.MaintenanceRequest{Start: at(0), Reason: "a\x00b"}, climate.CodeInvalid, "NUL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.m.CreateMaintenance(ctx, tc.who, tc.host, tc.req)
			wantCode(t, err, tc.code, tc.text)
		})
	}
	_, err := e.m.ListMaintenances(ctx, alice, "")
	wantCode(t, err, climate.CodeForbidden, "climate:oshosts:maintenance")
	_, err = e.m.ListMaintenances(ctx, admin, "999")
	wantCode(t, err, climate.CodeNotFound, "host_id")
	w, _ := e.maintain(t, hosts[0], 10*time.Hour, 11*time.Hour, "")
	rev = revision()
	_, err = e.m.DeleteMaintenance(ctx, alice, hosts[0], w.ID)
	wantCode(t, err, climate.CodeForbidden, "climate:oshosts:maintenance")
	_, err = e.m.DeleteMaintenance(ctx, admin, hosts[1], w.ID)
	wantCode(t, err, climate.CodeNotFound, "maintenance_id")
	_, err = e.m.DeleteMaintenance(ctx, admin, hosts[0], "nope")
	wantCode(t, err, climate.CodeNotFound, "maintenance_id")
	_, err = e.m.GetMaintenance(ctx, admin, hosts[1], w.ID)
	wantCode(t, err, climate.CodeNotFound, "maintenance_id")

	if got := revision(); got != rev {
		t.Errorf("refused requests moved the inventory revision from %d to %d", rev, got)
	}
	ms, err := e.m.ListMaintenances(ctx, admin, "")
	if err != nil || len(ms) != 1 || ms[0].ID != w.ID {
		t.Fatalf("windows after refusals: %+v, %v", ms, err)
	}
	got := e.lease(t, l.ID)
	if got.Degraded || !slices.Equal(hostsOf(got), []string{h}) || !got.UpdatedAt.IsZero() {
		t.Fatalf("the lease changed: %+v", got)
	}
	if ns := e.notifications(t, l.ID); len(ns) != 1 {
		t.Fatalf("notifications %v, want lease.create only", ns)
	}
}

// Leases starting or ending meanwhile are left alone and reported skipped; leases
// created concurrently with a window never end up on its host unhealed.
func TestMaintenanceSkipsLeasesInTransition(t *testing.T) {
	e := healSetup(t)
	ctx := context.Background()
	addHosts(t, e.m, 2, nil)
	l := create(t, e.m, alice, time.Hour, 3*time.Hour, hostReq(1, 1, ""))
	err := e.st.Update(ctx, func(tx climate.Tx) error {
		cur, err := tx.GetLease(ctx, l.ID)
		if err != nil {
			return err
		}
		cur.Status = climate.LeaseStarting
		return tx.UpdateLease(ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	down := hostsOf(l)[0]
	_, healed := e.maintain(t, down, 0, 0, "")
	if o := outcome(t, healed, l.Reservations[0].ID); o.Outcome != climate.HealSkipped || !strings.Contains(o.Detail, "STARTING") {
		t.Fatalf("healing %+v", o)
	}
	if got := e.lease(t, l.ID); got.Degraded || !slices.Equal(hostsOf(got), []string{down}) {
		t.Fatalf("a lease in transition was changed: %+v", got)
	}
}

// Many windows and leases at once: after every change, no allocation planned since a
// window exists overlaps it, and every lease holding a host in maintenance is degraded
// or was moved.
func TestMaintenanceConcurrentWithLeases(t *testing.T) {
	e := healSetup(t)
	ctx := context.Background()
	hosts := addHosts(t, e.m, 6, nil)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				start := time.Duration(1+(w*10+i)%8) * time.Hour
				_, _ = e.m.CreateLease(ctx, alice, climate.LeaseRequest{Name: fmt.Sprint("c", w, i), Start: at(start), End: at(start + 2*time.Hour),
					Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
			}
		}(w)
	}
	var ids []string
	for i, h := range hosts[:3] {
		w, _, err := e.m.CreateMaintenance(ctx, admin, h, climate.MaintenanceRequest{Start: at(time.Duration(i+2) * time.Hour), End: at(time.Duration(i+6) * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID)
	}
	wg.Wait()
	ms, err := e.m.ListMaintenances(ctx, admin, "")
	if err != nil || len(ms) != 3 {
		t.Fatalf("windows %+v, %v", ms, err)
	}
	leases, _, err := manager.CollectLeases(ctx, e.m, admin, climate.LeaseQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		for _, r := range l.Reservations {
			for _, a := range r.Allocations {
				for _, w := range ms {
					if w.HostID == a.ResourceID && w.Overlaps(a.Start, a.End) && (!r.MissingResources || !l.Degraded) {
						t.Errorf("lease %s holds host %s during window %s unflagged", l.ID, a.ResourceID, w.ID)
					}
				}
			}
		}
	}
	// Every window deleted: nothing is left degraded.
	for i, id := range ids {
		if _, err := e.m.DeleteMaintenance(ctx, admin, hosts[i], id); err != nil {
			t.Fatal(err)
		}
	}
	leases, _, _ = manager.CollectLeases(ctx, e.m, admin, climate.LeaseQuery{})
	for _, l := range leases {
		if l.Degraded {
			t.Errorf("lease %s still degraded with every host back", l.ID)
		}
	}
}

// A retry lease waiting while the only host is in maintenance is booked once the window
// is deleted: the host's return wakes the waiting leases.
func TestMaintenanceDeletedWakesWaitingLeases(t *testing.T) {
	e := healSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hosts := addHosts(t, e.m, 1, nil)
	w, _ := e.maintain(t, hosts[0], 0, 0, "")
	l, err := e.m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "patient", Type: climate.LeaseRetry, Start: at(time.Hour), End: at(2 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	if err != nil || l.Status != climate.LeaseWaiting {
		t.Fatalf("retry lease while the host is down: %+v, %v", l, err)
	}
	go e.m.RunRetries(ctx)
	if _, err := e.m.DeleteMaintenance(ctx, admin, hosts[0], w.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := e.lease(t, l.ID)
		if got.Status == climate.LeasePending && slices.Equal(hostsOf(got), hosts) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiting lease was not booked once the host was back: %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A window that ends by itself heals the leases it degraded, at its end: the retry worker
// times it (before, the flags stayed until the next window change).
func TestMaintenanceEndingByItselfRecovers(t *testing.T) {
	e := healSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addHosts(t, e.m, 2, nil)
	l := create(t, e.m, alice, time.Hour, 3*time.Hour, hostReq(1, 1, ""))
	create(t, e.m, bob, time.Hour, 3*time.Hour, hostReq(1, 1, "")) // the other host, taken
	down := l.Reservations[0].Allocations[0].ResourceID
	go e.m.RunRetries(ctx)
	end := t0.Add(2 * time.Hour)
	armed := e.clk.TimerAt(end)
	e.maintain(t, down, 0, 2*time.Hour, "")
	if got := e.lease(t, l.ID); !got.Degraded {
		t.Fatal("not degraded by the window")
	}
	<-armed // the worker waits for the window's end
	e.clk.Set(end)
	deadline := time.Now().Add(10 * time.Second)
	for e.lease(t, l.ID).Degraded {
		if time.Now().After(deadline) {
			t.Fatal("still degraded after its window ended")
		}
		time.Sleep(10 * time.Millisecond) // the worker heals on its own goroutine
	}
	if r := e.lease(t, l.ID).Reservations[0]; r.MissingResources {
		t.Fatalf("reservation still missing resources: %+v", r)
	}
}
