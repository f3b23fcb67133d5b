package plan_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/plan"
)

// at is a time of day on the test's day.
func at(h, m int) time.Time {
	return epoch.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
}

// TestCleaningKeepsAGapAfterEachAllocation: with a cleaning time of 30 minutes, a host
// booked 10:00–12:00 cannot be booked again until 12:30, nor booked by a lease ending
// after 9:30; the earliest window starts at 12:30; the timeline shows the host busy until
// 12:30; slots keep the same gap, beside whole hosts and beside slots; without a cleaning
// time the bookings may be back to back.
func TestCleaningKeepsAGapAfterEachAllocation(t *testing.T) {
	const clean = 30 * time.Minute
	hosts := []climate.Host{{ID: "h", Reservable: true, VCPUs: 2, MemoryMB: 4096, LocalGB: 10}}
	booked := []climate.Allocation{{LeaseID: "first", ResourceID: "h", Start: at(10, 0), End: at(12, 0)}}
	x := plan.NewIndex(hosts, booked, plan.WithCleaning(clean))
	if x.Cleaning() != clean {
		t.Fatalf("Cleaning() = %s", x.Cleaning())
	}
	place := func(x *plan.Index, s, e time.Time) error {
		_, _, err := x.PlaceHosts(plan.HostRequest{Window: plan.Window{Start: s, End: e}, Min: 1, Max: 1})
		return err
	}
	for _, c := range []struct {
		name string
		s, e time.Time
		ok   bool
	}{
		{"back to back after", at(12, 0), at(13, 0), false},
		{"within the cleaning after", at(12, 29), at(13, 0), false},
		{"30 minutes after", at(12, 30), at(13, 30), true},
		{"back to back before", at(9, 0), at(10, 0), false},
		{"its own cleaning runs into the booking", at(8, 0), at(9, 31), false},
		{"30 minutes before", at(8, 0), at(9, 30), true},
	} {
		err := place(x, c.s, c.e)
		if (err == nil) != c.ok {
			t.Errorf("%s [%s, %s): err = %v, want accepted %v", c.name, c.s.Format("15:04"), c.e.Format("15:04"), err, c.ok)
		}
		if c.ok {
			continue
		}
		if climate.ErrorCode(err) != climate.CodeConflict || !strings.Contains(err.Error(), "booked in the window or within the 30m0s cleaning time") {
			t.Errorf("%s: %v, want a conflict that names the cleaning time", c.name, err)
		}
		if free := x.FreeHosts(plan.HostRequest{Window: plan.Window{Start: c.s, End: c.e}}); len(free) != 0 {
			t.Errorf("%s: FreeHosts = %v", c.name, free)
		}
	}
	if err := place(plan.NewIndex(hosts, booked), at(12, 0), at(13, 0)); err != nil {
		t.Errorf("without cleaning, back to back: %v", err)
	}

	// The earliest hour from 11:00 starts 30 minutes after the booking ends; and a
	// window's cleaning may run past the deadline, the window itself may not.
	slots := x.EarliestSlots(plan.SlotRequest{Count: 1, Duration: time.Hour, After: at(11, 0), Deadline: at(13, 30), Limit: 2})
	if len(slots) == 0 || !slots[0].Start.Equal(at(12, 30)) {
		t.Errorf("earliest = %v, want 12:30", slots)
	}
	// Before the booking, a window must end 30 minutes before it starts.
	slots = x.EarliestSlots(plan.SlotRequest{Count: 1, Duration: time.Hour, After: at(8, 45), Deadline: at(20, 0), Limit: 1})
	if len(slots) == 0 || !slots[0].Start.Equal(at(12, 30)) {
		t.Errorf("earliest from 8:45 = %v, want 12:30 (8:45–9:45 ends within 30 minutes of 10:00)", slots)
	}
	slots = x.EarliestSlots(plan.SlotRequest{Count: 1, Duration: time.Hour, After: at(8, 30), Deadline: at(20, 0), Limit: 1})
	if len(slots) == 0 || !slots[0].Start.Equal(at(8, 30)) {
		t.Errorf("earliest from 8:30 = %v, want 8:30", slots)
	}
	if ends := x.Ends(at(0, 0), at(23, 0)); len(ends) != 1 || !ends[0].Equal(at(12, 30)) {
		t.Errorf("Ends = %v, want 12:30 (when the host is free again)", ends)
	}

	// The timeline counts the host busy during its cleaning.
	buckets, _ := x.Timeline(nil, "", at(11, 30), at(13, 0), 30*time.Minute)
	var free []int
	for _, b := range buckets {
		free = append(free, b.Free)
	}
	if !slices.Equal(free, []int{0, 0, 1}) {
		t.Errorf("timeline 11:30–13:00 by 30m = %v, want [0 0 1]", free)
	}

	// Slots: room for one slot of 2 vCPUs. Beside the whole booking and beside other
	// slots, they keep the same gap; and a host holding slots is not given whole until
	// their cleaning is over.
	slot := climate.Size{VCPUs: 2, MemoryMB: 1024}
	placeSlot := func(x *plan.Index, s, e time.Time) error {
		_, err := x.PlaceSlots(plan.SlotsRequest{Window: plan.Window{Start: s, End: e}, Amount: 1, Size: slot})
		return err
	}
	if err := placeSlot(x, at(12, 0), at(13, 0)); err == nil {
		t.Error("a slot right after the whole booking was placed")
	}
	if err := placeSlot(x, at(12, 30), at(13, 0)); err != nil {
		t.Errorf("a slot 30 minutes after the whole booking: %v", err)
	}
	y := plan.NewIndex(hosts, []climate.Allocation{{LeaseID: "slots", ResourceID: "h", Start: at(10, 0), End: at(12, 0), Slots: 1, Size: slot}}, plan.WithCleaning(clean))
	if err := placeSlot(y, at(12, 0), at(13, 0)); err == nil {
		t.Error("a slot right after a full host's slots was placed")
	}
	if err := placeSlot(y, at(12, 30), at(13, 0)); err != nil {
		t.Errorf("a slot 30 minutes after a full host's slots: %v", err)
	}
	if err := placeSlot(y, at(8, 0), at(9, 45)); err == nil {
		t.Error("a slot whose cleaning runs into a full host's slots was placed")
	}
	if err := place(y, at(12, 15), at(13, 0)); err == nil {
		t.Error("the host was given whole during its slots' cleaning")
	}
	if err := place(y, at(12, 30), at(13, 0)); err != nil {
		t.Errorf("the host whole after its slots' cleaning: %v", err)
	}
	if got := y.SlotTimeline(slot, nil, "", at(11, 30), at(13, 0), 30*time.Minute); !slices.Equal(got, []int{0, 0, 1}) {
		t.Errorf("slot timeline 11:30–13:00 by 30m = %v, want [0 0 1]", got)
	}
}

// TestFitsWithCleaning: the commit's re-check keeps whole holds a cleaning time apart and
// counts slots on their host until their cleaning is over.
func TestFitsWithCleaning(t *testing.T) {
	const clean = 30 * time.Minute
	capacity := map[string]climate.Size{"h": {VCPUs: 2, MemoryMB: 4096}}
	whole := func(s, e time.Time) climate.Allocation {
		return climate.Allocation{ResourceID: "h", Start: s, End: e}
	}
	slot := func(s, e time.Time) climate.Allocation {
		return climate.Allocation{ResourceID: "h", Start: s, End: e, Slots: 1, Size: climate.Size{VCPUs: 2, MemoryMB: 1024}}
	}
	other := []climate.Allocation{whole(at(10, 0), at(12, 0))}
	otherSlot := []climate.Allocation{slot(at(10, 0), at(12, 0))}
	for _, c := range []struct {
		name         string
		mine, others []climate.Allocation
		cleaning     time.Duration
		want         bool
	}{
		{"back to back, no cleaning", []climate.Allocation{whole(at(12, 0), at(13, 0))}, other, 0, true},
		{"back to back after", []climate.Allocation{whole(at(12, 0), at(13, 0))}, other, clean, false},
		{"30 minutes after", []climate.Allocation{whole(at(12, 30), at(13, 0))}, other, clean, true},
		{"back to back before", []climate.Allocation{whole(at(9, 0), at(10, 0))}, other, clean, false},
		{"30 minutes before", []climate.Allocation{whole(at(9, 0), at(9, 30))}, other, clean, true},
		{"a slot right after a whole host", []climate.Allocation{slot(at(12, 0), at(13, 0))}, other, clean, false},
		{"a slot right after a full host's slot", []climate.Allocation{slot(at(12, 0), at(13, 0))}, otherSlot, clean, false},
		{"a slot 30 minutes after a full host's slot", []climate.Allocation{slot(at(12, 30), at(13, 0))}, otherSlot, clean, true},
		{"a slot ending within the cleaning before", []climate.Allocation{slot(at(9, 0), at(9, 45))}, otherSlot, clean, false},
	} {
		if got := plan.Fits(c.mine, c.others, capacity, c.cleaning); got != c.want {
			t.Errorf("%s: Fits = %v, want %v", c.name, got, c.want)
		}
	}
}
