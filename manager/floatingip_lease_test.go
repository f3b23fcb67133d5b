package manager_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/resource/floatingip"
)

func fipReq(network string, amount int, required ...string) climate.ReservationRequest {
	return climate.ReservationRequest{ResourceType: floatingip.Name, NetworkID: &network, Amount: &amount, RequiredFloatingIPs: &required}
}

// reservationOf returns l's reservation of type t (a stored lease's are in no set order).
func reservationOf(l *climate.Lease, t string) *climate.Reservation {
	for i := range l.Reservations {
		if l.Reservations[i].ResourceType == t {
			return &l.Reservations[i]
		}
	}
	return &climate.Reservation{}
}

func addFloatingIPs(t *testing.T, m interface {
	CreateFloatingIP(context.Context, climate.Identity, climate.FloatingIPRequest) (*climate.FloatingIP, error)
}, network string, addrs ...string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, a := range addrs {
		f, err := m.CreateFloatingIP(context.Background(), admin, climate.FloatingIPRequest{FloatingNetworkID: network, Address: a})
		if err != nil {
			t.Fatal(err)
		}
		ids[f.ID] = a
	}
	return ids
}

// A lease mixing hosts and floating IPs is planned and committed all or nothing; an
// address is never in two overlapping reservations; a held address cannot be deleted,
// one whose leases ended can.
func TestFloatingIPLeases(t *testing.T) {
	ctx := context.Background()
	m, _, clk := setup(t)
	addHosts(t, m, 1, nil)
	ext := addFloatingIPs(t, m, "ext", "172.24.4.1", "172.24.4.2", "172.24.4.3")
	addFloatingIPs(t, m, "other", "10.9.9.9")

	l := create(t, m, alice, time.Hour, 3*time.Hour, hostReq(1, 1, ""), fipReq("ext", 2, "172.24.4.3"))
	var got []string
	for _, a := range l.Reservations[1].Allocations {
		got = append(got, ext[a.ResourceID])
	}
	if len(l.Reservations[0].Allocations) != 1 || len(got) != 2 || !slices.Contains(got, "172.24.4.3") {
		t.Fatalf("mixed lease: hosts %v, addresses %v", l.Reservations[0].Allocations, got)
	}
	if r := l.Reservations[1]; r.NetworkID != "ext" || r.Amount != 2 || !slices.Equal(r.RequiredFloatingIPs, []string{"172.24.4.3"}) {
		t.Errorf("reservation %+v", r)
	}

	// The host is taken: a second mixed lease fails whole, and writes no address.
	_, err := m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "both", Start: at(2 * time.Hour), End: at(4 * time.Hour),
		Reservations: []climate.ReservationRequest{fipReq("ext", 1), hostReq(1, 1, "")}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available")
	// One address is left on ext in the window; two are not.
	_, err = m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "two", Start: at(2 * time.Hour), End: at(4 * time.Hour),
		Reservations: []climate.ReservationRequest{fipReq("ext", 2)}})
	wantCode(t, err, climate.CodeConflict, "Not enough floating IPs available")
	_, err = m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "required", Start: at(2 * time.Hour), End: at(4 * time.Hour),
		Reservations: []climate.ReservationRequest{fipReq("ext", 1, "172.24.4.3")}})
	wantCode(t, err, climate.CodeConflict, "required 172.24.4.3 not free")
	_, err = m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "elsewhere", Start: at(2 * time.Hour), End: at(4 * time.Hour),
		Reservations: []climate.ReservationRequest{fipReq("ext", 1, "10.9.9.9")}})
	wantCode(t, err, climate.CodeInvalid, "is not a registered floating IP of network ext")
	after := create(t, m, bob, 3*time.Hour, 5*time.Hour, fipReq("ext", 3)) // back to back: all three
	if len(after.Reservations[0].Allocations) != 3 {
		t.Errorf("after the first lease: %+v", after.Reservations[0].Allocations)
	}

	// Updates: fewer addresses (one of those held kept), never another network.
	up, err := m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Reservations: []climate.ReservationRequest{{ID: l.Reservations[1].ID, Amount: ptr(1)}}})
	if err != nil || len(reservationOf(up, floatingip.Name).Allocations) != 1 {
		t.Fatalf("shrink: %v", err)
	}
	up, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Reservations: []climate.ReservationRequest{{ID: l.Reservations[1].ID, Amount: ptr(2)}}})
	if r := reservationOf(up, floatingip.Name); err != nil || len(r.Allocations) != 2 {
		t.Fatalf("grow back (the required address kept): %v %+v", err, r)
	}
	net := "other"
	_, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Reservations: []climate.ReservationRequest{{ID: l.Reservations[1].ID, NetworkID: &net}}})
	wantCode(t, err, climate.CodeInvalid, "network_id of a floating IP reservation cannot be updated")

	var held string
	for id, a := range ext {
		if a == "172.24.4.3" {
			held = id
		}
	}
	wantCode(t, m.DeleteFloatingIP(ctx, admin, held), climate.CodeConflict, "cannot be deleted")
	clk.Set(t0.Add(6 * time.Hour)) // both leases' windows are over
	if err := m.DeleteFloatingIP(ctx, admin, held); err != nil {
		t.Errorf("delete after the leases ended: %v", err)
	}

}

// Concurrent requests for the same addresses never book one twice.
func TestConcurrentFloatingIPLeasesNeverDoubleBook(t *testing.T) {
	ctx := context.Background()
	m, st, _ := setup(t)
	addFloatingIPs(t, m, "ext", "172.24.4.1", "172.24.4.2", "172.24.4.3", "172.24.4.4")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			start := time.Duration(i%4) * time.Hour
			_, _ = m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "c", Start: at(time.Hour + start), End: at(3*time.Hour + start),
				Reservations: []climate.ReservationRequest{fipReq("ext", 1+i%3)}})
		})
	}
	wg.Wait()
	var allocs []climate.Allocation
	_ = st.View(ctx, func(tx climate.Tx) (err error) {
		allocs, err = tx.ListAllocations(ctx, climate.AllocationFilter{})
		return err
	})
	if len(allocs) == 0 {
		t.Fatal("nothing was booked")
	}
	for i, a := range allocs {
		for _, b := range allocs[i+1:] {
			if a.ResourceID == b.ResourceID && climate.Overlaps(a.Start, a.End, b.Start, b.End) {
				t.Fatalf("address %s booked twice: %+v and %+v", a.ResourceID, a, b)
			}
		}
	}
}
