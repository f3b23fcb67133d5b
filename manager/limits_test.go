package manager_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
	"climate/postgres"
	"climate/sqlite"
)

// onBothStores runs fn on a fresh SQLite store and a fresh PostgreSQL schema.
func onBothStores(t *testing.T, fn func(t *testing.T, st climate.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(context.Background(), t.TempDir()+"/climate.db")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), postgres.TestDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

func setLimits(t testing.TB, m *manager.Manager, project string, u climate.LimitsUpdate) *climate.ProjectAccount {
	t.Helper()
	a, err := m.UpdateProjectLimits(context.Background(), admin, project, u)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func set[T any](v T) climate.Patch[T] { return climate.Patch[T]{Set: true, Value: &v} }

func wantRefusal(t *testing.T, err error, code climate.Code, text string) {
	t.Helper()
	if climate.ErrorCode(err) != code || !strings.Contains(err.Error(), text) {
		t.Errorf("got %v, want a %s saying %q", err, code, text)
	}
}

// Each per-project limit at its boundary, on both stores: exactly the limit is accepted,
// one second (or one host) more is refused with a 403 that names the rule and what fits;
// a budget exactly spent is accepted and then nothing more; deleting a lease that has not
// started refunds it all; an exempt project is bound by nothing.
func TestProjectLimitsAtTheirBoundaries(t *testing.T) {
	onBothStores(t, func(t *testing.T, st climate.Store) {
		ctx := context.Background()
		m := manager.New(st, clock.NewFake(t0), manager.Config{})
		addHosts(t, m, 4, nil)
		setLimits(t, m, "physics", climate.LimitsUpdate{MaxLeaseDuration: set(5 * time.Hour), MaxAdvance: set(24 * time.Hour),
			Budget: set(10.0), MaxHosts: set(2), MaxLeases: set(3)})
		create := func(name string, start, d time.Duration, hosts int) (*climate.Lease, error) {
			return m.CreateLease(ctx, alice, climate.LeaseRequest{Name: name, Start: at(start), End: at(start + d),
				Reservations: []climate.ReservationRequest{hostReq(hosts, hosts, "")}})
		}
		a, err := create("five-hours", time.Hour, 5*time.Hour, 1)
		if err != nil {
			t.Fatalf("exactly the project's maximum duration: %v", err)
		}
		if a.Cost == nil || *a.Cost != 5 {
			t.Errorf("cost %v, want 5 host-hours", a.Cost)
		}
		_, err = create("five-hours+1s", time.Hour, 5*time.Hour+time.Second, 1)
		wantRefusal(t, err, climate.CodeForbidden, "maximum lease duration of 18000 seconds")

		b, err := create("a-day-ahead", 24*time.Hour, time.Hour, 1)
		if err != nil {
			t.Fatalf("exactly the advance horizon: %v", err)
		}
		_, err = create("a-day-ahead+1s", 24*time.Hour+time.Second, time.Hour, 1)
		wantRefusal(t, err, climate.CodeForbidden, "may book at most 1d ahead: the latest start now is 2030-01-02 10:00:00")

		// 6 of 10 spent: 4 host-hours left.
		_, err = create("over-budget", 20*time.Hour, 4*time.Hour+time.Second, 1)
		wantRefusal(t, err, climate.CodeForbidden, "project physics has 4 units of its budget of 10 units left. The longest lease of these resources it can afford ends at 2030-01-02 10:00:00")
		c, err := create("spends-it-all", 20*time.Hour, 4*time.Hour, 1)
		if err != nil {
			t.Fatalf("a budget exactly spent: %v", err)
		}
		_, err = create("one-second", 22*time.Hour, time.Second, 1)
		wantRefusal(t, err, climate.CodeForbidden, "has 0 units of its budget")
		if err := m.DeleteLease(ctx, alice, c.ID); err != nil {
			t.Fatal(err)
		}
		if acc, _ := m.GetProjectLimits(ctx, alice, "physics"); acc.Charged != 6 {
			t.Errorf("after deleting an unstarted lease: charged %v, want 6", acc.Charged)
		}

		// Hosts at once: a holds 1 host over [11:00, 16:00).
		_, err = create("two-more", 2*time.Hour, time.Hour, 2)
		wantRefusal(t, err, climate.CodeForbidden, "Project physics may hold at most 2 hosts at once; with this lease it would hold 3 from 2030-01-01 12:00:00 (this lease 2): at most 1 fit then")
		if _, err := create("one-more", 2*time.Hour, time.Hour, 1); err != nil {
			t.Fatalf("up to the hosts limit: %v", err)
		}
		if _, err := create("back-to-back", 6*time.Hour, time.Hour, 2); err == nil || !strings.Contains(err.Error(), "leases booked") {
			t.Errorf("a fourth lease: %v, want the leases limit", err)
		}
		if err := m.DeleteLease(ctx, alice, b.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := create("back-to-back", 6*time.Hour, time.Hour, 2); err != nil {
			t.Errorf("two hosts right after the lease holding one ends: %v", err)
		}

		// An update that extends is charged, and may be refused; one that shortens refunds.
		_, err = m.UpdateLease(ctx, alice, a.ID, climate.LeaseUpdate{End: at(6*time.Hour + time.Second)})
		wantRefusal(t, err, climate.CodeForbidden, "maximum lease duration")
		if l, err := m.UpdateLease(ctx, alice, a.ID, climate.LeaseUpdate{End: at(3 * time.Hour)}); err != nil || *l.Cost != 2 {
			t.Fatalf("shortening: %v, cost %v", err, l)
		}

		setLimits(t, m, "physics", climate.LimitsUpdate{Exempt: set(true)})
		if _, err := create("exempt", 72*time.Hour, 48*time.Hour, 4); err != nil {
			t.Errorf("an exempt project: %v", err)
		}
		if _, err := m.CreateLease(ctx, bob, climate.LeaseRequest{Name: "no-limits", Start: at(200 * time.Hour), End: at(300 * time.Hour),
			Reservations: []climate.ReservationRequest{hostReq(4, 4, "")}}); err != nil {
			t.Errorf("a project without limits: %v", err)
		}
	})
}

// Bad limits are refused with a 400 (an unknown project with a 404) and change nothing;
// members read their own project's limits only, and set none.
func TestProjectLimitsBadInputAndPolicy(t *testing.T) {
	onBothStores(t, func(t *testing.T, st climate.Store) {
		ctx := context.Background()
		m := manager.New(st, clock.NewFake(t0), manager.Config{Projects: directory{"physics": true, "chemistry": true}})
		before := setLimits(t, m, "physics", climate.LimitsUpdate{MaxHosts: set(3), Budget: set(100.0),
			PerHour: set(map[string]float64{climate.ClassHost: 2}), Multipliers: set([]climate.PriceMultiplier{{Property: "gpu", Value: "true", Factor: 4}})})
		for _, c := range []struct {
			u    climate.LimitsUpdate
			text string
		}{
			{climate.LimitsUpdate{MaxHosts: set(-1)}, "max_hosts must be from 0"},
			{climate.LimitsUpdate{MaxLeases: set(-5)}, "max_leases must be from 0"},
			{climate.LimitsUpdate{MaxAdvance: set(-time.Hour)}, "max_advance must be a positive number of seconds"},
			{climate.LimitsUpdate{MaxLeaseDuration: set(200 * 365 * 24 * time.Hour)}, "max_lease_duration must be a positive number of seconds"},
			{climate.LimitsUpdate{Budget: set(-1.0)}, "budget must be from 0"},
			{climate.LimitsUpdate{Budget: set(1e20)}, "budget must be from 0"},
			{climate.LimitsUpdate{PerHour: set(map[string]float64{"gpu": 3})}, `unknown resource class "gpu"`},
			{climate.LimitsUpdate{PerHour: set(map[string]float64{climate.ClassVCPU: -0.5})}, "the price of vcpu must be from 0"},
			{climate.LimitsUpdate{Multipliers: set([]climate.PriceMultiplier{{Property: "", Value: "x", Factor: 2}})}, "each needs a host property"},
			{climate.LimitsUpdate{Multipliers: set([]climate.PriceMultiplier{{Property: "gpu", Value: "true", Factor: 0}})}, "must be above 0"},
		} {
			_, err := m.UpdateProjectLimits(ctx, admin, "physics", c.u)
			wantRefusal(t, err, climate.CodeInvalid, c.text)
		}
		_, err := m.UpdateProjectLimits(ctx, admin, "phyiscs", climate.LimitsUpdate{MaxHosts: set(1)})
		wantRefusal(t, err, climate.CodeNotFound, "Project phyiscs does not exist")
		_, err = m.UpdateProjectLimits(ctx, alice, "physics", climate.LimitsUpdate{MaxHosts: set(100)})
		wantRefusal(t, err, climate.CodeForbidden, "climate:limits:put")
		after, err := m.GetProjectLimits(ctx, alice, "physics")
		if err != nil || !reflect.DeepEqual(after, before) {
			t.Errorf("after refused changes: %+v %v, want %+v", after, err, before)
		}
		_, err = m.GetProjectLimits(ctx, bob, "physics")
		wantRefusal(t, err, climate.CodeForbidden, "climate:limits:get")
		err = m.ListUsage(ctx, bob, climate.UsageQuery{ProjectID: "physics"}, func([]climate.ReservationUsage) error { return nil })
		wantRefusal(t, err, climate.CodeForbidden, "climate:usage:get")
		// Clearing a limit.
		if a := setLimits(t, m, "physics", climate.LimitsUpdate{MaxHosts: climate.Patch[int]{Set: true}}); a.Limits.MaxHosts != nil || *a.Limits.Budget != 100 {
			t.Errorf("after clearing max_hosts: %+v", a.Limits)
		}
	})
}

// directory is a fake Keystone project directory for tests.
type directory map[string]bool

func (d directory) ProjectExists(_ context.Context, id string) (bool, error) { return d[id], nil }

// Prices and multipliers: a GPU host costs its price times its multiplier, instance
// slots their vCPU-hours at the vCPU price; the per-lease cost and the usage listing say
// so.
func TestPricesAndMultipliers(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	m := manager.New(st, clock.NewFake(t0), manager.Config{})
	addHosts(t, m, 1, map[string]string{"gpu": "true", "vcpus": "8", "memory_mb": "8192", "local_gb": "100"})
	addHosts(t, m, 1, map[string]string{"vcpus": "8", "memory_mb": "8192", "local_gb": "100"})
	setLimits(t, m, "physics", climate.LimitsUpdate{PerHour: set(map[string]float64{climate.ClassHost: 2, climate.ClassVCPU: 0.25}),
		Multipliers: set([]climate.PriceMultiplier{{Property: "gpu", Value: "true", Factor: 4}})})
	l, err := m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "both", Start: at(time.Hour), End: at(4 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(2, 2, "")}})
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * (2*4 + 2.0); *l.Cost != want {
		t.Errorf("two hosts, one a GPU host, 3 h: cost %v, want %v", *l.Cost, want)
	}
	if err := m.DeleteLease(ctx, alice, l.ID); err != nil {
		t.Fatal(err)
	}
	n, v := 3, 2
	l, err = m.CreateLease(ctx, alice, climate.LeaseRequest{Name: "slots", Start: at(time.Hour), End: at(3 * time.Hour),
		Reservations: []climate.ReservationRequest{{ResourceType: "virtual:instance", Amount: &n, VCPUs: &v, MemoryMB: ptr(512), DiskGB: ptr(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []climate.ReservationUsage
	if err := m.ListUsage(ctx, alice, climate.UsageQuery{}, func(b []climate.ReservationUsage) error { got = append(got, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	var slots *climate.ReservationUsage
	for i := range got {
		if got[i].LeaseID == l.ID {
			slots = &got[i]
		}
	}
	if slots == nil || slots.Class != climate.ClassVCPU || slots.ReservedHours != 12 {
		t.Fatalf("usage of 3 slots of 2 vCPUs for 2 h: %+v, want 12 vCPU-hours", slots)
	}
	gpuSlots := 0
	for _, a := range l.Reservations[0].Allocations {
		if a.ResourceID == "1" {
			gpuSlots += a.Slots
		}
	}
	// 0.25 per vCPU-hour, ×4 for the slots on the GPU host (host 1).
	if want := 0.25 * 2 * 2 * (float64(n-gpuSlots) + 4*float64(gpuSlots)); slots.Charged != want || *l.Cost != want {
		t.Errorf("slots charged %v, lease cost %v; want %v (%d of %d slots on the GPU host)", slots.Charged, *l.Cost, want, gpuSlots, n)
	}
}

// 32 clients of one project race to spend the same budget, through two managers (replicas)
// on one PostgreSQL database: the project is never charged past its budget, and exactly
// as many leases as it affords are booked.
func TestBudgetRaceOnPostgresReplicas(t *testing.T) {
	ctx := context.Background()
	dsn := postgres.TestDSN(t)
	var ms []*manager.Manager
	for range 2 {
		st, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		ms = append(ms, manager.New(st, clock.NewFake(t0), manager.Config{}))
	}
	addHosts(t, ms[0], 40, nil)
	setLimits(t, ms[0], "physics", climate.LimitsUpdate{Budget: set(10.0)}) // ten 1-host-hour leases
	var wg sync.WaitGroup
	var mu sync.Mutex
	booked, refused := 0, 0
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := ms[i%2].CreateLease(ctx, alice, climate.LeaseRequest{Name: "race", Start: at(time.Hour), End: at(2 * time.Hour),
				Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				booked++
			case climate.ErrorCode(err) == climate.CodeForbidden:
				refused++
			default:
				t.Errorf("create: %v", err)
			}
		}()
	}
	wg.Wait()
	a, err := ms[1].GetProjectLimits(ctx, admin, "physics")
	if err != nil {
		t.Fatal(err)
	}
	if booked != 10 || refused != 22 || a.Charged != 10 {
		t.Errorf("booked %d, refused %d, charged %v: want 10 booked, 22 refused, 10 charged", booked, refused, a.Charged)
	}
}
