package storetest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"climate"
)

// resourceTypeFloatingIP is Blazar's name for floating IP reservations.
const resourceTypeFloatingIP = "virtual:floatingip"

// resourceTypeInstance and resourceTypeFlavorInstance are Blazar's names for instance
// reservations, whose allocations hold slots of shared hosts.
const (
	resourceTypeInstance       = "virtual:instance"
	resourceTypeFlavorInstance = "flavor:instance"
)

// boolPtr returns a pointer to a fresh copy of b.
func boolPtr(b bool) *bool { return &b }

// affinityString shows a reservation's affinity: nil, true or false.
func affinityString(a *bool) string {
	if a == nil {
		return "nil"
	}
	return fmt.Sprint(*a)
}

// fullLease sets every field, with children deliberately out of the contract's order.
func fullLease() *climate.Lease {
	start, end := t0.Add(24*time.Hour), t0.Add(72*time.Hour)
	l := newLease("l1", "p1", start, end, "h3", "h1")
	l.Degraded = true
	l.Status = climate.LeaseActive
	l.Reservations[0].CreatedAt = t0.Add(time.Second)
	l.Reservations[0].MissingResources = true
	l.Reservations[0].ResourcesChanged = true
	l.Reservations[0].ResourceProperties = `["==", "$gpu", "a100"]`
	l.Reservations[0].UpdatedAt = t0.Add(2 * time.Second)
	l.Reservations = append(l.Reservations, climate.Reservation{
		ID: "l1-r0", LeaseID: "l1", ResourceType: climate.ResourceTypeHost, Status: climate.ReservationActive,
		Min: 2, Max: 3, BeforeEnd: "snapshot", CreatedAt: t0,
		Allocations: []climate.Allocation{
			{ID: "l1-b", ReservationID: "l1-r0", LeaseID: "l1", ResourceID: "h2", Start: start, End: end},
		},
	})
	// virtual:floatingip reservations: one with every floating IP field set, one with an
	// empty (not nil) required list, which comes back nil.
	l.Reservations = append(l.Reservations, climate.Reservation{
		ID: "l1-r2", LeaseID: "l1", ResourceType: resourceTypeFloatingIP, Status: climate.ReservationActive,
		NetworkID: "net-ext", Amount: 3, RequiredFloatingIPs: []string{"172.24.4.10", "2001:db8::5"},
		BeforeEnd: "default", CreatedAt: t0.Add(2 * time.Second), UpdatedAt: t0.Add(3 * time.Second),
		Allocations: []climate.Allocation{
			{ID: "l1-f", ReservationID: "l1-r2", LeaseID: "l1", ResourceID: "fip-1", Start: start, End: end},
		},
	}, climate.Reservation{
		ID: "l1-r3", LeaseID: "l1", ResourceType: resourceTypeFloatingIP, Status: climate.ReservationPending,
		NetworkID: "net-ext", Amount: 1, RequiredFloatingIPs: []string{}, CreatedAt: t0.Add(2 * time.Second),
	})
	// Instance reservations, one per affinity (true, false, nil), holding slots of shared
	// hosts: h4 is shared by two reservations' slot allocations over one window.
	small, large := climate.Size{VCPUs: 1, MemoryMB: 512, DiskGB: 0}, climate.Size{VCPUs: 4, MemoryMB: 8192, DiskGB: 80}
	l.Reservations = append(l.Reservations, climate.Reservation{
		ID: "l1-r4", LeaseID: "l1", ResourceType: resourceTypeInstance, Status: climate.ReservationActive,
		Amount: 3, Size: climate.Size{VCPUs: 2, MemoryMB: 4096, DiskGB: 40}, Affinity: boolPtr(true), ServerGroupID: "sg-1",
		BeforeEnd: "default", CreatedAt: t0.Add(3 * time.Second),
		Allocations: []climate.Allocation{{ID: "l1-s4", ReservationID: "l1-r4", LeaseID: "l1", ResourceID: "h4",
			Start: start, End: end, Slots: 3, Size: climate.Size{VCPUs: 2, MemoryMB: 4096, DiskGB: 40}}},
	}, climate.Reservation{
		ID: "l1-r5", LeaseID: "l1", ResourceType: resourceTypeInstance, Status: climate.ReservationActive,
		Amount: 2, Size: small, Affinity: boolPtr(false), ServerGroupID: "sg-2", CreatedAt: t0.Add(3 * time.Second),
		Allocations: []climate.Allocation{
			{ID: "l1-s6", ReservationID: "l1-r5", LeaseID: "l1", ResourceID: "h6", Start: start, End: end, Slots: 1, Size: small},
			{ID: "l1-s5", ReservationID: "l1-r5", LeaseID: "l1", ResourceID: "h5", Start: start, End: end, Slots: 1, Size: small},
		},
	}, climate.Reservation{
		ID: "l1-r6", LeaseID: "l1", ResourceType: resourceTypeFlavorInstance, Status: climate.ReservationPending,
		Amount: 4, Size: large, ResourceProperties: `{"id": "f-large", "extra_specs": {"hw:cpu_policy": "dedicated"}}`,
		CreatedAt: t0.Add(3 * time.Second),
		Allocations: []climate.Allocation{
			{ID: "l1-s7", ReservationID: "l1-r6", LeaseID: "l1", ResourceID: "h7", Start: start, End: end, Slots: 2, Size: large},
			{ID: "l1-s4b", ReservationID: "l1-r6", LeaseID: "l1", ResourceID: "h4", Start: start, End: end, Slots: 2, Size: large},
		},
	})
	l.Events = append([]climate.Event{{
		ID: "l1-e3", LeaseID: "l1", Type: climate.EventBeforeEndLease, Time: end.Add(-time.Hour),
		Status: climate.EventDone, CreatedAt: t0.Add(time.Second), UpdatedAt: t0.Add(3 * time.Second),
	}}, l.Events...)
	return l
}

func testLeaseRoundTrip(t *testing.T, s climate.Store) {
	l := fullLease()
	start, end := l.Start, l.End
	update(t, s, func(tx climate.Tx) error {
		if err := tx.InsertLease(ctx, l); err != nil {
			return err
		}
		// A write transaction reads its own writes.
		got, err := tx.GetLease(ctx, "l1")
		if err != nil {
			return err
		}
		checkLease(t, got, *l)
		return nil
	})
	got := getLease(t, s, "l1")
	checkLease(t, got, *l)
	if got.Start.Location() != time.UTC || got.Events[0].Time.Location() != time.UTC {
		t.Errorf("times come back in %v, want UTC", got.Start.Location())
	}
	if !got.UpdatedAt.IsZero() {
		t.Errorf("UpdatedAt never set: got %v, want zero", got.UpdatedAt)
	}
	var ids []string
	for _, r := range got.Reservations {
		ids = append(ids, r.ID)
	}
	if !reflect.DeepEqual(ids, []string{"l1-r0", "l1-r1", "l1-r2", "l1-r3", "l1-r4", "l1-r5", "l1-r6"}) {
		t.Errorf("reservations in order %v, want by creation", ids)
	}
	// checkLease compares with nil for an empty list; say so plainly if a store drops the
	// floating IP fields or returns an empty slice.
	if len(got.Reservations) == 7 {
		fip, none := got.Reservations[2], got.Reservations[3]
		if fip.NetworkID != "net-ext" || fip.Amount != 3 || !reflect.DeepEqual(fip.RequiredFloatingIPs, []string{"172.24.4.10", "2001:db8::5"}) {
			t.Errorf("floating IP reservation: network %q, amount %d, required %#v; want net-ext, 3, both addresses",
				fip.NetworkID, fip.Amount, fip.RequiredFloatingIPs)
		}
		if none.RequiredFloatingIPs != nil {
			t.Errorf("empty required floating IPs come back %#v, want nil", none.RequiredFloatingIPs)
		}
		checkInstanceFields(t, "GetLease", got.Reservations[4:], l.Reservations[len(l.Reservations)-3:])
	}

	// ListLeases returns the same, by the plain scan (every lease) and by the filtered
	// query alike; so does ListAllocations for the slot allocations.
	for _, f := range []climate.LeaseFilter{{}, {ProjectID: "p1"}} {
		var leases []climate.Lease
		view(t, s, func(tx climate.Tx) (err error) { leases, err = tx.ListLeases(ctx, f); return err })
		if len(leases) != 1 {
			t.Fatalf("ListLeases(%+v): %d leases, want 1", f, len(leases))
		}
		checkLease(t, &leases[0], *l)
		if len(leases[0].Reservations) == 7 {
			checkInstanceFields(t, fmt.Sprintf("ListLeases(%+v)", f), leases[0].Reservations[4:], l.Reservations[len(l.Reservations)-3:])
		}
	}
	var wantSlots []climate.Allocation
	for _, r := range l.Reservations[len(l.Reservations)-3:] {
		wantSlots = append(wantSlots, r.Allocations...)
	}
	wantSlots = canonAllocations(wantSlots)
	for _, f := range []climate.AllocationFilter{
		{ResourceIDs: []string{"h4", "h5", "h6", "h7"}},
		{LeaseID: "l1", ResourceIDs: []string{"h4", "h5", "h6", "h7"}, From: start, To: end},
	} {
		var allocs []climate.Allocation
		view(t, s, func(tx climate.Tx) (err error) { allocs, err = tx.ListAllocations(ctx, f); return err })
		if !reflect.DeepEqual(allocs, wantSlots) {
			t.Errorf("ListAllocations(%+v):\n got %+v\nwant %+v", f, allocs, wantSlots)
		}
	}

	// A lease without children round-trips too.
	bare := &climate.Lease{ID: "l2", Name: "bare", UserID: "u", ProjectID: "p1", Start: t0, End: t0.Add(time.Hour),
		Status: climate.LeasePending, CreatedAt: t0}
	insertLeases(t, s, bare)
	checkLease(t, getLease(t, s, "l2"), *bare)
}

// checkInstanceFields compares the instance fields of reservations a store returned with
// those written, in order, saying plainly which field was lost: checkLease's comparison
// would flag it too, less readably.
func checkInstanceFields(t *testing.T, what string, got, want []climate.Reservation) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d instance reservations, want %d", what, len(got), len(want))
		return
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID || g.Amount != w.Amount || g.Size != w.Size || affinityString(g.Affinity) != affinityString(w.Affinity) ||
			g.ServerGroupID != w.ServerGroupID {
			t.Errorf("%s: reservation %s: amount %d, size %+v, affinity %s, server group %q; want %s: %d, %+v, %s, %q", what,
				g.ID, g.Amount, g.Size, affinityString(g.Affinity), g.ServerGroupID,
				w.ID, w.Amount, w.Size, affinityString(w.Affinity), w.ServerGroupID)
		}
		wa := canonAllocations(w.Allocations)
		if len(g.Allocations) != len(wa) {
			t.Errorf("%s: reservation %s: %d allocations, want %d", what, g.ID, len(g.Allocations), len(wa))
			continue
		}
		for j, a := range g.Allocations {
			if a.ID != wa[j].ID || a.Slots != wa[j].Slots || a.Size != wa[j].Size {
				t.Errorf("%s: allocation %s: %d slots of %+v; want %s: %d of %+v", what, a.ID, a.Slots, a.Size, wa[j].ID, wa[j].Slots, wa[j].Size)
			}
		}
	}
}

func testListLeases(t *testing.T, s climate.Store) {
	day := 24 * time.Hour
	a := newLease("a", "p1", t0.Add(day), t0.Add(2*day), "h1")
	a.CreatedAt = t0.Add(time.Second)
	b := newLease("b", "p1", t0.Add(day), t0.Add(2*day), "h2")
	b.CreatedAt = t0.Add(time.Second) // tie with a: ordered by id
	c := newLease("c", "p1", t0.Add(3*day), t0.Add(4*day), "h1")
	d := newLease("d", "p2", t0.Add(day), t0.Add(2*day), "h3")
	d.CreatedAt = t0.Add(2 * time.Second)
	insertLeases(t, s, d, b, c, a)

	check := func(f climate.LeaseFilter, want ...*climate.Lease) {
		t.Helper()
		var got []climate.Lease
		view(t, s, func(tx climate.Tx) (err error) { got, err = tx.ListLeases(ctx, f); return err })
		var gotIDs, wantIDs []string
		for _, l := range got {
			gotIDs = append(gotIDs, l.ID)
		}
		for _, l := range want {
			wantIDs = append(wantIDs, l.ID)
		}
		if !reflect.DeepEqual(gotIDs, wantIDs) {
			t.Fatalf("ListLeases(%+v): got %v, want %v", f, gotIDs, wantIDs)
		}
		for i := range got {
			checkLease(t, &got[i], *want[i])
		}
	}
	check(climate.LeaseFilter{}, c, a, b, d)
	check(climate.LeaseFilter{ProjectID: "p1"}, c, a, b)
	check(climate.LeaseFilter{ProjectID: "p2"}, d)
	check(climate.LeaseFilter{ProjectID: "nobody"})
}

// testListLeasesPages checks filters and keyset pages: following pages from the last lease
// of each lists every lease once, in list order, ties in creation time included.
func testListLeasesPages(t *testing.T, s climate.Store) {
	day := 24 * time.Hour
	byID := map[string]*climate.Lease{}
	lease := func(id, project string, created time.Duration, status climate.LeaseStatus, name string) *climate.Lease {
		l := newLease(id, project, t0.Add(day), t0.Add(2*day), "h-"+id)
		l.CreatedAt, l.Status = t0.Add(created), status
		if name != "" {
			l.Name = name
		}
		byID[id] = l
		return l
	}
	insertLeases(t, s,
		lease("d", "p2", time.Second, climate.LeaseActive, "shared"),
		lease("a3", "p1", 0, climate.LeaseError, ""),
		lease("c", "p1", time.Microsecond, climate.LeaseTerminated, "shared"),
		lease("a1", "p1", 0, climate.LeasePending, ""),
		lease("Z9", "p2", 0, climate.LeaseActive, ""), // ids compare bytewise: "Z9" < "a1"
		lease("e", "p1", -time.Second, climate.LeasePending, ""),
		lease("a2", "p1", 0, climate.LeaseActive, ""),
		lease("b", "p2", 0, climate.LeaseActive, ""),
	)
	list := func(f climate.LeaseFilter) []climate.Lease {
		t.Helper()
		var got []climate.Lease
		view(t, s, func(tx climate.Tx) (err error) { got, err = tx.ListLeases(ctx, f); return err })
		return got
	}
	// pages lists f's leases page by page, checking each lease in full.
	pages := func(f climate.LeaseFilter) []string {
		t.Helper()
		ids := []string{}
		for range 20 {
			page := list(f)
			if len(page) > f.Limit {
				t.Fatalf("ListLeases(%+v): %d leases, more than the limit", f, len(page))
			}
			for i := range page {
				checkLease(t, &page[i], *byID[page[i].ID])
				ids = append(ids, page[i].ID)
			}
			if len(page) < f.Limit {
				return ids
			}
			f.After = &page[len(page)-1]
		}
		t.Fatalf("ListLeases(%+v): pages never end", f)
		return nil
	}
	for _, tc := range []struct {
		name string
		f    climate.LeaseFilter
		want string
	}{
		{"all", climate.LeaseFilter{}, "e Z9 a1 a2 a3 b c d"},
		{"project", climate.LeaseFilter{ProjectID: "p1"}, "e a1 a2 a3 c"},
		{"status", climate.LeaseFilter{Statuses: []climate.LeaseStatus{climate.LeaseActive}}, "Z9 a2 b d"},
		{"statuses", climate.LeaseFilter{Statuses: []climate.LeaseStatus{climate.LeaseError, climate.LeaseTerminated}}, "a3 c"},
		{"name", climate.LeaseFilter{Name: "shared"}, "c d"},
		{"combined", climate.LeaseFilter{ProjectID: "p2", Name: "shared", Statuses: []climate.LeaseStatus{climate.LeaseActive}}, "d"},
		{"no match", climate.LeaseFilter{ProjectID: "p1", Statuses: []climate.LeaseStatus{climate.LeaseDeleting}}, ""},
	} {
		for _, limit := range []int{0, 1, 2, 3, 8, 100} {
			f := tc.f
			f.Limit = limit
			var got []string
			if limit == 0 {
				got = []string{}
				for _, l := range list(f) {
					got = append(got, l.ID)
				}
			} else {
				got = pages(f)
			}
			if want := strings.Fields(tc.want); !reflect.DeepEqual(got, append([]string{}, want...)) {
				t.Errorf("%s, limit %d: got %v, want %v", tc.name, limit, got, want)
			}
		}
	}

	// A page starts after a position, which needs no lease: a deleted lease's, or another
	// project's.
	update(t, s, func(tx climate.Tx) error { return tx.DeleteLease(ctx, "a2") })
	for _, tc := range []struct {
		name  string
		f     climate.LeaseFilter
		after *climate.Lease
		want  string
	}{
		{"after deleted", climate.LeaseFilter{}, byID["a2"], "a3 b c d"},
		{"after deleted, limit", climate.LeaseFilter{Limit: 2}, byID["a2"], "a3 b"},
		{"after another project's", climate.LeaseFilter{ProjectID: "p2"}, byID["a1"], "b d"},
		{"after the last", climate.LeaseFilter{}, byID["d"], ""},
		{"after a position", climate.LeaseFilter{}, &climate.Lease{ID: "zz", CreatedAt: t0}, "c d"},
	} {
		f := tc.f
		f.After = tc.after
		got := []string{}
		for _, l := range list(f) {
			got = append(got, l.ID)
		}
		if want := strings.Fields(tc.want); !reflect.DeepEqual(got, append([]string{}, want...)) {
			t.Errorf("%s: got %v, want %v", tc.name, got, want)
		}
	}
}

func testLeaseErrors(t *testing.T, s climate.Store) {
	insertLeases(t, s, newLease("l1", "p1", t0, t0.Add(time.Hour), "h1"))
	err := s.View(ctx, func(tx climate.Tx) error {
		_, err := tx.GetLease(ctx, "nope")
		return err
	})
	wantCode(t, "GetLease unknown", err, climate.CodeNotFound)
	if msg := climate.ErrorMessage(err); msg != "Object with {'lease_id': 'nope'} not found" {
		t.Errorf("GetLease unknown: message %q, want Blazar's", msg)
	}
	err = s.Update(ctx, func(tx climate.Tx) error { return tx.UpdateLease(ctx, newLease("nope", "p1", t0, t0.Add(time.Hour))) })
	wantCode(t, "UpdateLease unknown", err, climate.CodeNotFound)
	err = s.Update(ctx, func(tx climate.Tx) error { return tx.DeleteLease(ctx, "nope") })
	wantCode(t, "DeleteLease unknown", err, climate.CodeNotFound)
	err = s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, newLease("l1", "p1", t0, t0.Add(time.Hour))) })
	wantCode(t, "InsertLease duplicate id", err, climate.CodeConflict)
	if msg := climate.ErrorMessage(err); !strings.Contains(msg, "l1") {
		t.Errorf("InsertLease duplicate id: message %q should name the lease", msg)
	}
}

func testUpdateLeaseSyncsChildren(t *testing.T, s climate.Store) {
	start, end := t0.Add(time.Hour), t0.Add(5*time.Hour)
	l := newLease("l1", "p1", start, end, "h1", "h2")
	l.Reservations = append(l.Reservations, climate.Reservation{
		ID: "l1-r2", LeaseID: "l1", ResourceType: climate.ResourceTypeHost, Status: climate.ReservationPending,
		Min: 1, Max: 1, CreatedAt: t0.Add(time.Second),
		Allocations: []climate.Allocation{{ID: "l1-a-h3", ReservationID: "l1-r2", LeaseID: "l1", ResourceID: "h3", Start: start, End: end}},
	})
	// Floating IP reservations whose fields the update changes: one from a nil required
	// list to addresses, one from addresses to an empty list.
	l.Reservations = append(l.Reservations, climate.Reservation{
		ID: "l1-r4", LeaseID: "l1", ResourceType: resourceTypeFloatingIP, Status: climate.ReservationPending,
		NetworkID: "net-a", Amount: 1, CreatedAt: t0.Add(2 * time.Second),
	}, climate.Reservation{
		ID: "l1-r5", LeaseID: "l1", ResourceType: resourceTypeFloatingIP, Status: climate.ReservationPending,
		NetworkID: "net-a", Amount: 2, RequiredFloatingIPs: []string{"172.24.4.1", "172.24.4.2"}, CreatedAt: t0.Add(2 * time.Second),
	})
	// Instance reservations whose affinity the update cycles (nil → true → false → nil)
	// and whose sizes, server groups and slot allocations it changes.
	instance := func(id string, amount int, size climate.Size, affinity *bool, group string, allocs ...climate.Allocation) climate.Reservation {
		for i := range allocs {
			allocs[i].ReservationID, allocs[i].LeaseID, allocs[i].Start, allocs[i].End, allocs[i].Size = id, "l1", start, end, size
		}
		return climate.Reservation{ID: id, LeaseID: "l1", ResourceType: resourceTypeInstance, Status: climate.ReservationPending,
			Amount: amount, Size: size, Affinity: affinity, ServerGroupID: group, CreatedAt: t0.Add(3 * time.Second),
			Allocations: allocs}
	}
	l.Reservations = append(l.Reservations,
		instance("l1-r6", 2, climate.Size{VCPUs: 2, MemoryMB: 2048, DiskGB: 20}, nil, "",
			climate.Allocation{ID: "l1-s-h6", ResourceID: "h6", Slots: 2}),
		instance("l1-r7", 1, climate.Size{VCPUs: 1, MemoryMB: 1024, DiskGB: 10}, boolPtr(true), "sg-a",
			climate.Allocation{ID: "l1-s-h7", ResourceID: "h7", Slots: 1}),
		instance("l1-r8", 2, climate.Size{VCPUs: 1, MemoryMB: 1024, DiskGB: 10}, boolPtr(false), "sg-b",
			climate.Allocation{ID: "l1-s-h8", ResourceID: "h8", Slots: 1}, climate.Allocation{ID: "l1-s-h10", ResourceID: "h10", Slots: 1}),
	)
	l.Events = append(l.Events, climate.Event{ID: "l1-e3", LeaseID: "l1", Type: climate.EventBeforeEndLease,
		Time: end.Add(-time.Hour), Status: climate.EventUndone, CreatedAt: t0})
	insertLeases(t, s, l, newLease("other", "p1", start, end, "h9"))
	checkLease(t, getLease(t, s, "l1"), *l)

	l = getLease(t, s, "l1")
	later := t0.Add(time.Minute)
	newEnd := end.Add(time.Hour)
	l.Name, l.Status, l.Degraded, l.End, l.UpdatedAt = "renamed", climate.LeaseActive, true, newEnd, later
	// Drop r2 (and with it h3), modify r1, drop h2, move h1's window, add h4.
	r1 := l.Reservations[0]
	r1.Status, r1.Max, r1.UpdatedAt = climate.ReservationActive, 5, later
	r1.Allocations = []climate.Allocation{
		{ID: "l1-a-h1", ReservationID: "l1-r1", LeaseID: "l1", ResourceID: "h1", Start: start, End: newEnd},
		{ID: "l1-a-h4", ReservationID: "l1-r1", LeaseID: "l1", ResourceID: "h4", Start: start, End: newEnd},
	}
	// Add r3 with an allocation.
	r3 := climate.Reservation{ID: "l1-r3", LeaseID: "l1", ResourceType: climate.ResourceTypeHost, Status: climate.ReservationActive,
		Min: 1, Max: 1, BeforeEnd: "snapshot", CreatedAt: later,
		Allocations: []climate.Allocation{{ID: "l1-a-h5", ReservationID: "l1-r3", LeaseID: "l1", ResourceID: "h5", Start: start, End: newEnd}}}
	r4, r5 := *reservation(t, l, "l1-r4"), *reservation(t, l, "l1-r5")
	r4.NetworkID, r4.Amount, r4.RequiredFloatingIPs = "net-b", 3, []string{"2001:db8::7"}
	r5.Amount, r5.RequiredFloatingIPs = 1, []string{}
	// r6: affinity nil → true, a server group, a larger size; its allocation (same id)
	// drops to one slot of the new size. r7: affinity true → false, three slots. r8:
	// affinity false → nil, no server group, a new size; h8's allocation changes only its
	// size, h10's is dropped.
	r6, r7, r8 := *reservation(t, l, "l1-r6"), *reservation(t, l, "l1-r7"), *reservation(t, l, "l1-r8")
	r6.Affinity, r6.ServerGroupID, r6.Size = boolPtr(true), "sg-c", climate.Size{VCPUs: 4, MemoryMB: 4096, DiskGB: 40}
	r6.Allocations = []climate.Allocation{r6.Allocations[0]}
	r6.Allocations[0].Slots, r6.Allocations[0].Size = 1, r6.Size
	r7.Affinity, r7.Amount = boolPtr(false), 3
	r7.Allocations = []climate.Allocation{r7.Allocations[0]}
	r7.Allocations[0].Slots = 3
	r8.Affinity, r8.ServerGroupID, r8.Size = nil, "", climate.Size{VCPUs: 2, MemoryMB: 512}
	r8.Allocations = []climate.Allocation{*allocation(t, &r8, "l1-s-h8")}
	r8.Allocations[0].Size = r8.Size
	l.Reservations = []climate.Reservation{r1, r3, r4, r5, r6, r7, r8}
	// Drop before_end, move end, mark start done, add a new event.
	e1, e2 := *l.Event(climate.EventStartLease), *l.Event(climate.EventEndLease)
	e1.Status, e1.UpdatedAt = climate.EventDone, later
	e2.Time, e2.UpdatedAt = newEnd, later
	e4 := climate.Event{ID: "l1-e4", LeaseID: "l1", Type: climate.EventBeforeEndLease, Time: newEnd.Add(-30 * time.Minute),
		Status: climate.EventUndone, CreatedAt: later}
	l.Events = []climate.Event{e1, e2, e4}
	update(t, s, func(tx climate.Tx) error { return tx.UpdateLease(ctx, l) })

	got := getLease(t, s, "l1")
	checkLease(t, got, *l)
	if r := reservation(t, got, "l1-r4"); r.NetworkID != "net-b" || r.Amount != 3 || !reflect.DeepEqual(r.RequiredFloatingIPs, []string{"2001:db8::7"}) {
		t.Errorf("updated floating IP reservation: network %q, amount %d, required %#v; want net-b, 3, [2001:db8::7]",
			r.NetworkID, r.Amount, r.RequiredFloatingIPs)
	}
	if r := reservation(t, got, "l1-r5"); r.Amount != 1 || r.RequiredFloatingIPs != nil {
		t.Errorf("floating IP reservation with its required list emptied: amount %d, required %#v; want 1, nil",
			r.Amount, r.RequiredFloatingIPs)
	}
	checkInstanceFields(t, "after UpdateLease",
		[]climate.Reservation{*reservation(t, got, "l1-r6"), *reservation(t, got, "l1-r7"), *reservation(t, got, "l1-r8")},
		[]climate.Reservation{r6, r7, r8})
	view(t, s, func(tx climate.Tx) error {
		allocs, err := tx.ListAllocations(ctx, climate.AllocationFilter{LeaseID: "l1"})
		if got := allocationIDs(allocs); err != nil || !reflect.DeepEqual(got, []string{"l1-a-h1", "l1-a-h4", "l1-a-h5", "l1-s-h6", "l1-s-h7", "l1-s-h8"}) {
			t.Errorf("allocations after UpdateLease: %v, %v; want h1, h4, h5 and the slots on h6, h7, h8", got, err)
		}
		if len(allocs) > 0 && !allocs[0].End.Equal(ts(newEnd)) {
			t.Errorf("h1's allocation ends %v, want %v", allocs[0].End, newEnd)
		}
		if len(allocs) == 6 {
			want := canonAllocations(append(append(append([]climate.Allocation(nil), r6.Allocations...), r7.Allocations...), r8.Allocations...))
			if !reflect.DeepEqual(allocs[3:], want) {
				t.Errorf("slot allocations after UpdateLease:\n got %+v\nwant %+v", allocs[3:], want)
			}
		}
		allocs, err = tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{"h2", "h3", "h10"}})
		if err != nil || len(allocs) != 0 {
			t.Errorf("allocations of removed h2, h3, h10: %v, %v; want none", allocationIDs(allocs), err)
		}
		// The other lease is untouched.
		other, err := tx.GetLease(ctx, "other")
		if err != nil {
			return err
		}
		checkLease(t, other, *newLease("other", "p1", start, end, "h9"))
		return nil
	})
	// The dropped before_end event is gone, the added one is due at its time.
	update(t, s, func(tx climate.Tx) error {
		evs, err := tx.ClaimDueEvents(ctx, "run-1", newEnd.Add(-time.Minute), newEnd, 10)
		if got := eventIDs(evs); err != nil || !reflect.DeepEqual(got, []string{"other-e1", "other-e2", "l1-e4"}) {
			t.Errorf("due events after UpdateLease: %v, %v; want other's start and end, then l1-e4", got, err)
		}
		return nil
	})
}

// testUpdateLeaseKeepsClaims checks that UpdateLease leaves an IN_PROGRESS event's claim
// alone (the engine holding it may still be working) and that writing any other status
// ends the claim.
func testUpdateLeaseKeepsClaims(t *testing.T, s climate.Store) {
	l := newLease("l1", "p1", now.Add(-time.Minute), now.Add(time.Hour), "h1")
	insertLeases(t, s, l)
	claimUntil := now.Add(5 * time.Minute)
	update(t, s, func(tx climate.Tx) error {
		evs, err := tx.ClaimDueEvents(ctx, "run-1", now, claimUntil, 10)
		if got := eventIDs(evs); err != nil || !reflect.DeepEqual(got, []string{"l1-e1"}) {
			t.Fatalf("claim: %v, %v; want [l1-e1]", got, err)
		}
		return nil
	})
	checkNext := func(want time.Time) {
		t.Helper()
		view(t, s, func(tx climate.Tx) error {
			next, ok, err := tx.NextEventTime(ctx)
			if err != nil || !ok || !next.Equal(want) {
				t.Errorf("NextEventTime: %v, %v, %v; want %v", next, ok, err, want)
			}
			return nil
		})
	}
	checkNext(claimUntil)

	// Rewrite the lease with the event still IN_PROGRESS: the claim stands.
	l = getLease(t, s, "l1")
	if e := l.Event(climate.EventStartLease); e.Status != climate.EventInProgress || !e.UpdatedAt.Equal(now) {
		t.Errorf("claimed event: status %s, updated %v; want IN_PROGRESS at %v", e.Status, e.UpdatedAt, now)
	}
	l.Name, l.UpdatedAt = "renamed", now.Add(time.Second)
	l.Event(climate.EventStartLease).UpdatedAt = now.Add(time.Second)
	l.Event(climate.EventStartLease).ClaimedBy = "run-2" // only claims write the claimer
	update(t, s, func(tx climate.Tx) error { return tx.UpdateLease(ctx, l) })
	checkNext(claimUntil)
	if by := getLease(t, s, "l1").Event(climate.EventStartLease).ClaimedBy; by != "run-1" {
		t.Errorf("claimed by %q after UpdateLease, want run-1", by)
	}
	update(t, s, func(tx climate.Tx) error {
		evs, err := tx.ClaimDueEvents(ctx, "run-1", now.Add(time.Minute), now.Add(10*time.Minute), 10)
		if err != nil || len(evs) != 0 {
			t.Errorf("claim while claimed: %v, %v; want none", eventIDs(evs), err)
		}
		return nil
	})

	// Hand the event back (UNDONE): it is due at its own time again, claim or not.
	l.Event(climate.EventStartLease).Status = climate.EventUndone
	update(t, s, func(tx climate.Tx) error { return tx.UpdateLease(ctx, l) })
	checkNext(now.Add(-time.Minute))
	update(t, s, func(tx climate.Tx) error {
		evs, err := tx.ClaimDueEvents(ctx, "run-1", now.Add(time.Minute), now.Add(10*time.Minute), 10)
		if got := eventIDs(evs); err != nil || !reflect.DeepEqual(got, []string{"l1-e1"}) {
			t.Errorf("claim after UNDONE: %v, %v; want [l1-e1]", got, err)
		}
		return nil
	})

	// Finish it (DONE): only the end event remains.
	l = getLease(t, s, "l1")
	l.Event(climate.EventStartLease).Status = climate.EventDone
	update(t, s, func(tx climate.Tx) error { return tx.UpdateLease(ctx, l) })
	checkNext(now.Add(time.Hour))
	if by := getLease(t, s, "l1").Event(climate.EventStartLease).ClaimedBy; by != "" {
		t.Errorf("DONE event claimed by %q, want nobody", by)
	}
	update(t, s, func(tx climate.Tx) error {
		if n, err := tx.RenewClaims(ctx, "run-1", now.Add(time.Hour)); err != nil || n != 0 {
			t.Errorf("RenewClaims after DONE: %d, %v; want 0", n, err)
		}
		return nil
	})
	update(t, s, func(tx climate.Tx) error {
		evs, err := tx.ClaimDueEvents(ctx, "run-1", now.Add(30*time.Minute), now.Add(40*time.Minute), 10)
		if err != nil || len(evs) != 0 {
			t.Errorf("claim after DONE: %v, %v; want none", eventIDs(evs), err)
		}
		return nil
	})
}

func testDeleteLeaseCascades(t *testing.T, s climate.Store) {
	start, end := now.Add(-time.Hour), now.Add(time.Hour)
	insertLeases(t, s, newLease("gone", "p1", start, end, "h1", "h2"), newLease("kept", "p1", start.Add(-time.Minute), end, "h3"))
	update(t, s, func(tx climate.Tx) error { return tx.DeleteLease(ctx, "gone") })
	view(t, s, func(tx climate.Tx) error {
		_, err := tx.GetLease(ctx, "gone")
		wantCode(t, "GetLease after delete", err, climate.CodeNotFound)
		allocs, err := tx.ListAllocations(ctx, climate.AllocationFilter{LeaseID: "gone"})
		if err != nil || len(allocs) != 0 {
			t.Errorf("allocations of deleted lease: %v, %v; want none", allocationIDs(allocs), err)
		}
		allocs, err = tx.ListAllocations(ctx, climate.AllocationFilter{})
		if got := allocationIDs(allocs); err != nil || !reflect.DeepEqual(got, []string{"kept-a-h3"}) {
			t.Errorf("all allocations: %v, %v; want only kept's", got, err)
		}
		if leases, err := tx.ListLeases(ctx, climate.LeaseFilter{}); err != nil || len(leases) != 1 || leases[0].ID != "kept" {
			t.Errorf("ListLeases after delete: %v, %v; want only kept", leases, err)
		}
		next, ok, err := tx.NextEventTime(ctx)
		if err != nil || !ok || !next.Equal(start.Add(-time.Minute)) {
			t.Errorf("NextEventTime: %v, %v, %v; want kept's start", next, ok, err)
		}
		return nil
	})
	update(t, s, func(tx climate.Tx) error {
		evs, err := tx.ClaimDueEvents(ctx, "run-1", end.Add(time.Hour), end.Add(2*time.Hour), 10)
		if got := eventIDs(evs); err != nil || !reflect.DeepEqual(got, []string{"kept-e1", "kept-e2"}) {
			t.Errorf("claimable events after delete: %v, %v; want only kept's", got, err)
		}
		return nil
	})
	// Nothing of the deleted lease lingers to clash with a new one under the same ids.
	l := newLease("gone", "p1", start, end, "h1", "h2")
	insertLeases(t, s, l)
	checkLease(t, getLease(t, s, "gone"), *l)
}

func testListAllocations(t *testing.T, s climate.Store) {
	h := func(n int) time.Time { return now.Add(time.Duration(n) * time.Hour) }
	l4 := newLease("l4", "p1", h(0), h(20), "h3")
	l4.Reservations = append(l4.Reservations, climate.Reservation{ID: "l4-r2", LeaseID: "l4", ResourceType: climate.ResourceTypeHost,
		Status: climate.ReservationPending, Min: 1, Max: 1, CreatedAt: t0.Add(time.Second),
		Allocations: []climate.Allocation{{ID: "l4-a-h1", ReservationID: "l4-r2", LeaseID: "l4", ResourceID: "h1", Start: h(30), End: h(40)}}})
	insertLeases(t, s,
		newLease("l2", "p1", h(10), h(20), "h1"), // back to back with l1
		newLease("l1", "p1", h(0), h(10), "h1"),
		newLease("l3", "p1", h(5), h(15), "h2"),
		l4,
	)
	tests := []struct {
		name string
		f    climate.AllocationFilter
		want []string
	}{
		{"all", climate.AllocationFilter{}, []string{"l1-a-h1", "l2-a-h1", "l4-a-h1", "l3-a-h2", "l4-a-h3"}},
		{"nil resources", climate.AllocationFilter{ResourceIDs: nil, LeaseID: "l1"}, []string{"l1-a-h1"}},
		{"empty resources", climate.AllocationFilter{ResourceIDs: []string{}}, nil},
		{"one resource", climate.AllocationFilter{ResourceIDs: []string{"h1"}}, []string{"l1-a-h1", "l2-a-h1", "l4-a-h1"}},
		{"resources", climate.AllocationFilter{ResourceIDs: []string{"h3", "h2", "nope"}}, []string{"l3-a-h2", "l4-a-h3"}},
		{"lease", climate.AllocationFilter{LeaseID: "l4"}, []string{"l4-a-h1", "l4-a-h3"}},
		{"leases", climate.AllocationFilter{LeaseIDs: []string{"l4", "l3", "nope"}}, []string{"l4-a-h1", "l3-a-h2", "l4-a-h3"}},
		{"empty leases", climate.AllocationFilter{LeaseIDs: []string{}}, nil},
		{"leases on a resource", climate.AllocationFilter{LeaseIDs: []string{"l4", "l1"}, ResourceIDs: []string{"h1"}, From: h(5)}, []string{"l1-a-h1", "l4-a-h1"}},
		{"reservation", climate.AllocationFilter{ReservationID: "l4-r2"}, []string{"l4-a-h1"}},
		{"exclude", climate.AllocationFilter{ExcludeLeaseID: "l4"}, []string{"l1-a-h1", "l2-a-h1", "l3-a-h2"}},
		{"from", climate.AllocationFilter{From: h(10)}, []string{"l2-a-h1", "l4-a-h1", "l3-a-h2", "l4-a-h3"}},
		{"to", climate.AllocationFilter{To: h(10)}, []string{"l1-a-h1", "l3-a-h2", "l4-a-h3"}},
		{"window", climate.AllocationFilter{From: h(9), To: h(11)}, []string{"l1-a-h1", "l2-a-h1", "l3-a-h2", "l4-a-h3"}},
		{"back to back", climate.AllocationFilter{ResourceIDs: []string{"h1"}, From: h(10), To: h(20)}, []string{"l2-a-h1"}},
		{"gap", climate.AllocationFilter{ResourceIDs: []string{"h1"}, From: h(20), To: h(30)}, nil},
		{"inside", climate.AllocationFilter{From: h(12), To: h(13)}, []string{"l2-a-h1", "l3-a-h2", "l4-a-h3"}},
		{"combined", climate.AllocationFilter{ResourceIDs: []string{"h1"}, From: h(10), To: h(20), ExcludeLeaseID: "l2"}, nil},
	}
	view(t, s, func(tx climate.Tx) error {
		for _, tc := range tests {
			got, err := tx.ListAllocations(ctx, tc.f)
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			want := tc.want
			if want == nil {
				want = []string{}
			}
			if ids := allocationIDs(got); !reflect.DeepEqual(ids, want) {
				t.Errorf("%s: got %v, want %v", tc.name, ids, want)
			}
		}
		got, err := tx.ListAllocations(ctx, climate.AllocationFilter{ReservationID: "l3-r1"})
		want := []climate.Allocation{{ID: "l3-a-h2", ReservationID: "l3-r1", LeaseID: "l3", ResourceID: "h2", Start: h(5), End: h(15)}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("allocation fields: got %+v, %v; want %+v", got, err, want)
		}
		return nil
	})
}

// reservation returns l's reservation id, failing the test if there is none.
func reservation(t *testing.T, l *climate.Lease, id string) *climate.Reservation {
	t.Helper()
	for i := range l.Reservations {
		if l.Reservations[i].ID == id {
			return &l.Reservations[i]
		}
	}
	t.Fatalf("lease %s has no reservation %s", l.ID, id)
	return nil
}

// allocation returns r's allocation id, failing the test if it has none.
func allocation(t *testing.T, r *climate.Reservation, id string) *climate.Allocation {
	t.Helper()
	for i := range r.Allocations {
		if r.Allocations[i].ID == id {
			return &r.Allocations[i]
		}
	}
	t.Fatalf("reservation %s has no allocation %s", r.ID, id)
	return nil
}
