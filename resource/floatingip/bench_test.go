package floatingip_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"climate"
	"climate/resource"
	"climate/resource/floatingip"
)

// BenchmarkPlan10000Addresses plans a reservation of 2 addresses (one required) on one of
// 10 networks of 1,000 addresses each, with 50,000 existing allocations over 90 days.
// go test -run '^$' -bench Plan10000 ./resource/floatingip
func BenchmarkPlan10000Addresses(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	fips := make([]climate.FloatingIP, 10000)
	for i := range fips {
		fips[i] = climate.FloatingIP{ID: fmt.Sprintf("f%d", i), FloatingNetworkID: fmt.Sprintf("net%d", i%10),
			Address: fmt.Sprintf("10.%d.%d.%d", i%10, i/256, i%256), Reservable: true, CreatedAt: t0}
	}
	var allocs []climate.Allocation
	next := make([]time.Time, len(fips))
	for i := range next {
		next[i] = t0
	}
	for i := range 50000 {
		p := rng.IntN(len(fips))
		s := next[p].Add(time.Duration(rng.IntN(48)) * time.Hour)
		e := s.Add(time.Duration(1+rng.IntN(72)) * time.Hour)
		next[p] = e
		allocs = append(allocs, climate.Allocation{ID: fmt.Sprint(i), LeaseID: fmt.Sprintf("l%d", i), ResourceID: fips[p].ID, Start: s, End: e})
	}
	v := resource.NewView(nil, fips, nil, allocs)
	ft := floatingip.Type{}
	b.ResetTimer()
	for i := range b.N {
		s := t0.Add(time.Duration(rng.IntN(90*24)) * time.Hour)
		l := &climate.Lease{ID: "new", Start: s, End: s.Add(6 * time.Hour)}
		net := i % 10
		r := climate.Reservation{NetworkID: fmt.Sprintf("net%d", net), Amount: 2,
			RequiredFloatingIPs: []string{fips[net+10*rng.IntN(1000)].Address}}
		_, _ = ft.Plan(v, l, &r, nil, nil, 0)
	}
}
