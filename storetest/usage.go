package storetest

import (
	"reflect"
	"testing"
	"time"

	"climate"
)

// testUsage: usage records round-trip (held times NULL or set), are replaced by
// allocation, list by lease, reservation then allocation and filter by project, lease,
// openness and window, page by keyset; charges add up per project; limits round-trip.
func testUsage(t *testing.T, s climate.Store) {
	rec := func(res, alloc, lease, project string, start time.Duration, closed bool) climate.UsageRecord {
		return climate.UsageRecord{AllocationID: alloc, ReservationID: res, LeaseID: lease, LeaseName: "n-" + lease, ProjectID: project,
			ResourceType: "physical:host", ResourceID: "1", Class: climate.ClassHost, Units: 1,
			Start: now.Add(start), End: now.Add(start + time.Hour), Rate: 2.5, Cost: 2.5, Closed: closed, CreatedAt: now, UpdatedAt: now}
	}
	rs := []climate.UsageRecord{
		rec("r2", "a3", "l2", "p1", 2*time.Hour, false),
		rec("r1", "a2", "l1", "p1", 0, false),
		rec("r1", "a1", "l1", "p1", 0, true),
		rec("r3", "a4", "l3", "p2", 0, false),
	}
	rs[2].HeldFrom, rs[2].HeldUntil, rs[2].Cost = now, now.Add(30*time.Minute), 1.25
	update(t, s, func(tx climate.Tx) error { return tx.PutUsage(ctx, rs) })
	list := func(f climate.UsageFilter) []climate.UsageRecord {
		t.Helper()
		var out []climate.UsageRecord
		view(t, s, func(tx climate.Tx) error {
			var err error
			out, err = tx.ListUsage(ctx, f)
			return err
		})
		return out
	}
	ids := func(us []climate.UsageRecord) []string {
		var out []string
		for _, u := range us {
			out = append(out, u.AllocationID)
		}
		return out
	}
	all := list(climate.UsageFilter{})
	if got, want := ids(all), []string{"a1", "a2", "a3", "a4"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order: %v, want %v", got, want)
	}
	if !reflect.DeepEqual(all[0], rs[2]) || !reflect.DeepEqual(all[1], rs[1]) {
		t.Errorf("round trip:\n%+v\n%+v\nwant\n%+v\n%+v", all[0], all[1], rs[2], rs[1])
	}
	for _, c := range []struct {
		f    climate.UsageFilter
		want []string
	}{
		{climate.UsageFilter{ProjectID: "p1"}, []string{"a1", "a2", "a3"}},
		{climate.UsageFilter{LeaseID: "l1"}, []string{"a1", "a2"}},
		{climate.UsageFilter{LeaseIDs: []string{"l1", "l3"}}, []string{"a1", "a2", "a4"}},
		{climate.UsageFilter{ProjectID: "p1", OpenOnly: true}, []string{"a2", "a3"}},
		{climate.UsageFilter{From: now.Add(time.Hour)}, []string{"a3"}},
		{climate.UsageFilter{To: now.Add(2 * time.Hour)}, []string{"a1", "a2", "a4"}},
		{climate.UsageFilter{AfterLease: "l1", AfterReservation: "r1", AfterAllocation: "a1", Limit: 2}, []string{"a2", "a3"}},
	} {
		if got := ids(list(c.f)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.f, got, c.want)
		}
	}
	// Replaced by allocation id.
	rs[1].Closed, rs[1].HeldFrom, rs[1].HeldUntil, rs[1].Cost, rs[1].LeaseName = true, now, now.Add(time.Hour), 2.5, "renamed"
	update(t, s, func(tx climate.Tx) error { return tx.PutUsage(ctx, rs[1:2]) })
	if got := list(climate.UsageFilter{LeaseID: "l1"}); len(got) != 2 || !reflect.DeepEqual(got[1], rs[1]) {
		t.Errorf("after replace: %+v, want %+v", got, rs[1])
	}

	// Charges.
	var total climate.ProjectCharge
	update(t, s, func(tx climate.Tx) error {
		if _, err := tx.ChargeProject(ctx, "p1", climate.ProjectCharge{Charged: 10, OpenLeases: 1, OpenHosts: 3, OpenVCPUs: 8, OpenFloatingIPs: 1}, false); err != nil {
			return err
		}
		var err error
		total, err = tx.ChargeProject(ctx, "p1", climate.ProjectCharge{Charged: -2.5, OpenLeases: 1, OpenHosts: -1, OpenVCPUs: 4}, true)
		return err
	})
	want := climate.ProjectCharge{Charged: 7.5, OpenLeases: 2, OpenHosts: 2, OpenVCPUs: 12, OpenFloatingIPs: 1}
	if total != want {
		t.Errorf("charged %+v, want %+v", total, want)
	}
	// A charge nobody checks (it may only be recorded) counts in the totals read after it,
	// and in those a later checked charge returns.
	update(t, s, func(tx climate.Tx) error {
		_, err := tx.ChargeProject(ctx, "p1", climate.ProjectCharge{Charged: 1, OpenLeases: 1, OpenHosts: 1}, false)
		return err
	})
	var mid climate.ProjectCharge
	view(t, s, func(tx climate.Tx) (err error) { mid, err = tx.ProjectCharged(ctx, "p1"); return err })
	if w := (climate.ProjectCharge{Charged: 8.5, OpenLeases: 3, OpenHosts: 3, OpenVCPUs: 12, OpenFloatingIPs: 1}); mid != w {
		t.Errorf("after an unchecked charge: %+v, want %+v", mid, w)
	}
	update(t, s, func(tx climate.Tx) (err error) {
		total, err = tx.ChargeProject(ctx, "p1", climate.ProjectCharge{Charged: -1, OpenLeases: -1, OpenHosts: -1}, true)
		return err
	})
	if total != want {
		t.Errorf("checked charge after an unchecked one: %+v, want %+v", total, want)
	}
	view(t, s, func(tx climate.Tx) error {
		for p, want := range map[string]climate.ProjectCharge{"p1": want, "p2": {}} {
			got, err := tx.ProjectCharged(ctx, p)
			if err != nil {
				return err
			}
			if got != want {
				t.Errorf("%s charged %v, want %v", p, got, want)
			}
		}
		return nil
	})

	// Limits.
	n, d, b := 4, 7*24*time.Hour, 100.5
	lim := &climate.ProjectLimits{ProjectID: "p1", MaxHosts: &n, MaxLeaseDuration: &d, Budget: &b, Exempt: true, UpdatedAt: now,
		Prices: climate.Prices{PerHour: map[string]float64{climate.ClassHost: 2}, Multipliers: []climate.PriceMultiplier{{Property: "gpu", Value: "true", Factor: 4}}}}
	update(t, s, func(tx climate.Tx) error { return tx.PutProjectLimits(ctx, lim) })
	view(t, s, func(tx climate.Tx) error {
		got, ok, err := tx.GetProjectLimits(ctx, "p1")
		if err != nil || !ok || !reflect.DeepEqual(got, lim) {
			t.Errorf("limits: %+v %v %v, want %+v", got, ok, err, lim)
		}
		if _, ok, err := tx.GetProjectLimits(ctx, "p2"); ok || err != nil {
			t.Errorf("p2 has limits: %v %v", ok, err)
		}
		return nil
	})
	lim.MaxHosts, lim.Budget = nil, nil
	update(t, s, func(tx climate.Tx) error { return tx.PutProjectLimits(ctx, lim) })
	view(t, s, func(tx climate.Tx) error {
		got, _, err := tx.GetProjectLimits(ctx, "p1")
		if err != nil || got.MaxHosts != nil || got.Budget != nil || *got.MaxLeaseDuration != d {
			t.Errorf("limits after clearing: %+v %v", got, err)
		}
		return nil
	})
}
