package manager_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/resource/flavor"
	"climate/resource/instance"
)

func instReq(amount, vcpus, memory int, affinity *bool) climate.ReservationRequest {
	disk := 0
	return climate.ReservationRequest{ResourceType: instance.Name, Amount: &amount, VCPUs: &vcpus, MemoryMB: &memory, DiskGB: &disk,
		Affinity: &climate.Affinity{Value: affinity}}
}

// slotsByHost sums a reservation's slots per host.
func slotsByHost(r *climate.Reservation) map[string]int {
	out := map[string]int{}
	for _, a := range r.Allocations {
		out[a.ResourceID] += a.Slots
	}
	return out
}

// Instance slots share hosts up to their capacity at every instant, never share one with
// a whole-host reservation, mix with hosts and floating IPs in one all-or-nothing lease,
// and keep their hosts on update.
func TestInstanceLeases(t *testing.T) {
	ctx := context.Background()
	m, _, _ := setup(t)
	hosts := addHosts(t, m, 2, map[string]string{"vcpus": "8", "memory_mb": "16384"})
	yes, no := true, false

	// 3 slots of 2 vCPUs pack onto one host; 3 more go on the same (fullest first).
	a := create(t, m, alice, time.Hour, 3*time.Hour, instReq(3, 2, 1024, nil))
	b := create(t, m, bob, 2*time.Hour, 4*time.Hour, instReq(1, 2, 1024, nil))
	ra, rb := slotsByHost(&a.Reservations[0]), slotsByHost(&b.Reservations[0])
	if len(ra) != 1 || len(rb) != 1 {
		t.Fatalf("packing: a %v, b %v", ra, rb)
	}
	for h := range ra {
		if rb[h] != 1 {
			t.Fatalf("b %v did not join a's partly used host %v", rb, ra)
		}
	}
	// That host is now full over [2h, 3h): a whole-host lease there gets the other host
	// only, and a second one fails.
	whole := create(t, m, bob, 2*time.Hour+30*time.Minute, 5*time.Hour, hostReq(1, 1, ""))
	if got := hostsOf(whole); len(got) != 1 || ra[got[0]] != 0 {
		t.Fatalf("whole host %v given while it holds slots %v", got, ra)
	}
	_, err := m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "x", Start: at(2 * time.Hour), End: at(3 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available")
	// No slot is left over [2h, 3h): the shared host is full (4 × 2 vCPUs), the other held.
	_, err = m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "y", Start: at(2 * time.Hour), End: at(3 * time.Hour),
		Reservations: []climate.ReservationRequest{instReq(1, 1, 512, nil)}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available")
	// From 3h, a's slots are gone: 3 more fit beside b's, 4 do not (counted per instant).
	_, err = m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "z", Start: at(3 * time.Hour), End: at(4 * time.Hour),
		Reservations: []climate.ReservationRequest{instReq(4, 2, 1024, nil)}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available")
	create(t, m, bob, 3*time.Hour, 4*time.Hour, instReq(3, 2, 1024, nil))

	// Anti-affinity wants distinct hosts: two exist, but one is held whole from 2h30.
	_, err = m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "anti", Start: at(6 * time.Hour), End: at(7 * time.Hour),
		Reservations: []climate.ReservationRequest{instReq(3, 1, 512, &no)}})
	wantCode(t, err, climate.CodeConflict, "on distinct hosts")
	anti := create(t, m, bob, 6*time.Hour, 7*time.Hour, instReq(2, 1, 512, &no))
	if got := slotsByHost(&anti.Reservations[0]); len(got) != 2 {
		t.Fatalf("anti-affinity: %v", got)
	}
	aff := create(t, m, bob, 6*time.Hour, 7*time.Hour, instReq(7, 1, 512, &yes))
	if got := slotsByHost(&aff.Reservations[0]); len(got) != 1 {
		t.Fatalf("affinity: %v", got)
	}
	if r := aff.Reservations[0]; r.ServerGroupID == "" || *r.Affinity != true || r.Size != (climate.Size{VCPUs: 1, MemoryMB: 512}) {
		t.Errorf("affinity reservation %+v", r)
	}

	// A mixed lease is all or nothing: 1 host + slots that fit only on that same host fail
	// whole; with fewer slots, both are granted on different hosts.
	_, err = m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "mixed", Start: at(10 * time.Hour), End: at(11 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(1, 1, ""), instReq(2, 8, 1024, nil)}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available")
	n := 0
	_, err = m.ListLeases(ctx, admin, climate.LeaseQuery{}, func(page []climate.Lease) error { n += len(page); return nil })
	if err != nil || n != 6 {
		t.Fatalf("a refused mixed lease wrote something: %d leases, %v", n, err)
	}
	mixed := create(t, m, alice, 10*time.Hour, 11*time.Hour, hostReq(1, 1, ""), instReq(4, 1, 1024, nil))
	host, slots := hostsOf(mixed), slotsByHost(reservationOf(mixed, instance.Name))
	if len(slots) != 1 || slots[host[0]] != 0 {
		t.Fatalf("mixed lease: host %v and slots %v on one host", host, slots)
	}

	// Update: more slots stay on the host they had; too many is a 409 that changes nothing.
	r := reservationOf(mixed, instance.Name)
	six := 6
	up, err := m.UpdateLease(ctx, alice, mixed.ID, climate.LeaseUpdate{Reservations: []climate.ReservationRequest{{ID: r.ID, Amount: &six}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := slotsByHost(reservationOf(up, instance.Name)); len(got) != 1 || got[firstKey(slots)] != 6 {
		t.Fatalf("update to 6 slots moved them: %v (had %v)", got, slots)
	}
	nine := 9
	_, err = m.UpdateLease(ctx, alice, mixed.ID, climate.LeaseUpdate{Reservations: []climate.ReservationRequest{{ID: r.ID, Amount: &nine}}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available")
	got, err := m.GetLease(ctx, alice, mixed.ID)
	if err != nil || reservationOf(got, instance.Name).Amount != 6 {
		t.Fatalf("a refused update changed the lease: %+v, %v", got, err)
	}
	_ = hosts
}

func firstKey(m map[string]int) string {
	for k := range m {
		return k
	}
	return ""
}

func flavorRes(id string, amount int) climate.ReservationRequest {
	return climate.ReservationRequest{ResourceType: flavor.Name, FlavorID: &id, Amount: &amount}
}

// flavor:instance reservations take the flavor's size (resources:… overriding it) and
// its traits as host filters; an unknown flavor is a 400; updates and affinity work.
func TestFlavorLeases(t *testing.T) {
	ctx := context.Background()
	m, _, _ := setup(t)
	gpu := addHosts(t, m, 1, map[string]string{"vcpus": "16", "memory_mb": "65536", "CUSTOM_GPU": "true"})
	addHosts(t, m, 2, map[string]string{"vcpus": "16", "memory_mb": "65536"})
	for _, f := range []climate.FlavorRequest{
		{ID: "gpu.large", Name: "gpu.large", VCPUs: 8, RAM: 16384, ExtraSpecs: map[string]string{"trait:CUSTOM_GPU": "required", "resources:VCPU": "4"}},
		{ID: "cpu.small", Name: "cpu.small", VCPUs: 2, RAM: 4096, ExtraSpecs: map[string]string{"trait:CUSTOM_GPU": "forbidden"}},
		{ID: "fpga", Name: "fpga", VCPUs: 2, RAM: 4096, ExtraSpecs: map[string]string{"resources:CUSTOM_FPGA": "1"}},
	} {
		if _, err := m.CreateFlavor(ctx, admin, f); err != nil {
			t.Fatal(err)
		}
	}
	l := create(t, m, alice, time.Hour, 2*time.Hour, flavorRes("gpu.large", 4))
	r := l.Reservations[0]
	if got := slotsByHost(&r); len(got) != 1 || got[gpu[0]] != 4 {
		t.Fatalf("gpu flavor slots %v, want all 4 on the GPU host %s", got, gpu[0])
	}
	if r.Size != (climate.Size{VCPUs: 4, MemoryMB: 16384}) || !strings.Contains(r.ResourceProperties, `"trait:CUSTOM_GPU":"required"`) {
		t.Errorf("reservation size %+v, resource_properties %s", r.Size, r.ResourceProperties)
	}
	// The GPU host is full (4 × 4 vCPUs); a fifth is refused, and a trait-forbidden flavor
	// never lands on it.
	_, err := m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "more", Start: at(time.Hour), End: at(2 * time.Hour),
		Reservations: []climate.ReservationRequest{flavorRes("gpu.large", 1)}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available")
	cpu := create(t, m, alice, 3*time.Hour, 4*time.Hour, flavorRes("cpu.small", 16))
	if got := slotsByHost(&cpu.Reservations[0]); got[gpu[0]] != 0 || len(got) != 2 {
		t.Fatalf("cpu flavor slots %v: want the two hosts without GPU", got)
	}
	_, err = m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "x", Start: at(time.Hour), End: at(2 * time.Hour),
		Reservations: []climate.ReservationRequest{flavorRes("nope", 1)}})
	wantCode(t, err, climate.CodeInvalid, `Invalid flavor_id "nope"`)
	_, err = m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "x", Start: at(time.Hour), End: at(2 * time.Hour),
		Reservations: []climate.ReservationRequest{flavorRes("fpga", 1)}})
	wantCode(t, err, climate.CodeConflict, "resource class CUSTOM_FPGA")

	// Update: fewer slots, then anti-affinity over the two CPU hosts.
	two, no := 2, false
	up, err := m.UpdateLease(ctx, alice, cpu.ID, climate.LeaseUpdate{Reservations: []climate.ReservationRequest{
		{ID: cpu.Reservations[0].ID, Amount: &two, Affinity: &climate.Affinity{Value: &no}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := slotsByHost(&up.Reservations[0]); len(got) != 2 || up.Reservations[0].ServerGroupID == "" {
		t.Fatalf("after update: slots %v, reservation %+v", got, up.Reservations[0])
	}
}

// A host's capacity cannot shrink below what the slots it holds need at once.
func TestHostCapacityKeepsItsSlots(t *testing.T) {
	ctx := context.Background()
	m, _, _ := setup(t)
	h := addHosts(t, m, 1, map[string]string{"vcpus": "8", "memory_mb": "16384"})[0]
	create(t, m, alice, time.Hour, 3*time.Hour, instReq(2, 2, 2048, nil))
	create(t, m, alice, 2*time.Hour, 4*time.Hour, instReq(1, 2, 2048, nil)) // 6 vCPUs over [2h, 3h)
	_, err := m.UpdateHost(ctx, admin, h, map[string]string{"vcpus": "5"})
	wantCode(t, err, climate.CodeConflict, "needing 6 vCPUs, 6144 MB of memory")
	if _, err := m.UpdateHost(ctx, admin, h, map[string]string{"vcpus": "6", "memory_mb": "8192"}); err != nil {
		t.Fatalf("a capacity that still holds the slots: %v", err)
	}
}
