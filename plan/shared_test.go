package plan_test

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"climate"
	"climate/plan"
)

// slotBook is a small random world on an hourly grid: hosts of a few sizes, whole-host
// allocations and instance slots, so the brute force can check every hour.
type slotBook struct {
	hosts  []climate.Host
	allocs []climate.Allocation
}

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func hour(n int) time.Time { return epoch.Add(time.Duration(n) * time.Hour) }

func randomSlotBook(rng *rand.Rand) slotBook {
	var b slotBook
	for i := range 2 + rng.Intn(6) {
		b.hosts = append(b.hosts, climate.Host{
			ID: fmt.Sprintf("h%d", i), Reservable: rng.Intn(8) > 0,
			VCPUs: 4 + 4*rng.Intn(3), MemoryMB: 8192 * (1 + rng.Intn(2)), LocalGB: 100 + 100*rng.Intn(2),
		})
	}
	for l := range rng.Intn(12) {
		h := b.hosts[rng.Intn(len(b.hosts))]
		s := rng.Intn(20)
		a := climate.Allocation{ID: fmt.Sprintf("a%d", l), LeaseID: fmt.Sprintf("l%d", l), ResourceID: h.ID, Start: hour(s), End: hour(s + 1 + rng.Intn(8))}
		if rng.Intn(4) > 0 { // mostly slots: sizes that fit the host, without checking the total
			a.Slots, a.Size = 1+rng.Intn(2), climate.Size{VCPUs: 1 + rng.Intn(2), MemoryMB: 1024 * (1 + rng.Intn(4)), DiskGB: 10 * rng.Intn(3)}
		}
		b.allocs = append(b.allocs, a)
	}
	return b
}

// grid is the brute force's step: every time in the slot tests (hours, cleaning times) is
// a multiple of it, so the load is constant within each step.
const grid = 10 * time.Minute

// randomCleaning is none a third of the time, else a multiple of grid up to 3h.
func randomCleaning(rng *rand.Rand) time.Duration {
	if rng.Intn(3) == 0 {
		return 0
	}
	return time.Duration(1+rng.Intn(18)) * grid
}

// bruteRoom is the obvious definition of a host's room for slots of size over [s, e):
// none if it is not reservable or held whole at any step, else the least, over every
// step, of what fits beside the slots held then (skip's aside); every allocation holds
// the host until clean after its end.
func bruteRoom(b slotBook, h climate.Host, size climate.Size, s, e time.Time, skip string, clean time.Duration) int {
	if !h.Reservable {
		return 0
	}
	room := 1 << 30
	for t := s; t.Before(e); t = t.Add(grid) {
		var load climate.Size
		for _, a := range b.allocs {
			if a.ResourceID != h.ID || a.LeaseID == skip || !climate.Overlaps(a.Start, a.End.Add(clean), t, t.Add(grid)) {
				continue
			}
			if !a.Shared() {
				return 0
			}
			load = load.Plus(a.Size.Times(a.Slots))
		}
		n := 0
		for size.Times(n + 1).Plus(load).Within(h.Capacity()) {
			n++
		}
		room = min(room, n)
	}
	return room
}

// TestPlaceSlotsAgreesWithBruteForce: on random worlds, every accepted plan fits at every
// instant and keeps the affinity rule, and every refused request truly does not fit; with a
// cleaning time, every hold (the request's too) lasts that much longer.
func TestPlaceSlotsAgreesWithBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	accepted, refused := 0, 0
	for round := range 3000 {
		b := randomSlotBook(rng)
		clean := randomCleaning(rng)
		x := plan.NewIndex(b.hosts, b.allocs, plan.WithCleaning(clean))
		s := rng.Intn(20)
		e := s + 1 + rng.Intn(6)
		size := climate.Size{VCPUs: 1 + rng.Intn(4), MemoryMB: 1024 * (1 + rng.Intn(8)), DiskGB: 10 * rng.Intn(4)}
		var affinity *bool
		if k := rng.Intn(3); k < 2 {
			affinity = new(bool)
			*affinity = k == 0
		}
		skip := ""
		if rng.Intn(4) == 0 && len(b.allocs) > 0 {
			skip = b.allocs[rng.Intn(len(b.allocs))].LeaseID
		}
		r := plan.SlotsRequest{Window: plan.Window{Start: hour(s), End: hour(e)}, Amount: 1 + rng.Intn(8), Size: size, Affinity: affinity, Lease: skip, Rotate: rng.Intn(10)}
		got, err := x.PlaceSlots(r)
		room := map[string]int{}
		for _, h := range b.hosts {
			room[h.ID] = bruteRoom(b, h, size, hour(s), hour(e).Add(clean), skip, clean)
		}
		desc := fmt.Sprintf("round %d: %+v, cleaning %s, room %v", round, r, clean, room)
		if err != nil {
			refused++
			total, hosts, largest := 0, 0, 0
			for _, n := range room {
				total, largest = total+n, max(largest, n)
				if n > 0 {
					hosts++
				}
			}
			switch {
			case affinity == nil && total >= r.Amount, affinity != nil && *affinity && largest >= r.Amount, affinity != nil && !*affinity && hosts >= r.Amount:
				t.Fatalf("%s: refused (%v) but it fits", desc, err)
			}
			continue
		}
		accepted++
		sum := 0
		for _, hs := range got {
			if hs.Slots <= 0 || hs.Slots > room[hs.HostID] {
				t.Fatalf("%s: %d slots on %s, room for %d", desc, hs.Slots, hs.HostID, room[hs.HostID])
			}
			sum += hs.Slots
		}
		if sum != r.Amount {
			t.Fatalf("%s: %d slots placed, %d asked", desc, sum, r.Amount)
		}
		if affinity != nil && *affinity && len(got) != 1 {
			t.Fatalf("%s: affinity spread over %v", desc, got)
		}
		if affinity != nil && !*affinity && len(got) != r.Amount {
			t.Fatalf("%s: anti-affinity placed %v", desc, got)
		}
		ids := make([]string, len(got))
		for i, hs := range got {
			ids[i] = hs.HostID
		}
		slices.Sort(ids)
		if len(slices.Compact(ids)) != len(got) {
			t.Fatalf("%s: a host listed twice: %v", desc, got)
		}
	}
	if accepted < 500 || refused < 500 {
		t.Fatalf("the random requests do not exercise both answers: %d accepted, %d refused", accepted, refused)
	}
}

// TestSlotsAndWholeHostsExcludeEachOther: a host holding slots in a window is not given
// whole, and a host held whole gets no slots; outside the window both are free.
func TestSlotsAndWholeHostsExcludeEachOther(t *testing.T) {
	hosts := []climate.Host{{ID: "a", Reservable: true, VCPUs: 8, MemoryMB: 8192, LocalGB: 100}, {ID: "b", Reservable: true, VCPUs: 8, MemoryMB: 8192, LocalGB: 100}}
	x := plan.NewIndex(hosts, []climate.Allocation{
		{LeaseID: "slots", ResourceID: "a", Start: hour(0), End: hour(2), Slots: 1, Size: climate.Size{VCPUs: 1, MemoryMB: 512}},
		{LeaseID: "whole", ResourceID: "b", Start: hour(1), End: hour(3)},
	})
	w := plan.Window{Start: hour(1), End: hour(2)}
	if got, _, err := x.PlaceHosts(plan.HostRequest{Window: w, Min: 1, Max: 2}); err == nil {
		t.Fatalf("whole hosts %v given while a holds slots and b is held", got)
	}
	if got, err := x.PlaceSlots(plan.SlotsRequest{Window: w, Amount: 1, Size: climate.Size{VCPUs: 1, MemoryMB: 512}}); err != nil || got[0].HostID != "a" {
		t.Fatalf("slots = %v, %v; want them on a (b is held whole)", got, err)
	}
	later := plan.Window{Start: hour(3), End: hour(4)}
	if got, _, err := x.PlaceHosts(plan.HostRequest{Window: later, Min: 2, Max: 2}); err != nil || len(got) != 2 {
		t.Fatalf("after both: hosts %v, %v; want both", got, err)
	}
	// Removing the slots frees a for whole-host use in the window.
	x.Apply([]climate.Allocation{{LeaseID: "slots", ResourceID: "a", Start: hour(0), End: hour(2), Slots: 1, Size: climate.Size{VCPUs: 1, MemoryMB: 512}}}, nil)
	if got, _, err := x.PlaceHosts(plan.HostRequest{Window: w, Min: 1, Max: 1}); err != nil || got[0] != "a" {
		t.Fatalf("after removing the slots: %v, %v; want a", got, err)
	}
}

// TestPlaceSlotsPacksOntoPartlyUsedHosts: without affinity, slots go to the fullest
// host with room, leaving empty hosts whole.
func TestPlaceSlotsPacksOntoPartlyUsedHosts(t *testing.T) {
	var hosts []climate.Host
	for i := range 5 {
		hosts = append(hosts, climate.Host{ID: fmt.Sprint("h", i), Reservable: true, VCPUs: 8, MemoryMB: 32768, LocalGB: 500})
	}
	one := climate.Size{VCPUs: 1, MemoryMB: 1024}
	x := plan.NewIndex(hosts, []climate.Allocation{
		{LeaseID: "x", ResourceID: "h3", Start: hour(0), End: hour(10), Slots: 2, Size: one},
		{LeaseID: "y", ResourceID: "h1", Start: hour(0), End: hour(10), Slots: 6, Size: one},
	})
	got, err := x.PlaceSlots(plan.SlotsRequest{Window: plan.Window{Start: hour(1), End: hour(2)}, Amount: 4, Size: one})
	want := []plan.HostSlots{{HostID: "h1", Slots: 2}, {HostID: "h3", Slots: 2}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("PlaceSlots = %v, %v; want %v (h1 is fullest, then h3; empty hosts untouched)", got, err, want)
	}
}

// TestSlotTimelineAgreesWithBruteForce: each bucket counts, over the hosts, the slots that
// fit for the whole bucket, every hold lasting the cleaning time longer.
func TestSlotTimelineAgreesWithBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for round := range 500 {
		b := randomSlotBook(rng)
		clean := randomCleaning(rng)
		x := plan.NewIndex(b.hosts, b.allocs, plan.WithCleaning(clean))
		size := climate.Size{VCPUs: 1 + rng.Intn(3), MemoryMB: 1024 * (1 + rng.Intn(4)), DiskGB: 10 * rng.Intn(3)}
		from, step := rng.Intn(10), 1+rng.Intn(3)
		to := from + 1 + rng.Intn(20)
		got := x.SlotTimeline(size, nil, "", hour(from), hour(to), time.Duration(step)*time.Hour)
		var want []int
		for s := from; s < to; s += step {
			sum := 0
			for _, h := range b.hosts {
				sum += bruteRoom(b, h, size, hour(s), hour(min(s+step, to)), "", clean)
			}
			want = append(want, sum)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: size %+v, cleaning %s, %dh–%dh by %dh: got %v, want %v", round, size, clean, from, to, step, got, want)
		}
	}
}

// TestFits: the commit's re-check refuses whole holds shared with anything and slots over
// capacity at some instant of the new lease's window, and only those.
func TestFits(t *testing.T) {
	c := map[string]climate.Size{"h": {VCPUs: 4, MemoryMB: 4096}}
	two := climate.Size{VCPUs: 2, MemoryMB: 1024}
	slots := func(n, from, to int) climate.Allocation {
		return climate.Allocation{ResourceID: "h", Start: hour(from), End: hour(to), Slots: n, Size: two}
	}
	whole := climate.Allocation{ResourceID: "h", Start: hour(0), End: hour(1)}
	for _, c2 := range []struct {
		name         string
		mine, others []climate.Allocation
		want         bool
	}{
		{"beside slots, within capacity", []climate.Allocation{slots(1, 0, 4)}, []climate.Allocation{slots(1, 1, 2)}, true},
		{"over capacity at one instant", []climate.Allocation{slots(1, 0, 4)}, []climate.Allocation{slots(1, 1, 3), slots(1, 2, 5)}, false},
		{"two of mine and one other over", []climate.Allocation{slots(1, 0, 4), slots(1, 0, 4)}, []climate.Allocation{slots(1, 3, 5)}, false},
		{"the others overload outside my window", []climate.Allocation{slots(1, 0, 2)}, []climate.Allocation{slots(1, 1, 9), slots(2, 2, 9)}, true},
		{"back to back", []climate.Allocation{slots(2, 0, 2)}, []climate.Allocation{slots(2, 2, 4)}, true},
		{"slots over a whole host", []climate.Allocation{slots(1, 0, 4)}, []climate.Allocation{whole}, false},
		{"a whole host over slots", []climate.Allocation{whole}, []climate.Allocation{slots(1, 0, 4)}, false},
		{"a whole host after slots", []climate.Allocation{whole}, []climate.Allocation{slots(1, 1, 4)}, true},
	} {
		if got := plan.Fits(c2.mine, c2.others, c, 0); got != c2.want {
			t.Errorf("%s: Fits = %v", c2.name, got)
		}
	}
}
