package manager_test

import (
	"context"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
)

// With Config.Cleaning of an hour, a host stays free for an hour after each lease on it:
// a lease ending at 10:00 blocks the host for one starting at 10:30 but not at 11:00, and
// start_date "earliest" picks 11:00; extending a lease into the next one's cleaning is
// refused too. Floating IPs get no cleaning time: back to back is fine.
func TestCleaningTimeThroughCreateLease(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	clk := clock.NewFake(t0.Add(-3 * time.Hour)) // 07:00; t0 is 10:00
	m := manager.New(st, clk, manager.Config{BeforeEnd: manager.DefaultBeforeEnd, Cleaning: time.Hour})
	addHosts(t, m, 1, nil)
	addFloatingIPs(t, m, "ext", "172.24.4.1")

	first := create(t, m, alice, -2*time.Hour, 0, hostReq(1, 1, "")) // 08:00–10:00
	_, err := m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "too soon", Start: at(30 * time.Minute), End: at(90 * time.Minute),
		Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available")

	// The earliest hour: not 07:00 (its cleaning runs into 08:00), not 10:00 or 10:30
	// (the first lease's cleaning), but 11:00.
	dry, err := m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "earliest", Start: climate.Date{Earliest: true}, Duration: time.Hour,
		DryRun: true, Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	if err != nil {
		t.Fatal(err)
	}
	if !dry.Start.Equal(t0.Add(time.Hour)) || !dry.End.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("earliest window %s–%s, want 11:00–12:00", dry.Start, dry.End)
	}
	slots, err := m.EarliestSlots(ctx, bob, climate.SlotQuery{Count: 1, Duration: time.Hour, Limit: 1})
	if err != nil || len(slots) != 1 || !slots[0].Start.Equal(t0.Add(time.Hour)) {
		t.Fatalf("EarliestSlots = %v, %v; want 11:00", slots, err)
	}

	second := create(t, m, bob, time.Hour, 2*time.Hour, hostReq(1, 1, "")) // 11:00–12:00
	if hostsOf(first)[0] != hostsOf(second)[0] {
		t.Fatalf("the leases are on %v and %v, want the one host", hostsOf(first), hostsOf(second))
	}
	// The first lease cannot now end later than 10:00, into the second's setup time.
	_, err = m.UpdateLease(ctx, alice, first.ID, climate.LeaseUpdate{End: at(30 * time.Minute)})
	wantCode(t, err, climate.CodeConflict, "")

	// The timeline shows the host busy during the cleaning after each lease.
	tl, err := m.Timeline(ctx, bob, climate.TimelineQuery{From: t0, To: t0.Add(4 * time.Hour), Step: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var free []int
	for _, b := range tl.Buckets {
		free = append(free, b.Free)
	}
	if len(free) != 4 || free[0] != 0 || free[1] != 0 || free[2] != 0 || free[3] != 1 {
		t.Fatalf("timeline 10:00–14:00 by the hour: %v free, want [0 0 0 1] (10–11 cleaning, 11–12 booked, 12–13 cleaning)", free)
	}

	// A floating IP may be booked back to back.
	create(t, m, alice, -2*time.Hour, 0, fipReq("ext", 1))
	create(t, m, bob, 0, time.Hour, fipReq("ext", 1))
}
