package manager_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/engine"
	"climate/manager"
	"climate/workload"
)

// failingActions is a driver whose start fails for leases named fail-start-… and whose
// end fails for leases named fail-end-…: the failures a month of leases meets.
type failingActions struct{}

func (failingActions) OnStart(_ context.Context, l *climate.Lease) error {
	if strings.HasPrefix(l.Name, "fail-start-") {
		return fmt.Errorf("driver: cannot start %s", l.Name)
	}
	return nil
}

func (failingActions) OnEnd(_ context.Context, l *climate.Lease) error {
	if strings.HasPrefix(l.Name, "fail-end-") {
		return fmt.Errorf("driver: cannot end %s", l.Name)
	}
	return nil
}

func (failingActions) BeforeEnd(context.Context, *climate.Lease) error { return nil }

// A simulated month (fake clock, the real engine) of host and instance leases, with early
// deletions, extensions, shortenings and failed starts and ends: the usage records'
// reserved and held resource-hours equal a brute-force recomputation from the
// allocations the store held at every instant the clock stopped at, per reservation, in
// all and within a window; each project's charge equals the sum of its records' costs;
// and the budgeted project was never charged past its budget.
func TestUsageMatchesBruteForceOverAMonth(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	const nHosts = 30
	if err := workload.Load(ctx, st, &workload.Book{Hosts: workload.Hosts(nHosts)}, nil); err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(workload.T0)
	clk := &simClock{Fake: fake, armed: make(chan *simTimer, 1)}
	m := manager.New(st, fake, manager.Config{BeforeEnd: manager.DefaultBeforeEnd})
	eng := engine.New(st, clk, engine.Config{Sole: true, ClaimTTL: simClaimTTL, MaxSleep: 10000 * time.Hour,
		Actions: failingActions{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ectx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ectx) }()
	t.Cleanup(func() { cancel(); <-done })
	var cur *simTimer
	waitArmed := func() {
		select {
		case cur = <-clk.armed:
		case <-time.After(30 * time.Second): // a safety net against a hung engine
			t.Fatal("the engine never went back to sleep")
		}
	}
	settle := func() { cur.c <- fake.Now(); waitArmed() }
	waitArmed()

	budget := 400.0
	if _, err := m.UpdateProjectLimits(ctx, admin, "chemistry", climate.LimitsUpdate{Budget: climate.Patch[float64]{Set: true, Value: &budget}}); err != nil {
		t.Fatal(err)
	}

	// The brute force: at each instant the clock stops at, after the engine has handled
	// what was due, the allocations of ACTIVE leases are held until the next instant.
	held := map[string]float64{}     // reservation id → resource-hours held
	heldIn := map[string]float64{}   // the same within [winFrom, winTo)
	reserved := map[string]float64{} // reservation id → resource-hours reserved, as last seen
	winFrom, winTo := workload.T0.Add(10*24*time.Hour), workload.T0.Add(20*24*time.Hour)
	var snapshot []climate.Lease
	var snapAt time.Time
	units := func(r *climate.Reservation, a *climate.Allocation) float64 {
		if a.Slots > 0 {
			return float64(a.Slots * a.Size.VCPUs)
		}
		return 1
	}
	hours := func(a, b time.Time) float64 {
		if !b.After(a) {
			return 0
		}
		return b.Sub(a).Hours()
	}
	maxCharged := 0.0
	observe := func() { // called at each clock position, after the engine settled
		now := fake.Now()
		for _, l := range snapshot {
			if l.Status != climate.LeaseActive {
				continue
			}
			for _, r := range l.Reservations {
				for _, a := range r.Allocations {
					from, to := climate.Later(a.Start, snapAt), climate.Earlier(a.End, now)
					held[r.ID] += units(&r, &a) * hours(from, to)
					heldIn[r.ID] += units(&r, &a) * hours(climate.Later(from, winFrom), climate.Earlier(to, winTo))
				}
			}
		}
		if err := st.View(ctx, func(tx climate.Tx) error {
			var err error
			if snapshot, err = tx.ListLeases(ctx, climate.LeaseFilter{}); err != nil {
				return err
			}
			c, err := tx.ProjectCharged(ctx, "chemistry")
			maxCharged = math.Max(maxCharged, c.Charged)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, l := range snapshot {
			for _, r := range l.Reservations {
				sum := 0.0
				for _, a := range r.Allocations {
					sum += units(&r, &a) * hours(a.Start, a.End)
				}
				reserved[r.ID] = sum
			}
		}
		snapAt = now
	}
	advanceTo := func(T time.Time) {
		for cur.at.After(fake.Now()) && !cur.at.After(T) {
			fake.Set(cur.at)
			settle()
			observe()
		}
		fake.Set(T)
		settle()
		observe()
	}
	observe()

	rng := rand.New(rand.NewSource(7))
	var live []string
	who := []climate.Identity{alice, bob}
	failed, refused, earlyDeletes, extended, shortened := 0, 0, 0, 0, 0
	for step := 0; step < 360; step++ {
		advanceTo(fake.Now().Add(time.Duration(30+rng.Intn(150)) * time.Minute).Truncate(time.Minute))
		now := fake.Now()
		switch p := rng.Intn(100); {
		case p < 55 || len(live) == 0:
			name := fmt.Sprintf("l-%d", step)
			switch rng.Intn(10) {
			case 0:
				name = "fail-start-" + name
			case 1:
				name = "fail-end-" + name
			}
			start := now.Add(time.Duration(rng.Intn(3)) * time.Duration(rng.Intn(24*60)) * time.Minute)
			req := climate.LeaseRequest{Name: name, Start: climate.Date{Time: start}, End: climate.Date{Time: start.Add(time.Duration(2+rng.Intn(48*60)) * time.Minute)}}
			if start.Equal(now) {
				req.Start = climate.Date{Now: true}
			}
			if rng.Intn(4) == 0 {
				n, v := 1+rng.Intn(4), 1+rng.Intn(4)
				req.Reservations = []climate.ReservationRequest{{ResourceType: "virtual:instance", Amount: &n, VCPUs: &v, MemoryMB: ptr(1024), DiskGB: ptr(10)}}
			} else {
				req.Reservations = []climate.ReservationRequest{hostReq(1+rng.Intn(3), 1+rng.Intn(3)+2, "")}
			}
			l, err := m.CreateLease(ctx, who[rng.Intn(2)], req)
			switch {
			case err == nil:
				live = append(live, l.ID)
				if strings.HasPrefix(name, "fail-") {
					failed++
				}
			case climate.ErrorCode(err) == climate.CodeConflict || climate.ErrorCode(err) == climate.CodeForbidden:
				refused++
			default:
				t.Fatalf("create: %v", err)
			}
		case p < 70:
			i := rng.Intn(len(live))
			l, err := m.GetLease(ctx, admin, live[i])
			if err != nil {
				t.Fatal(err)
			}
			if err := m.DeleteLease(ctx, admin, live[i]); err != nil && climate.ErrorCode(err) != climate.CodeConflict {
				t.Fatalf("delete: %v", err)
			} else if err == nil && l.Status == climate.LeaseActive {
				earlyDeletes++
			}
			live = append(live[:i], live[i+1:]...)
		default:
			l, err := m.GetLease(ctx, admin, live[rng.Intn(len(live))])
			if err != nil {
				t.Fatal(err)
			}
			end := l.End.Add(time.Duration(rng.Intn(24*60)-12*60) * time.Minute) // extend or shorten
			_, err = m.UpdateLease(ctx, admin, l.ID, climate.LeaseUpdate{End: climate.Date{Time: end}})
			switch {
			case err == nil && end.After(l.End):
				extended++
			case err == nil:
				shortened++
			}
			if err != nil && climate.ErrorCode(err) != climate.CodeConflict && climate.ErrorCode(err) != climate.CodeInvalid && climate.ErrorCode(err) != climate.CodeForbidden {
				t.Fatalf("update: %v", err)
			}
		}
		settle()
		observe()
	}
	advanceTo(fake.Now().Add(10 * 24 * time.Hour)) // every lease is over

	check := func(q climate.UsageQuery, want map[string]float64, what string) {
		t.Helper()
		got := map[string]climate.ReservationUsage{}
		if err := m.ListUsage(ctx, admin, q, func(batch []climate.ReservationUsage) error {
			for _, u := range batch {
				got[u.ReservationID] = u
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		bad := 0
		for id, w := range want {
			if g := got[id].HeldHours; math.Abs(g-w) > 1e-6 && bad < 10 {
				bad++
				t.Errorf("%s: reservation %s held %.6f resource-hours, brute force says %.6f (record %+v)", what, id, g, w, got[id])
			}
		}
		for id, u := range got {
			if _, ok := want[id]; !ok && u.HeldHours != 0 {
				t.Errorf("%s: reservation %s held %.6f resource-hours unseen by the brute force", what, id, u.HeldHours)
			}
		}
	}
	check(climate.UsageQuery{}, held, "the month")
	check(climate.UsageQuery{From: winFrom, To: winTo}, heldIn, "days 10 to 20")

	// Reserved hours of leases still stored equal their allocations'; charges equal the
	// sum of the records' costs (here: held hours, at the default price of 1).
	var total, heldSum float64
	_ = m.ListUsage(ctx, admin, climate.UsageQuery{}, func(batch []climate.ReservationUsage) error {
		for _, u := range batch {
			if u.Open {
				t.Errorf("reservation %s still open after every lease ended", u.ReservationID)
			}
			if w, ok := reserved[u.ReservationID]; ok && math.Abs(u.ReservedHours-w) > 1e-6 && u.HeldHours > 0 {
				t.Errorf("reservation %s reserved %.6f resource-hours, its allocations %.6f", u.ReservationID, u.ReservedHours, w)
			}
			total += u.Charged
			heldSum += u.HeldHours
		}
		return nil
	})
	var charged float64
	for _, p := range []string{"physics", "chemistry"} {
		a, err := m.GetProjectLimits(ctx, admin, p)
		if err != nil {
			t.Fatal(err)
		}
		charged += a.Charged
		if err := st.View(ctx, func(tx climate.Tx) error {
			c, err := tx.ProjectCharged(ctx, p)
			if c.OpenLeases != 0 || c.OpenHosts != 0 || c.OpenVCPUs != 0 || c.OpenFloatingIPs != 0 {
				t.Errorf("%s still has open leases or units after every lease ended: %+v", p, c)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if math.Abs(charged-total) > 1e-6 || math.Abs(total-heldSum) > 1e-6 {
		t.Errorf("projects charged %.6f; records charge %.6f; held %.6f resource-hours", charged, total, heldSum)
	}
	if maxCharged > budget+1e-6 {
		t.Errorf("chemistry was charged %.6f, past its budget of %.0f", maxCharged, budget)
	}
	if failed == 0 || refused == 0 || earlyDeletes == 0 || extended == 0 || shortened == 0 || len(held) < 50 {
		t.Errorf("the month lacks variety: %d failing leases, %d refusals, %d early deletions, %d extended, %d shortened, %d reservations held",
			failed, refused, earlyDeletes, extended, shortened, len(held))
	}
	t.Logf("%d reservations held %.0f resource-hours; %d leases with failing actions, %d deleted early, %d extended, %d shortened; %d requests refused; chemistry charged at most %.1f of %.0f",
		len(held), heldSum, failed, earlyDeletes, extended, shortened, refused, maxCharged, budget)
}
