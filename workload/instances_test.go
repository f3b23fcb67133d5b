package workload

import (
	"testing"
	"time"

	"climate"
)

// The instance book never overbooks a host: at every hour the slots held fit its capacity,
// and a host held whole holds nothing else; requests are deterministic and in the horizon.
func TestGenerateInstancesFitsEveryHour(t *testing.T) {
	b := GenerateInstances(200, 2000)
	if len(b.Leases) > 2200 || len(b.Leases) < 2150 {
		t.Fatalf("%d leases, want 2,200 less the few requests no host could take", len(b.Leases))
	}
	type hourly struct {
		load  climate.Size
		whole int
		slots bool
	}
	perHost := map[string][]hourly{}
	capacity := map[string]climate.Size{}
	for _, h := range b.Hosts {
		perHost[h.ID] = make([]hourly, InstanceHorizonHours)
		capacity[h.ID] = h.Capacity()
	}
	slots, wholes := 0, 0
	for _, l := range b.Leases {
		if len(l.Reservations) != 1 {
			t.Fatalf("lease %s: %d reservations", l.ID, len(l.Reservations))
		}
		r := l.Reservations[0]
		n := 0
		for _, a := range r.Allocations {
			if a.LeaseID != l.ID || a.ReservationID != r.ID || !a.Start.Equal(l.Start) || !a.End.Equal(l.End) {
				t.Fatalf("allocation %+v does not belong to lease %s", a, l.ID)
			}
			for h := int(a.Start.Sub(T0) / time.Hour); h < int(a.End.Sub(T0)/time.Hour); h++ {
				u := &perHost[a.ResourceID][h]
				if a.Shared() {
					u.load, u.slots = u.load.Plus(a.Size.Times(a.Slots)), true
				} else {
					u.whole++
				}
			}
			n += a.Slots
		}
		if r.ResourceType == "virtual:instance" {
			slots += len(r.Allocations)
			if n != r.Amount || n == 0 {
				t.Errorf("lease %s: amount %d, %d slots placed", l.ID, r.Amount, n)
			}
		} else {
			wholes += len(r.Allocations)
		}
	}
	for id, hours := range perHost {
		for h, u := range hours {
			if !u.load.Within(capacity[id]) || u.whole > 1 || (u.whole == 1 && u.slots) {
				t.Fatalf("host %s, hour %d: %+v beyond %+v", id, h, u, capacity[id])
			}
		}
	}
	if slots < 3000 || wholes < 200 {
		t.Errorf("%d slot allocations, %d whole-host ones: too few", slots, wholes)
	}
	reqs := InstanceRequests(100)
	again := InstanceRequests(100)
	for i, q := range reqs {
		if q.Window.Start.Before(T0) || q.Window.End.After(T0.Add(InstanceHorizonHours*time.Hour)) || q.Amount < 1 || q.Amount > 8 {
			t.Fatalf("request %d: %+v", i, q)
		}
		if q.Window != again[i].Window || q.Size != again[i].Size || (q.Affinity == nil) != (again[i].Affinity == nil) {
			t.Fatalf("request %d differs between runs", i)
		}
	}
}

// Floating-IP allocations never overlap on one address, and requests name real addresses.
func TestFloatingIPWorkload(t *testing.T) {
	fips := FloatingIPs(500, 10)
	allocs := FloatingIPAllocations(fips, 3000)
	byAddr := map[string][]climate.Allocation{}
	for _, a := range allocs {
		for _, o := range byAddr[a.ResourceID] {
			if climate.Overlaps(a.Start, a.End, o.Start, o.End) {
				t.Fatalf("%+v overlaps %+v", a, o)
			}
		}
		byAddr[a.ResourceID] = append(byAddr[a.ResourceID], a)
	}
	addrs := map[[2]string]bool{}
	for _, f := range fips {
		if addrs[[2]string{f.FloatingNetworkID, f.Address}] {
			t.Fatalf("duplicate address %s", f.Address)
		}
		addrs[[2]string{f.FloatingNetworkID, f.Address}] = true
	}
	for i, q := range FloatingIPRequests(200, fips, 10) {
		if q.Required != "" && !addrs[[2]string{q.Network, q.Required}] {
			t.Fatalf("request %d: %s is not on %s", i, q.Required, q.Network)
		}
	}
}
