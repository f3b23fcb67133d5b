package openstack

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/notify"
	"climate/sqlite"
)

// testDriver is a driver on a fake Nova whose freepool holds the hosts, with a store
// that has them registered.
type testDriver struct {
	*Driver
	nova  *fakeNova
	hosts map[string]string // Climate id → name
}

func newTestDriver(t *testing.T, hosts ...string) *testDriver {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ids := map[string]string{}
	err = st.Update(context.Background(), func(tx climate.Tx) error {
		for _, h := range hosts {
			host := &climate.Host{HypervisorHostname: h, ServiceName: h, Reservable: true}
			if err := tx.InsertHost(context.Background(), host); err != nil {
				return err
			}
			ids[host.ID] = h
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	nova, compute := newFakeNova(t)
	nova.aggregate(DefaultFreepool, hosts...)
	d := New(Config{Compute: compute, Store: st, Attempts: 3, Backoff: time.Millisecond, PollInterval: time.Millisecond, DeleteTimeout: time.Second})
	return &testDriver{Driver: d, nova: nova, hosts: ids}
}

// lease returns a lease of project "proj" with one physical:host reservation "res-1"
// holding these hosts.
func (d *testDriver) lease(hosts ...string) *climate.Lease {
	r := climate.Reservation{ID: "res-1", ResourceType: climate.ResourceTypeHost}
	for id, name := range d.hosts {
		if slices.Contains(hosts, name) {
			r.Allocations = append(r.Allocations, climate.Allocation{ResourceID: id, ReservationID: r.ID})
		}
	}
	return &climate.Lease{ID: "lease-1", ProjectID: "proj", Reservations: []climate.Reservation{r}}
}

func hostsOf(a *fakeAgg) []string {
	if a == nil {
		return nil
	}
	h := slices.Clone(a.Hosts)
	slices.Sort(h)
	return h
}

func TestStartAndEndAsBlazar(t *testing.T) {
	d := newTestDriver(t, "h1", "h2", "h3")
	l := d.lease("h1", "h2")
	ctx := context.Background()
	if err := d.OnStart(ctx, l); err != nil {
		t.Fatal(err)
	}
	agg := d.nova.byName("res-1")
	if agg == nil {
		t.Fatal("no aggregate named after the reservation")
	}
	if got := hostsOf(agg); !slices.Equal(got, []string{"h1", "h2"}) {
		t.Fatalf("reservation aggregate hosts %v", got)
	}
	if agg.Metadata["availability_zone"] != "blazar_res-1" || agg.Metadata[OwnerKey] != "proj" {
		t.Fatalf("reservation aggregate metadata %v: want zone blazar_res-1 and blazar:owner proj", agg.Metadata)
	}
	if got := hostsOf(d.nova.byName(DefaultFreepool)); !slices.Equal(got, []string{"h3"}) {
		t.Fatalf("freepool hosts after the start %v, want [h3]", got)
	}

	// Servers booted on the hosts during the lease, and one elsewhere.
	d.nova.mu.Lock()
	d.nova.servers["s1"] = fakeServer{host: "h1", project: "proj"}
	d.nova.servers["s2"] = fakeServer{host: "h2", project: "proj"}
	d.nova.servers["other"] = fakeServer{host: "h3", project: "else"}
	d.nova.linger = 3 // each lingers three lists after its delete
	d.nova.mu.Unlock()

	if err := d.OnEnd(ctx, l); err != nil {
		t.Fatal(err)
	}
	d.nova.mu.Lock()
	left := slices.Sorted(maps.Keys(d.nova.servers))
	d.nova.mu.Unlock()
	if !slices.Equal(left, []string{"other"}) {
		t.Fatalf("servers after the end %v, want only [other]", left)
	}
	if d.nova.byName("res-1") != nil {
		t.Fatal("the reservation's aggregate is left after the end")
	}
	if got := hostsOf(d.nova.byName(DefaultFreepool)); !slices.Equal(got, []string{"h1", "h2", "h3"}) {
		t.Fatalf("freepool hosts after the end %v", got)
	}
}

// Each action can run again after a crash at any point and finishes the job without
// duplicates: here, from the states a crash leaves between its steps.
func TestActionsResumeAfterACrash(t *testing.T) {
	ctx := context.Background()
	t.Run("start twice", func(t *testing.T) {
		d := newTestDriver(t, "h1")
		l := d.lease("h1")
		for range 2 {
			if err := d.OnStart(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if n := d.nova.count("POST /os-aggregates"); n != 1 {
			t.Fatalf("%d aggregate creations, want 1", n)
		}
		if got := hostsOf(d.nova.byName("res-1")); !slices.Equal(got, []string{"h1"}) {
			t.Fatalf("aggregate hosts %v", got)
		}
	})
	t.Run("start resumed with the host in both aggregates", func(t *testing.T) {
		d := newTestDriver(t, "h1")
		d.nova.aggregate("res-1", "h1") // made, host added, not yet out of the freepool
		if err := d.OnStart(ctx, d.lease("h1")); err != nil {
			t.Fatal(err)
		}
		if got := hostsOf(d.nova.byName(DefaultFreepool)); len(got) != 0 {
			t.Fatalf("freepool hosts %v, want none", got)
		}
		if a := d.nova.byName("res-1"); a.Metadata[OwnerKey] != "proj" || !slices.Equal(a.Hosts, []string{"h1"}) {
			t.Fatalf("aggregate %+v", a)
		}
	})
	t.Run("end resumed with the host in both aggregates", func(t *testing.T) {
		d := newTestDriver(t, "h1")
		d.nova.aggregate("res-1", "h1") // back in the freepool, not yet out of the aggregate
		if err := d.OnEnd(ctx, d.lease("h1")); err != nil {
			t.Fatal(err)
		}
		if d.nova.byName("res-1") != nil || !slices.Equal(hostsOf(d.nova.byName(DefaultFreepool)), []string{"h1"}) {
			t.Fatalf("aggregate %+v, freepool %+v", d.nova.byName("res-1"), d.nova.byName(DefaultFreepool))
		}
		if n := d.nova.count("POST /os-aggregates/1/action"); n != 0 {
			t.Fatalf("%d freepool actions for a host already there, want 0", n)
		}
	})
	t.Run("end twice", func(t *testing.T) {
		d := newTestDriver(t, "h1")
		l := d.lease("h1")
		if err := d.OnStart(ctx, l); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := d.OnEnd(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(hostsOf(d.nova.byName(DefaultFreepool)), []string{"h1"}) || d.nova.byName("res-1") != nil {
			t.Fatal("not cleaned up")
		}
	})
}

func TestCallsAreRetried(t *testing.T) {
	d := newTestDriver(t, "h1")
	d.nova.fail = []fakeFailure{
		{prefix: "GET /os-aggregates", n: 2, status: 503, body: `{"computeFault": {"code": 503, "message": "busy"}}`},
		{prefix: "POST /os-aggregates/", n: 1, status: 500, body: `{"computeFault": {"code": 500, "message": "oops"}}`},
	}
	if err := d.OnStart(context.Background(), d.lease("h1")); err != nil {
		t.Fatalf("a start through passing failures: %v", err)
	}
	if got := hostsOf(d.nova.byName("res-1")); !slices.Equal(got, []string{"h1"}) {
		t.Fatalf("aggregate hosts %v", got)
	}
}

func TestFailuresCarryNovaMessage(t *testing.T) {
	ctx := context.Background()
	t.Run("refusal is not retried", func(t *testing.T) {
		d := newTestDriver(t, "h1")
		d.nova.fail = []fakeFailure{{prefix: "POST /os-aggregates", n: 5, status: 403,
			body: `{"forbidden": {"code": 403, "message": "Policy doesn't allow os_compute_api:os-aggregates:create to be performed."}}`}}
		err := d.OnStart(ctx, d.lease("h1"))
		if err == nil || !strings.Contains(err.Error(), "Policy doesn't allow os_compute_api:os-aggregates:create") || !strings.Contains(err.Error(), "403") {
			t.Fatalf("error %v: want Nova's message", err)
		}
		if n := d.nova.count("POST /os-aggregates"); n != 1 {
			t.Fatalf("%d attempts of a refused call, want 1", n)
		}
	})
	t.Run("retries run out", func(t *testing.T) {
		d := newTestDriver(t, "h1")
		d.nova.fail = []fakeFailure{{prefix: "GET /os-aggregates", n: 99, status: 503, body: `{"computeFault": {"code": 503, "message": "Nova is down"}}`}}
		err := d.OnStart(ctx, d.lease("h1"))
		if err == nil || !strings.Contains(err.Error(), "Nova is down") {
			t.Fatalf("error %v", err)
		}
		if n := d.nova.count("GET /os-aggregates"); n != 3 {
			t.Fatalf("%d attempts, want 3", n)
		}
	})
	t.Run("host not in the freepool: the moved hosts go back", func(t *testing.T) {
		d := newTestDriver(t, "h1", "h2")
		free := d.nova.byName(DefaultFreepool)
		d.nova.mu.Lock()
		d.nova.aggs[free.ID].Hosts = []string{"h1"} // h2 is elsewhere
		d.nova.mu.Unlock()
		err := d.OnStart(ctx, d.lease("h1", "h2"))
		if err == nil || !strings.Contains(err.Error(), "h2 is not in the freepool") {
			t.Fatalf("error %v", err)
		}
		if got := hostsOf(d.nova.byName(DefaultFreepool)); !slices.Equal(got, []string{"h1"}) || d.nova.byName("res-1") != nil {
			t.Fatalf("after a failed start: freepool %v, aggregate %+v; want h1 back and no aggregate", got, d.nova.byName("res-1"))
		}
	})
	t.Run("no freepool", func(t *testing.T) {
		d := newTestDriver(t, "h1")
		free := d.nova.byName(DefaultFreepool)
		d.nova.mu.Lock()
		delete(d.nova.aggs, free.ID)
		d.nova.mu.Unlock()
		if err := d.OnStart(ctx, d.lease("h1")); err == nil || !strings.Contains(err.Error(), `no freepool aggregate "freepool"`) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("servers that do not go", func(t *testing.T) {
		d := newTestDriver(t, "h1")
		l := d.lease("h1")
		if err := d.OnStart(ctx, l); err != nil {
			t.Fatal(err)
		}
		d.nova.mu.Lock()
		d.nova.servers["s1"] = fakeServer{host: "h1", project: "proj"}
		d.nova.stuck = true
		d.nova.mu.Unlock()
		d.cfg.DeleteTimeout = 50 * time.Millisecond
		err := d.OnEnd(ctx, l)
		if err == nil || !strings.Contains(err.Error(), "servers s1 on hosts h1 were not deleted within 50ms") {
			t.Fatalf("error %v", err)
		}
		if n := d.nova.count("DELETE /servers/s1"); n != 1 {
			t.Fatalf("%d deletes of a server being deleted, want 1", n)
		}
		if got := hostsOf(d.nova.byName("res-1")); !slices.Equal(got, []string{"h1"}) {
			t.Fatalf("a host with servers left its aggregate: %v", got)
		}
	})
}

// Reservations of other types are left to their own drivers.
func TestOtherTypesUntouched(t *testing.T) {
	d := newTestDriver(t, "h1")
	l := d.lease("h1")
	l.Reservations[0].ResourceType = "virtual:network"
	if err := d.OnStart(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if d.nova.byName("res-1") != nil {
		t.Fatal("an aggregate for a network reservation")
	}
}

// Deleting a started lease releases its hosts in Nova through its lease.delete
// notification (the payload notify writes), as Blazar ends a deleted lease.
func TestDeletedLeaseReleased(t *testing.T) {
	d := newTestDriver(t, "h1", "h2")
	l := d.lease("h1")
	ctx := context.Background()
	if err := d.OnStart(ctx, l); err != nil {
		t.Fatal(err)
	}
	d.nova.mu.Lock()
	d.nova.servers["s1"] = fakeServer{host: "h1", project: "proj"}
	d.nova.mu.Unlock()
	n, err := notify.New(climate.NotifyLeaseDelete, l, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	del := Changes{Driver: d.Driver}
	if !del.Accepts(n) {
		t.Fatal("lease.delete not accepted")
	}
	for range 2 { // delivered at least once
		if err := del.Deliver(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	d.nova.mu.Lock()
	left := len(d.nova.servers)
	d.nova.mu.Unlock()
	if left != 0 || d.nova.byName("res-1") != nil || !slices.Equal(hostsOf(d.nova.byName(DefaultFreepool)), []string{"h1", "h2"}) {
		t.Fatalf("after the deletion: %d servers, aggregate %+v, freepool %+v", left, d.nova.byName("res-1"), d.nova.byName(DefaultFreepool))
	}
	if del.Accepts(&climate.Notification{EventType: climate.NotifyEvent(climate.EventStartLease)}) {
		t.Fatal("accepts lease.event.start_lease (the engine's start does it)")
	}
}

// A host taken back from a preemptible lease is in that lease's aggregate, not in the
// freepool, when the reserving lease starts: it moves over (its servers deleted first)
// once Climate says the preemptible reservation no longer holds it, and not before.
func TestHostTakenBackFromPreemptibleLease(t *testing.T) {
	ctx := context.Background()
	d := newTestDriver(t, "h1")
	var hostID string
	for id := range d.hosts {
		hostID = id
	}
	// The preemptible lease's reservation "pre-r1" held h1 until a second ago.
	now := time.Now()
	pre := &climate.Lease{ID: "pre", Name: "pre", ProjectID: "other", Start: now.Add(-time.Hour), End: now.Add(time.Hour),
		Status: climate.LeaseActive, CreatedAt: now, Preemptible: true,
		Reservations: []climate.Reservation{{ID: "pre-r1", LeaseID: "pre", ResourceType: climate.ResourceTypeHost, Status: climate.ReservationActive,
			Min: 1, Max: 1, CreatedAt: now, Allocations: []climate.Allocation{{ID: "pre-a1", ReservationID: "pre-r1", LeaseID: "pre",
				ResourceID: hostID, Start: now.Add(-time.Hour), End: now.Add(time.Second), Preemptible: true}}}}}
	if err := d.cfg.Store.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, pre) }); err != nil {
		t.Fatal(err)
	}
	free := d.nova.byName(DefaultFreepool)
	d.nova.mu.Lock()
	d.nova.aggs[free.ID].Hosts = nil
	d.nova.mu.Unlock()
	old := d.nova.aggregate("pre-r1", "h1")
	d.nova.mu.Lock()
	d.nova.aggs[old].Metadata[OwnerKey] = "other"
	d.nova.servers["preempted-vm"] = fakeServer{host: "h1", project: "other"}
	d.nova.mu.Unlock()

	// Still held: refused, and nothing moves.
	err := d.OnStart(ctx, d.lease("h1"))
	if err == nil || !strings.Contains(err.Error(), "h1 is in the aggregate of reservation pre-r1, which holds it") {
		t.Fatalf("a start on a host still held: %v", err)
	}
	if got := hostsOf(d.nova.byName("pre-r1")); !slices.Equal(got, []string{"h1"}) {
		t.Fatalf("the holder's aggregate %v", got)
	}

	// Taken back (the allocation ended): the host moves, its servers gone.
	err = d.cfg.Store.Update(ctx, func(tx climate.Tx) error {
		pre.Reservations[0].Allocations[0].End = now.Add(-time.Second)
		return tx.UpdateLease(ctx, pre)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.OnStart(ctx, d.lease("h1")); err != nil {
		t.Fatal(err)
	}
	d.nova.mu.Lock()
	_, vmLeft := d.nova.servers["preempted-vm"]
	d.nova.mu.Unlock()
	if vmLeft || !slices.Equal(hostsOf(d.nova.byName("res-1")), []string{"h1"}) || len(hostsOf(d.nova.byName("pre-r1"))) != 0 {
		t.Fatalf("after the handoff: preempted server left %v, new aggregate %v, old %v", vmLeft, hostsOf(d.nova.byName("res-1")), hostsOf(d.nova.byName("pre-r1")))
	}
	// The preemptible lease's end then releases nothing of h1's.
	if err := d.OnEnd(ctx, pre); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hostsOf(d.nova.byName("res-1")), []string{"h1"}) || d.nova.byName("pre-r1") != nil {
		t.Fatalf("after the preempted lease's end: new aggregate %v, old %+v", hostsOf(d.nova.byName("res-1")), d.nova.byName("pre-r1"))
	}
}

// An update of an active lease brings its aggregate in step with the hosts it holds now.
func TestActiveLeaseUpdateSynced(t *testing.T) {
	ctx := context.Background()
	d := newTestDriver(t, "h1", "h2", "h3")
	ids := map[string]string{}
	for id, name := range d.hosts {
		ids[name] = id
	}
	now := time.Now()
	alloc := func(h string) climate.Allocation {
		return climate.Allocation{ID: "a-" + h, ReservationID: "res-1", LeaseID: "lease-1", ResourceID: ids[h], Start: now.Add(-time.Minute), End: now.Add(time.Hour)}
	}
	l := &climate.Lease{ID: "lease-1", Name: "l", ProjectID: "proj", Start: now.Add(-time.Minute), End: now.Add(time.Hour), Status: climate.LeaseActive, CreatedAt: now,
		Reservations: []climate.Reservation{{ID: "res-1", LeaseID: "lease-1", ResourceType: climate.ResourceTypeHost, Status: climate.ReservationActive,
			Min: 1, Max: 1, CreatedAt: now, Allocations: []climate.Allocation{alloc("h1"), alloc("h3")}}}}
	if err := d.cfg.Store.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, l) }); err != nil {
		t.Fatal(err)
	}
	// Started with h1 and h3; the update then holds h1 and h2.
	if err := d.OnStart(ctx, l); err != nil {
		t.Fatal(err)
	}
	d.nova.mu.Lock()
	d.nova.servers["on-h3"] = fakeServer{host: "h3", project: "proj"}
	d.nova.mu.Unlock()
	err := d.cfg.Store.Update(ctx, func(tx climate.Tx) error {
		l.Reservations[0].Allocations = []climate.Allocation{alloc("h1"), alloc("h2")}
		return tx.UpdateLease(ctx, l)
	})
	if err != nil {
		t.Fatal(err)
	}
	n := &climate.Notification{EventType: climate.NotifyLeaseUpdate, LeaseID: "lease-1"}
	c := Changes{Driver: d.Driver}
	for range 2 { // at least once
		if err := c.Deliver(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	d.nova.mu.Lock()
	_, left := d.nova.servers["on-h3"]
	d.nova.mu.Unlock()
	if got := hostsOf(d.nova.byName("res-1")); !slices.Equal(got, []string{"h1", "h2"}) || left ||
		!slices.Equal(hostsOf(d.nova.byName(DefaultFreepool)), []string{"h3"}) {
		t.Fatalf("after the update: aggregate %v, freepool %v, h3's server left %v", got, hostsOf(d.nova.byName(DefaultFreepool)), left)
	}
	// An update of a lease that has not started, or no longer exists, does nothing.
	if err := c.Deliver(ctx, &climate.Notification{EventType: climate.NotifyLeaseUpdate, LeaseID: "gone"}); err != nil {
		t.Fatal(err)
	}
}

// A preemptible lease ending while a start that took its host back was interrupted (the
// host in both aggregates) leaves the host and its servers to the new holder.
func TestEndLeavesHandedOverHost(t *testing.T) {
	ctx := context.Background()
	d := newTestDriver(t, "h1", "h2")
	pre := d.nova.aggregate("pre-r1", "h1", "h2")
	next := d.nova.aggregate("res-1", "h1")
	free := d.nova.byName(DefaultFreepool)
	d.nova.mu.Lock()
	d.nova.aggs[pre].Metadata[OwnerKey] = "other"
	d.nova.aggs[next].Metadata[OwnerKey] = "proj"
	d.nova.aggs[free.ID].Hosts = nil
	d.nova.servers["new-owners"] = fakeServer{host: "h1", project: "proj"}
	d.nova.servers["preempted"] = fakeServer{host: "h2", project: "other"}
	d.nova.mu.Unlock()
	l := &climate.Lease{ID: "pre", ProjectID: "other", Reservations: []climate.Reservation{{ID: "pre-r1", ResourceType: climate.ResourceTypeHost}}}
	if err := d.OnEnd(ctx, l); err != nil {
		t.Fatal(err)
	}
	d.nova.mu.Lock()
	_, kept := d.nova.servers["new-owners"]
	_, left := d.nova.servers["preempted"]
	d.nova.mu.Unlock()
	if !kept || left {
		t.Fatalf("the new holder's server kept: %v; the preempted lease's left: %v", kept, left)
	}
	if d.nova.byName("pre-r1") != nil || !slices.Equal(hostsOf(d.nova.byName("res-1")), []string{"h1"}) ||
		!slices.Equal(hostsOf(d.nova.byName(DefaultFreepool)), []string{"h2"}) {
		t.Fatalf("after the end: old %+v, new %v, freepool %v", d.nova.byName("pre-r1"), hostsOf(d.nova.byName("res-1")), hostsOf(d.nova.byName(DefaultFreepool)))
	}
}
