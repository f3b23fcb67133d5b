package floatingip_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/resource"
	"climate/resource/floatingip"
)

func ptr[T any](v T) *T { return &v }

func TestNewAndUpdateValidate(t *testing.T) {
	ft := floatingip.Type{}
	ok := func(amount int, required ...string) climate.ReservationRequest {
		return climate.ReservationRequest{ResourceType: floatingip.Name, NetworkID: ptr("ext"), Amount: &amount, RequiredFloatingIPs: &required}
	}
	r, err := ft.New(context.Background(), ok(3, "172.24.4.10", "::ffff:172.24.4.11", "2001:DB8::1"))
	if err != nil || r.Amount != 3 || r.NetworkID != "ext" || !slices.Equal(r.RequiredFloatingIPs, []string{"172.24.4.10", "172.24.4.11", "2001:db8::1"}) {
		t.Fatalf("New: %+v, %v", r, err)
	}
	if r, err := ft.New(context.Background(), ok(1)); err != nil || r.RequiredFloatingIPs != nil {
		t.Errorf("New without required: %+v, %v", r, err)
	}
	for name, c := range map[string]struct {
		rr   climate.ReservationRequest
		want string
	}{
		"no network":       {climate.ReservationRequest{Amount: ptr(1)}, "Missing parameter network_id"},
		"empty network":    {climate.ReservationRequest{NetworkID: ptr(""), Amount: ptr(1)}, "Missing parameter network_id"},
		"no amount":        {climate.ReservationRequest{NetworkID: ptr("ext")}, "Missing parameter amount"},
		"zero amount":      {ok(0), "Malformed parameter amount"},
		"negative amount":  {ok(-2), "Malformed parameter amount"},
		"bad address":      {ok(2, "300.1.1.1"), `IP address "300.1.1.1" is invalid form.`},
		"not an address":   {ok(2, "abc"), "is invalid form"},
		"zoned address":    {ok(2, "fe80::1%eth0"), "is invalid form"},
		"too many":         {ok(1, "172.24.4.10", "172.24.4.11"), "larger than amount"},
		"twice":            {ok(2, "172.24.4.10", "172.24.4.10"), "required twice"},
		"a host field":     {climate.ReservationRequest{NetworkID: ptr("ext"), Amount: ptr(1), Min: ptr(1)}, `Unknown parameter "min" in a virtual:floatingip reservation`},
		"long network":     {climate.ReservationRequest{NetworkID: ptr(strings.Repeat("n", 256)), Amount: ptr(1)}, "network_id is too long"},
		"required too big": {ok(1, "1.2.3.4", "1.2.3.5"), "larger than amount"},
	} {
		if _, err := ft.New(context.Background(), c.rr); climate.ErrorCode(err) != climate.CodeInvalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a 400 saying %q", name, err, c.want)
		}
	}

	r, _ = ft.New(context.Background(), ok(2, "172.24.4.10"))
	if err := ft.Update(context.Background(), &r, climate.ReservationRequest{Amount: ptr(4)}); err != nil || r.Amount != 4 {
		t.Errorf("update amount: %+v, %v", r, err)
	}
	for name, c := range map[string]struct {
		rr   climate.ReservationRequest
		want string
	}{
		"network":       {climate.ReservationRequest{NetworkID: ptr("other")}, "network_id of a floating IP reservation cannot be updated"},
		"required":      {climate.ReservationRequest{RequiredFloatingIPs: &[]string{"172.24.4.99"}}, "only be updated to an empty list"},
		"below require": {climate.ReservationRequest{Amount: ptr(0)}, "Malformed parameter amount"},
	} {
		cp := r
		cp.RequiredFloatingIPs = slices.Clone(r.RequiredFloatingIPs)
		if err := ft.Update(context.Background(), &cp, c.rr); climate.ErrorCode(err) != climate.CodeInvalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("update %s: %v, want %q", name, err, c.want)
		}
	}
	if err := ft.Update(context.Background(), &r, climate.ReservationRequest{RequiredFloatingIPs: &[]string{}}); err != nil || r.RequiredFloatingIPs != nil {
		t.Errorf("update required to none: %+v, %v", r, err)
	}
}

// Random books of addresses on two networks: every plan holds only free addresses of the
// reservation's network, all the required ones, exactly amount of them; every refusal is
// right by brute force (too few free, or a required one taken or unknown).
func TestPlanAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	ft := floatingip.Type{}
	planned, refused := 0, 0
	for book := range 40 {
		var fips []climate.FloatingIP
		for i := range 4 + rng.IntN(20) {
			fips = append(fips, climate.FloatingIP{ID: fmt.Sprintf("f%d", i), FloatingNetworkID: []string{"a", "b"}[rng.IntN(2)],
				Address: fmt.Sprintf("10.0.0.%d", i), Reservable: rng.IntN(8) != 0, CreatedAt: t0})
		}
		var allocs []climate.Allocation
		for i := range rng.IntN(60) {
			s := t0.Add(time.Duration(rng.IntN(48)) * time.Hour)
			f := fips[rng.IntN(len(fips))]
			a := climate.Allocation{ID: fmt.Sprint(i), LeaseID: fmt.Sprintf("old%d", i), ResourceID: f.ID, Start: s, End: s.Add(time.Duration(1+rng.IntN(12)) * time.Hour)}
			if !slices.ContainsFunc(allocs, func(b climate.Allocation) bool {
				return b.ResourceID == a.ResourceID && climate.Overlaps(a.Start, a.End, b.Start, b.End)
			}) {
				allocs = append(allocs, a)
			}
		}
		v := resource.NewView(nil, fips, nil, allocs)
		for req := range 50 {
			s := t0.Add(time.Duration(rng.IntN(48)) * time.Hour)
			l := &climate.Lease{ID: fmt.Sprintf("new%d-%d", book, req), Start: s, End: s.Add(time.Duration(1+rng.IntN(12)) * time.Hour)}
			net := []string{"a", "b"}[rng.IntN(2)]
			free := func(f climate.FloatingIP) bool {
				return f.Reservable && !slices.ContainsFunc(allocs, func(a climate.Allocation) bool {
					return a.ResourceID == f.ID && climate.Overlaps(a.Start, a.End, l.Start, l.End)
				})
			}
			r := climate.Reservation{ResourceType: floatingip.Name, NetworkID: net, Amount: 1 + rng.IntN(6)}
			for range rng.IntN(min(r.Amount, 3) + 1) {
				addr := fips[rng.IntN(len(fips))].Address
				if !slices.Contains(r.RequiredFloatingIPs, addr) && len(r.RequiredFloatingIPs) < r.Amount {
					r.RequiredFloatingIPs = append(r.RequiredFloatingIPs, addr)
				}
			}
			allocs, err := ft.Plan(v, l, &r, nil, nil, 0)
			ids := resource.IDs(allocs)

			nFree, requiredOK := 0, true
			for _, f := range fips {
				if f.FloatingNetworkID == net && free(f) {
					nFree++
				}
			}
			for _, addr := range r.RequiredFloatingIPs {
				i := slices.IndexFunc(fips, func(f climate.FloatingIP) bool { return f.Address == addr && f.FloatingNetworkID == net })
				requiredOK = requiredOK && i >= 0 && free(fips[i])
			}
			feasible := nFree >= r.Amount && requiredOK
			if err != nil {
				if feasible {
					t.Fatalf("book %d request %d: refused %+v (%d free on %s, required free: %v): %v", book, req, r, nFree, net, requiredOK, err)
				}
				if !strings.Contains(err.Error(), "Not enough floating IPs available") {
					t.Errorf("refusal %v", err)
				}
				refused++
				continue
			}
			planned++
			if !feasible || len(ids) != r.Amount {
				t.Fatalf("book %d request %d: planned %v for %+v, but brute force says feasible=%v", book, req, ids, r, feasible)
			}
			for _, id := range ids {
				i := slices.IndexFunc(fips, func(f climate.FloatingIP) bool { return f.ID == id })
				if i < 0 || fips[i].FloatingNetworkID != net || !free(fips[i]) {
					t.Fatalf("planned %s, not a free address of %s", id, net)
				}
			}
			for _, addr := range r.RequiredFloatingIPs {
				if !slices.ContainsFunc(ids, func(id string) bool {
					return fips[slices.IndexFunc(fips, func(f climate.FloatingIP) bool { return f.ID == id })].Address == addr
				}) {
					t.Fatalf("required %s not in the plan %v", addr, ids)
				}
			}
		}
	}
	if planned < 100 || refused < 100 {
		t.Errorf("%d plans and %d refusals: the books test too little of one side", planned, refused)
	}
	t.Logf("%d plans, %d refusals, all as brute force says", planned, refused)
}
