package manager_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
)

const notice = 10 * time.Minute

// preemptSetup is a manager with a 10-minute preemption notice and the given cleaning
// time, over SQLite, with n hosts.
func preemptSetup(t *testing.T, cleaning time.Duration, n int) (*manager.Manager, climate.Store, *clock.Fake, []string) {
	t.Helper()
	st := openStore(t)
	clk := clock.NewFake(t0)
	m := manager.New(st, clk, manager.Config{BeforeEnd: manager.DefaultBeforeEnd, Cleaning: cleaning, PreemptionNotice: notice})
	return m, st, clk, addHosts(t, m, n, nil)
}

func preemptible(name string, start, end time.Duration, onPreempt climate.PreemptAction, min, max int) climate.LeaseRequest {
	return climate.LeaseRequest{Name: name, Start: at(start), End: at(end), Preemptible: true, OnPreempt: onPreempt,
		Reservations: []climate.ReservationRequest{hostReq(min, max, "")}}
}

func lease(name string, start, end time.Duration, n int) climate.LeaseRequest {
	return climate.LeaseRequest{Name: name, Start: at(start), End: at(end), Reservations: []climate.ReservationRequest{hostReq(n, n, "")}}
}

func mustCreate(t *testing.T, m *manager.Manager, req climate.LeaseRequest) *climate.Lease {
	t.Helper()
	l, err := m.CreateLease(context.Background(), alice, req)
	if err != nil {
		t.Fatalf("lease %s: %v", req.Name, err)
	}
	return l
}

func get(t *testing.T, m *manager.Manager, id string) *climate.Lease {
	t.Helper()
	l, err := m.GetLease(context.Background(), admin, id)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// allocEnds maps a lease's hosts to when it holds each until.
func allocEnds(l *climate.Lease) map[string]time.Time {
	out := map[string]time.Time{}
	for _, r := range l.Reservations {
		for _, a := range r.Allocations {
			out[a.ResourceID] = a.End
		}
	}
	return out
}

// eventTimes lists a lease's events of type ty that are still to fire, in time order.
func eventTimes(l *climate.Lease, ty climate.EventType) []time.Time {
	var out []time.Time
	for _, e := range l.Events {
		if e.Type == ty && e.Status == climate.EventUndone {
			out = append(out, e.Time)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// assertNoOverlap checks the store: no resource in two allocations closer than cleaning,
// unless both hold slots of it.
func assertNoOverlap(t *testing.T, st climate.Store, cleaning time.Duration) {
	t.Helper()
	var allocs []climate.Allocation
	err := st.View(context.Background(), func(tx climate.Tx) error {
		var err error
		allocs, err = tx.ListAllocations(context.Background(), climate.AllocationFilter{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range allocs {
		for _, b := range allocs[i+1:] {
			if a.ResourceID == b.ResourceID && !(a.Shared() && b.Shared()) && climate.Overlaps(a.Start, a.End.Add(cleaning), b.Start, b.End.Add(cleaning)) {
				t.Errorf("host %s: lease %s [%s, %s) and lease %s [%s, %s) overlap (cleaning %s)", a.ResourceID,
					a.LeaseID, a.Start.Format(time.TimeOnly), a.End.Format(time.TimeOnly), b.LeaseID, b.Start.Format(time.TimeOnly), b.End.Format(time.TimeOnly), cleaning)
			}
		}
	}
}

// A preemptible lease uses a host reserved later in its window until that reservation
// (less the cleaning time), and a free host for its whole window; its notice is due
// the notice before the host is given back.
func TestPreemptibleUsesReservedButIdleHosts(t *testing.T) {
	const cleaning = 15 * time.Minute
	m, st, _, hosts := preemptSetup(t, cleaning, 2)
	r := mustCreate(t, m, lease("reserved", 4*time.Hour, 6*time.Hour, 1))
	reserved := hostsOf(r)[0]
	other := hosts[0]
	if other == reserved {
		other = hosts[1]
	}
	p := mustCreate(t, m, preemptible("sweep", 0, 10*time.Hour, "", 1, 2))
	if !p.Preemptible || p.OnPreempt != climate.PreemptShrink || !p.End.Equal(t0.Add(10*time.Hour)) {
		t.Fatalf("preemptible lease: preemptible %v, on_preempt %q, end %s", p.Preemptible, p.OnPreempt, p.End)
	}
	ends := allocEnds(p)
	if !ends[other].Equal(t0.Add(10*time.Hour)) || !ends[reserved].Equal(t0.Add(4*time.Hour-cleaning)) {
		t.Errorf("holds %v; want %s until 10h and %s until 4h less the cleaning time", ends, other, reserved)
	}
	if got := eventTimes(p, climate.EventPreemptLease); len(got) != 1 || !got[0].Equal(t0.Add(4*time.Hour-cleaning-notice)) {
		t.Errorf("preempt_lease events %v; want one at 4h - cleaning - notice", got)
	}
	assertNoOverlap(t, st, cleaning)

	// With on_preempt end, the same lease ends when its first host is given back.
	m2, st2, _, _ := preemptSetup(t, 0, 2)
	mustCreate(t, m2, lease("reserved", 4*time.Hour, 6*time.Hour, 1))
	p2 := mustCreate(t, m2, preemptible("sweep", 0, 10*time.Hour, climate.PreemptEnd, 2, 2))
	if !p2.End.Equal(t0.Add(4*time.Hour)) || p2.Event(climate.EventEndLease).Time != t0.Add(4*time.Hour) {
		t.Errorf("on_preempt end: lease ends %s (end event %s), want 4h", p2.End, p2.Event(climate.EventEndLease).Time)
	}
	for h, end := range allocEnds(p2) {
		if !end.Equal(t0.Add(4 * time.Hour)) {
			t.Errorf("on_preempt end: host %s held until %s, want 4h", h, end)
		}
	}
	assertNoOverlap(t, st2, 0)
}

// A lease booked later takes its hosts back from preemptible leases at its start (less
// the cleaning time): shrink keeps the other hosts, end ends the lease; each gets a notice
// event and a lease.update. A host that needs no taking back goes first.
func TestReservingLeaseTakesHostsBack(t *testing.T) {
	for _, onPreempt := range []climate.PreemptAction{climate.PreemptShrink, climate.PreemptEnd} {
		t.Run(string(onPreempt), func(t *testing.T) {
			const cleaning = 5 * time.Minute
			m, st, _, hosts := preemptSetup(t, cleaning, 3)
			p := mustCreate(t, m, preemptible("sweep", 0, 10*time.Hour, onPreempt, 2, 2))
			idle := missing(hosts, hostsOf(p))
			r := mustCreate(t, m, lease("train", 3*time.Hour, 5*time.Hour, 2))
			if !slices.Contains(hostsOf(r), idle) {
				t.Errorf("reserving lease got %v: the idle host %s should be taken first", hostsOf(r), idle)
			}
			taken := missing(hostsOf(r), []string{idle})
			p = get(t, m, p.ID)
			cut := t0.Add(3*time.Hour - cleaning)
			ends := allocEnds(p)
			kept := missing(hostsOf(p), []string{taken})
			if !ends[taken].Equal(cut) {
				t.Errorf("taken host %s held until %s, want %s", taken, ends[taken], cut)
			}
			wantEnd, keptEnd := t0.Add(10*time.Hour), t0.Add(10*time.Hour)
			if onPreempt == climate.PreemptEnd {
				wantEnd, keptEnd = cut, cut
			}
			if !p.End.Equal(wantEnd) || !ends[kept].Equal(keptEnd) || !p.Event(climate.EventEndLease).Time.Equal(wantEnd) {
				t.Errorf("after the take-back: lease ends %s, kept host %s until %s; want %s and %s", p.End, kept, ends[kept], wantEnd, keptEnd)
			}
			if got := eventTimes(p, climate.EventPreemptLease); len(got) != 1 || !got[0].Equal(cut.Add(-notice)) {
				t.Errorf("preempt_lease events %v; want one at %s", got, cut.Add(-notice))
			}
			if !p.UpdatedAt.Equal(t0) {
				t.Errorf("updated_at %s", p.UpdatedAt)
			}
			assertNoOverlap(t, st, cleaning)
		})
	}
}

// missing returns the elements of all that are not in some (one, in these tests).
func missing(all, some []string) string {
	for _, h := range all {
		if !slices.Contains(some, h) {
			return h
		}
	}
	return ""
}

// A lease starting sooner than the notice (and the cleaning time) cannot take a host
// back, nor can an immediate lease, nor another preemptible lease: each is refused.
func TestNoTakeBackWithoutNotice(t *testing.T) {
	m, st, _, _ := preemptSetup(t, 0, 1)
	mustCreate(t, m, preemptible("sweep", 0, 10*time.Hour, "", 1, 1))
	for _, req := range []climate.LeaseRequest{
		lease("soon", 5*time.Minute, time.Hour, 1),
		{Name: "now", Type: climate.LeaseImmediate, Start: climate.Date{Now: true}, End: at(time.Hour), Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}},
		preemptible("another", time.Hour, 2*time.Hour, "", 1, 1),
	} {
		if _, err := m.CreateLease(context.Background(), alice, req); climate.ErrorCode(err) != climate.CodeConflict {
			t.Errorf("lease %s: %v, want a 409", req.Name, err)
		}
	}
	// At exactly the notice ahead, it can.
	mustCreate(t, m, lease("in-time", notice, time.Hour, 1))
	assertNoOverlap(t, st, 0)
}

// A best-effort lease that does not fit now hunts: it takes hosts back from preemptible
// leases from a notice ahead and starts then.
func TestBestEffortHuntReclaimsPreemptible(t *testing.T) {
	m, st, _, _ := preemptSetup(t, 0, 2)
	p := mustCreate(t, m, preemptible("sweep", 0, 10*time.Hour, "", 2, 2))
	be, err := m.CreateLease(context.Background(), alice, climate.LeaseRequest{Name: "hunt", Type: climate.LeaseBestEffort,
		Start: climate.Date{Now: true}, End: at(2 * time.Hour), Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	if err != nil || be.Status != climate.LeaseInProgress {
		t.Fatalf("best-effort lease: %+v, %v; want IN_PROGRESS", be, err)
	}
	if n, err := m.RetryWaiting(context.Background()); err != nil || n != 1 {
		t.Fatalf("RetryWaiting: %d booked, %v; want the hunt to book it", n, err)
	}
	be = get(t, m, be.ID)
	if be.Status != climate.LeasePending || !be.Start.Equal(t0.Add(notice)) || !be.End.Equal(t0.Add(notice+2*time.Hour)) {
		t.Errorf("hunted lease: %s from %s to %s; want PENDING from the notice ahead, for its 2 hours", be.Status, be.Start, be.End)
	}
	p = get(t, m, p.ID)
	if ends := allocEnds(p); !ends[hostsOf(be)[0]].Equal(t0.Add(notice)) {
		t.Errorf("preemptible lease holds %v; want %s given back at the notice", ends, hostsOf(be)[0])
	}
	// A retry lease does not hunt: it waits for capacity to free.
	rl, err := m.CreateLease(context.Background(), alice, climate.LeaseRequest{Name: "patient", Type: climate.LeaseRetry,
		Start: climate.Date{Now: true}, End: at(2 * time.Hour), Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	if err != nil || rl.Status != climate.LeaseWaiting {
		t.Fatalf("retry lease: %+v, %v", rl, err)
	}
	if n, err := m.RetryWaiting(context.Background()); err != nil || n != 0 {
		t.Errorf("RetryWaiting booked %d (%v); a retry lease does not take hosts back", n, err)
	}
	assertNoOverlap(t, st, 0)
}

// A retry lease with max_retries gives up after that many re-plans that did not fit,
// with a notification saying so; re-plans where nothing it could use was freed do not
// count.
func TestMaxRetriesGivesUp(t *testing.T) {
	m, st, clk, _ := preemptSetup(t, 0, 1)
	holder := mustCreate(t, m, lease("holder", 0, 10*time.Hour, 1))
	w, err := m.CreateLease(context.Background(), alice, climate.LeaseRequest{Name: "patient", Type: climate.LeaseRetry, MaxRetries: 2,
		Start: climate.Date{Now: true}, End: at(2 * time.Hour), Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	if err != nil || w.Status != climate.LeaseWaiting || w.MaxRetries != 2 {
		t.Fatalf("retry lease: %+v, %v", w, err)
	}
	for i := 1; i <= 2; i++ {
		clk.Advance(time.Minute)
		if _, err := m.RetryWaiting(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := get(t, m, w.ID)
		if i == 1 && (got.Status != climate.LeaseWaiting || got.Retries != 1) {
			t.Fatalf("after one re-plan: %s, %d retries", got.Status, got.Retries)
		}
		if i == 2 && (got.Status != climate.LeaseFailed || got.Retries != 2) {
			t.Fatalf("after two re-plans: %s, %d retries; want FAILED", got.Status, got.Retries)
		}
	}
	var last climate.Notification
	err = st.View(context.Background(), func(tx climate.Tx) error {
		ns, err := tx.Notifications(context.Background(), 0, 100)
		for _, n := range ns {
			if n.LeaseID == w.ID {
				last = n
			}
		}
		return err
	})
	if err != nil || last.EventType != "lease.event.retry_deadline" || !strings.Contains(last.Error, "gave up after 2 re-plans") {
		t.Errorf("last notification %s %q (%v)", last.EventType, last.Error, err)
	}
	// The holder ends: the failed lease is not booked.
	if err := m.DeleteLease(context.Background(), alice, holder.ID); err != nil {
		t.Fatal(err)
	}
	if n, _ := m.RetryWaiting(context.Background()); n != 0 {
		t.Errorf("a failed lease was booked")
	}
}

// A preemptible lease whose host goes into maintenance is moved to a host free until its
// end, and stays preemptible there. (It took the host reserved from 5h, so it ends then.)
func TestHealingMovesPreemptibleLease(t *testing.T) {
	m, st, _, hosts := preemptSetup(t, 0, 3)
	mustCreate(t, m, lease("later", 5*time.Hour, 6*time.Hour, 1)) // one host is reserved later
	p := mustCreate(t, m, preemptible("sweep", time.Hour, 10*time.Hour, "", 1, 1))
	down := hostsOf(p)[0]
	if _, _, err := m.CreateMaintenance(context.Background(), admin, down, climate.MaintenanceRequest{Start: at(2 * time.Hour), End: at(3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	p = get(t, m, p.ID)
	got := p.Reservations[0].Allocations
	if len(got) != 1 || got[0].ResourceID == down || !got[0].Preemptible || !got[0].End.Equal(t0.Add(5*time.Hour)) || !p.End.Equal(t0.Add(5*time.Hour)) || p.Degraded {
		t.Errorf("after maintenance on %s: %+v (lease until %s, degraded %v); want a preemptible allocation on another of %v until 5h", down, got, p.End, p.Degraded, hosts)
	}
	assertNoOverlap(t, st, 0)
}

// Instance slots and floating IPs may be preemptible too: a preemptible reservation of
// them runs over the longest window from its start in which it fits, and a later lease
// takes them back as it takes hosts, cutting preemptible slots on a host only when it
// does not fit beside them.
func TestPreemptibleSlotsAndFloatingIPs(t *testing.T) {
	st := openStore(t)
	m := manager.New(st, clock.NewFake(t0), manager.Config{PreemptionNotice: notice})
	addHosts(t, m, 1, map[string]string{"vcpus": "16", "memory_mb": "65536"})
	addFloatingIPs(t, m, "ext", "172.24.4.1")
	slots := func(name string, start, end time.Duration, amount, vcpus int, preemptible bool) climate.LeaseRequest {
		return climate.LeaseRequest{Name: name, Start: at(start), End: at(end), Preemptible: preemptible,
			Reservations: []climate.ReservationRequest{instReq(amount, vcpus, 1024, nil)}}
	}
	// 8 vCPUs are reserved from 4h: a preemptible 12 vCPUs fit until then only.
	mustCreate(t, m, slots("later", 4*time.Hour, 6*time.Hour, 4, 2, false))
	p := mustCreate(t, m, slots("sweep", 0, 10*time.Hour, 3, 4, true))
	if a := p.Reservations[0].Allocations; len(a) != 1 || !a[0].Preemptible || !a[0].End.Equal(t0.Add(4*time.Hour)) || !p.End.Equal(t0.Add(4*time.Hour)) {
		t.Fatalf("preemptible slots %+v, lease until %s; want them until 4h", a, p.End)
	}
	// 4 vCPUs more from 2h fit beside the 12: nothing is taken back.
	mustCreate(t, m, slots("small", 2*time.Hour, 3*time.Hour, 1, 4, false))
	if got := get(t, m, p.ID); !got.End.Equal(t0.Add(4*time.Hour)) || len(eventTimes(got, climate.EventPreemptLease)) != 1 {
		t.Errorf("a lease that fits beside the preemptible slots took them back: until %s, notices %v", got.End, eventTimes(got, climate.EventPreemptLease))
	}
	// 8 vCPUs from 3h do not: the preemptible slots are cut at 3h.
	mustCreate(t, m, slots("big", 3*time.Hour, 4*time.Hour, 2, 4, false))
	got := get(t, m, p.ID)
	if !got.End.Equal(t0.Add(3*time.Hour)) || !got.Reservations[0].Allocations[0].End.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("after a lease that needs the capacity: until %s, %+v; want cut at 3h", got.End, got.Reservations[0].Allocations)
	}
	if ev := eventTimes(got, climate.EventPreemptLease); len(ev) != 1 || !ev[0].Equal(t0.Add(3*time.Hour-notice)) {
		t.Errorf("notices %v; want one at 3h less the notice", ev)
	}

	// A preemptible floating IP is taken back by a lease that needs the address.
	fp := mustCreate(t, m, climate.LeaseRequest{Name: "ip", Start: at(0), End: at(10 * time.Hour), Preemptible: true, OnPreempt: climate.PreemptEnd,
		Reservations: []climate.ReservationRequest{fipReq("ext", 1)}})
	mustCreate(t, m, climate.LeaseRequest{Name: "needs-ip", Start: at(2 * time.Hour), End: at(3 * time.Hour), Reservations: []climate.ReservationRequest{fipReq("ext", 1)}})
	if got := get(t, m, fp.ID); !got.End.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("preemptible floating IP lease until %s; want ended at 2h", got.End)
	}
	assertNoOverlap(t, st, 0)
}

// Updating a preemptible lease fits it again: extended past a booking of its host, it is
// given the host until that booking, with a notice; moved clear of it, the notice goes.
func TestUpdatePreemptibleLease(t *testing.T) {
	m, st, _, _ := preemptSetup(t, 0, 1)
	p := mustCreate(t, m, preemptible("sweep", time.Hour, 3*time.Hour, "", 1, 1))
	mustCreate(t, m, lease("later", 5*time.Hour, 6*time.Hour, 1))
	u, err := m.UpdateLease(context.Background(), alice, p.ID, climate.LeaseUpdate{End: at(10 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !u.End.Equal(t0.Add(5*time.Hour)) || !allocEnds(u)[hostsOf(u)[0]].Equal(t0.Add(5*time.Hour)) {
		t.Errorf("extended to 10h over a booking at 5h: lease until %s, host until %v; want 5h", u.End, allocEnds(u))
	}
	if ev := eventTimes(u, climate.EventPreemptLease); len(ev) != 1 || !ev[0].Equal(t0.Add(5*time.Hour-notice)) {
		t.Errorf("notices %v; want one at 5h less the notice", ev)
	}
	u, err = m.UpdateLease(context.Background(), alice, p.ID, climate.LeaseUpdate{End: at(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !u.End.Equal(t0.Add(4*time.Hour)) || len(eventTimes(u, climate.EventPreemptLease)) != 0 {
		t.Errorf("shortened to 4h: until %s, notices %v; want 4h and none", u.End, eventTimes(u, climate.EventPreemptLease))
	}
	assertNoOverlap(t, st, 0)
}
