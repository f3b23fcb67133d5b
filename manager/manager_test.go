package manager_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/manager"
	"climate/sqlite"
)

var t0 = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

var (
	admin  = climate.Identity{UserID: "root", ProjectID: "ops", Roles: []string{"admin"}}
	alice  = climate.Identity{UserID: "alice", ProjectID: "physics", Roles: []string{"member"}}
	bob    = climate.Identity{UserID: "bob", ProjectID: "chemistry", Roles: []string{"member"}}
	reader = climate.Identity{UserID: "rita", ProjectID: "physics", Roles: []string{"reader"}}
)

// openStore opens a SQLite store of the test's own, closed when the test ends.
func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/climate.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func setup(t *testing.T) (*manager.Manager, *sqlite.Store, *clock.Fake) {
	t.Helper()
	st := openStore(t)
	clk := clock.NewFake(t0)
	return manager.New(st, clk, manager.Config{BeforeEnd: manager.DefaultBeforeEnd}), st, clk
}

func addHosts(t *testing.T, m *manager.Manager, n int, extra map[string]string) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		fields := map[string]string{"name": fmt.Sprintf("host-%d-%d", len(extra), i)}
		for k, v := range extra {
			fields[k] = v
		}
		h, err := m.CreateHost(context.Background(), admin, fields)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.ID)
	}
	return ids
}

func ptr[T any](v T) *T { return &v }

func hostReq(min, max int, props string) climate.ReservationRequest {
	return climate.ReservationRequest{ResourceType: climate.ResourceTypeHost, Min: &min, Max: &max, ResourceProperties: &props}
}

func at(d time.Duration) climate.Date { return climate.Date{Time: t0.Add(d)} }

func create(t *testing.T, m *manager.Manager, who climate.Identity, start, end time.Duration, res ...climate.ReservationRequest) *climate.Lease {
	t.Helper()
	l, err := m.CreateLease(context.Background(), who, climate.LeaseRequest{Name: "l", Start: at(start), End: at(end), Reservations: res})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func hostsOf(l *climate.Lease) []string {
	var out []string
	for _, r := range l.Reservations {
		for _, a := range r.Allocations {
			out = append(out, a.ResourceID)
		}
	}
	return out
}

func wantCode(t *testing.T, err error, code climate.Code, text string) {
	t.Helper()
	if err == nil || climate.ErrorCode(err) != code || !strings.Contains(err.Error(), text) {
		t.Fatalf("err = %v (code %s), want %s containing %q", err, climate.ErrorCode(err), code, text)
	}
}

func TestCreateLeaseBooksMatchingHostsAndEvents(t *testing.T) {
	m, _, _ := setup(t)
	addHosts(t, m, 2, map[string]string{"gpu": "false"})
	gpus := addHosts(t, m, 2, map[string]string{"gpu": "true", "mem": "16"})
	l := create(t, m, alice, time.Hour, 3*time.Hour, hostReq(1, 5, `["and", ["==", "$gpu", "true"], [">=", "$mem", "4"]]`))
	if got := strings.Join(hostsOf(l), ","); got != strings.Join(gpus, ",") {
		t.Fatalf("hosts %s, want the gpu hosts %v (numeric >= compares 16 >= 4 as numbers)", got, gpus)
	}
	if l.ProjectID != "physics" || l.UserID != "alice" || l.Status != climate.LeasePending {
		t.Fatalf("lease %+v", l)
	}
	be := l.Event(climate.EventBeforeEndLease)
	if be == nil || !be.Time.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("before_end event %+v, want end - 60 min", be)
	}
	// The same window is now full for gpu hosts; the explanation counts why.
	_, err := m.CreateLease(context.Background(), alice, climate.LeaseRequest{Name: "x", Start: at(2 * time.Hour), End: at(4 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(1, 1, `["==", "$gpu", "true"]`)}})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available: 1 requested, 0 free in the window; of 4 registered hosts 2 do not match the properties, 0 are not reservable, 0 are taken by this lease and 2 are booked in the window")
	// Back to back is no conflict (half-open windows).
	create(t, m, alice, 3*time.Hour, 4*time.Hour, hostReq(2, 2, `["==", "$gpu", "true"]`))
}

func TestCreateLeaseValidation(t *testing.T) {
	m, st, _ := setup(t)
	addHosts(t, m, 1, nil)
	cases := []struct {
		name string
		req  climate.LeaseRequest
		code climate.Code
		text string
	}{
		{"missing name", climate.LeaseRequest{Start: at(time.Hour), End: at(2 * time.Hour)}, climate.CodeInvalid, "Missing parameter name"},
		{"missing start", climate.LeaseRequest{Name: "x", End: at(2 * time.Hour)}, climate.CodeInvalid, "Missing parameter start_date"},
		{"missing end", climate.LeaseRequest{Name: "x", Start: at(time.Hour)}, climate.CodeInvalid, "Missing parameter end_date"},
		{"start in the past", climate.LeaseRequest{Name: "x", Start: at(-time.Hour), End: at(time.Hour)}, climate.CodeInvalid, "Start date must be later than current date"},
		{"end before start", climate.LeaseRequest{Name: "x", Start: at(2 * time.Hour), End: at(time.Hour)}, climate.CodeInvalid, "End date must be later than start date."},
		{"before_end outside", climate.LeaseRequest{Name: "x", Start: at(time.Hour), End: at(2 * time.Hour), BeforeEnd: ptr(t0.Add(3 * time.Hour))}, climate.CodeInvalid, "Datetime is out of lease limits"},
		{"no resource type", climate.LeaseRequest{Name: "x", Start: at(time.Hour), End: at(2 * time.Hour), Reservations: []climate.ReservationRequest{{}}}, climate.CodeInvalid, "Missing parameter resource_type"},
		{"unsupported type", climate.LeaseRequest{Name: "x", Start: at(time.Hour), End: at(2 * time.Hour), Reservations: []climate.ReservationRequest{{ResourceType: "virtual:nope"}}}, climate.CodeInvalid, "The virtual:nope resource type is not supported"},
		{"missing max", climate.LeaseRequest{Name: "x", Start: at(time.Hour), End: at(2 * time.Hour), Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: ptr(1)}}}, climate.CodeInvalid, "Missing parameter max"},
		{"min zero", climate.LeaseRequest{Name: "x", Start: at(time.Hour), End: at(2 * time.Hour), Reservations: []climate.ReservationRequest{hostReq(0, 1, "")}}, climate.CodeInvalid, "must be greater than or equal to 1"},
		{"min above max", climate.LeaseRequest{Name: "x", Start: at(time.Hour), End: at(2 * time.Hour), Reservations: []climate.ReservationRequest{hostReq(2, 1, "")}}, climate.CodeInvalid, "Max must be equal to or larger than min"},
		{"malformed query", climate.LeaseRequest{Name: "x", Start: at(time.Hour), End: at(2 * time.Hour), Reservations: []climate.ReservationRequest{hostReq(1, 1, `["==", "gpu"]`)}}, climate.CodeInvalid, "Malformed requirements"},
		{"unknown property", climate.LeaseRequest{Name: "x", Start: at(time.Hour), End: at(2 * time.Hour), Reservations: []climate.ReservationRequest{hostReq(1, 1, `["==", "$gpux", "1"]`)}}, climate.CodeInvalid, `Unknown property "gpux"`},
		{"reader cannot create", climate.LeaseRequest{Name: "x", Start: at(time.Hour), End: at(2 * time.Hour)}, climate.CodeForbidden, "blazar:leases:post"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			who := alice
			if tc.code == climate.CodeForbidden {
				who = reader
			}
			_, err := m.CreateLease(context.Background(), who, tc.req)
			wantCode(t, err, tc.code, tc.text)
		})
	}
	leases, _, _ := manager.CollectLeases(context.Background(), m, admin, climate.LeaseQuery{})
	if len(leases) != 0 {
		t.Fatalf("rejected requests wrote %d leases", len(leases))
	}
	_ = st
}

func TestProjectsAreIsolated(t *testing.T) {
	m, _, _ := setup(t)
	addHosts(t, m, 2, nil)
	l := create(t, m, alice, time.Hour, 2*time.Hour, hostReq(1, 1, ""))
	ctx := context.Background()
	if _, err := m.GetLease(ctx, bob, l.ID); climate.ErrorCode(err) != climate.CodeNotFound {
		t.Fatalf("bob sees alice's lease: %v", err)
	}
	if _, err := m.UpdateLease(ctx, bob, l.ID, climate.LeaseUpdate{Name: ptr("mine")}); climate.ErrorCode(err) != climate.CodeNotFound {
		t.Fatalf("bob renamed alice's lease: %v", err)
	}
	if err := m.DeleteLease(ctx, bob, l.ID); climate.ErrorCode(err) != climate.CodeNotFound {
		t.Fatalf("bob deleted alice's lease: %v", err)
	}
	if ls, _, _ := manager.CollectLeases(ctx, m, bob, climate.LeaseQuery{}); len(ls) != 0 {
		t.Fatalf("bob lists %d leases", len(ls))
	}
	if ls, _, _ := manager.CollectLeases(ctx, m, reader, climate.LeaseQuery{}); len(ls) != 1 {
		t.Fatalf("a reader of physics lists %d leases", len(ls))
	}
	if ls, _, _ := manager.CollectLeases(ctx, m, admin, climate.LeaseQuery{}); len(ls) != 1 {
		t.Fatalf("admin lists %d leases", len(ls))
	}
	if _, err := m.ListHosts(ctx, alice); climate.ErrorCode(err) != climate.CodeForbidden {
		t.Fatalf("a member listed hosts: %v", err)
	}
	if _, err := m.CreateHost(ctx, alice, map[string]string{"name": "x"}); climate.ErrorCode(err) != climate.CodeForbidden {
		t.Fatalf("a member created a host: %v", err)
	}
}

func TestUpdateLeaseRules(t *testing.T) {
	m, st, clk := setup(t)
	ctx := context.Background()
	hosts := addHosts(t, m, 3, nil)
	l := create(t, m, alice, time.Hour, 3*time.Hour, hostReq(1, 2, ""))
	rid := l.Reservations[0].ID
	// Another lease holds host 3 later on.
	other := create(t, m, bob, 5*time.Hour, 6*time.Hour, hostReq(3, 3, ""))
	if len(hostsOf(other)) != 3 {
		t.Fatal("setup")
	}

	// An empty update changes nothing, not even updated_at.
	if same, err := m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{}); err != nil || !same.UpdatedAt.IsZero() {
		t.Fatalf("empty update: %v, updated_at %s", err, same.UpdatedAt)
	}
	// Extending into the other lease's window leaves no free host: 409, nothing changed.
	_, err := m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{End: at(5*time.Hour + time.Minute)})
	wantCode(t, err, climate.CodeConflict, "Not enough hosts available")
	if got, _ := m.GetLease(ctx, alice, l.ID); !got.End.Equal(t0.Add(3 * time.Hour)) {
		t.Fatalf("a refused update changed the end to %s", got.End)
	}
	// Extending up to it is fine, and the before_end event keeps its distance from the end.
	u, err := m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{End: at(5 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if be := u.Event(climate.EventBeforeEndLease); !be.Time.Equal(t0.Add(4 * time.Hour)) {
		t.Fatalf("before_end at %s", be.Time)
	}
	if e := u.Event(climate.EventEndLease); !e.Time.Equal(t0.Add(5 * time.Hour)) {
		t.Fatalf("end event at %s", e.Time)
	}
	// Shrinking max keeps the first host.
	u, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Reservations: []climate.ReservationRequest{{ID: rid, Max: ptr(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := hostsOf(u); len(got) != 1 || got[0] != hosts[0] {
		t.Fatalf("after shrink: %v", got)
	}
	// Moving the lease later keeps the host where it is free.
	u, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Start: at(7 * time.Hour), End: at(8 * time.Hour)})
	if err != nil || hostsOf(u)[0] != hosts[0] {
		t.Fatalf("move: %v %v", err, u)
	}
	_, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Reservations: []climate.ReservationRequest{{ID: "nope"}}})
	wantCode(t, err, climate.CodeInvalid, "Please enter valid reservation IDs. Invalid reservation IDs are: nope")
	_, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Reservations: []climate.ReservationRequest{{}}})
	wantCode(t, err, climate.CodeInvalid, "Missing parameter reservation ID")
	_, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Start: at(-time.Hour)})
	wantCode(t, err, climate.CodeInvalid, "Start date must be later than current date")
	_, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{End: at(6 * time.Hour)})
	wantCode(t, err, climate.CodeInvalid, "End date must be later than current and start date")

	// Once started, the start date cannot move.
	clk.Set(t0.Add(7*time.Hour + time.Minute))
	startLease(t, st, u.ID)
	_, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Start: at(9 * time.Hour)})
	wantCode(t, err, climate.CodeInvalid, "Cannot modify the start date of already started leases")
	renamed, err := m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Name: ptr("renamed")})
	if err != nil || renamed.Name != "renamed" {
		t.Fatalf("rename: %v", err)
	}
	// An active reservation keeps its hosts: shrinking below them is refused.
	_, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{End: at(9 * time.Hour)})
	if err != nil {
		t.Fatalf("extending an active lease over free time: %v", err)
	}
	create(t, m, bob, 9*time.Hour, 10*time.Hour, hostReq(1, 1, `["==", "$id", "`+hosts[0]+`"]`))
	_, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{End: at(10 * time.Hour)})
	wantCode(t, err, climate.CodeConflict, "is active and would lose "+hosts[0])
}

// startLease marks a lease started as the engine would (the engine's own tests cover the
// real start), so update rules for started leases can be tested here.
func startLease(t *testing.T, st climate.Store, id string) {
	t.Helper()
	err := st.Update(context.Background(), func(tx climate.Tx) error {
		l, err := tx.GetLease(context.Background(), id)
		if err != nil {
			return err
		}
		l.Event(climate.EventStartLease).Status = climate.EventDone
		for i := range l.Reservations {
			l.Reservations[i].Status = climate.ReservationActive
		}
		l.Status = climate.LeaseActive
		return tx.UpdateLease(context.Background(), l)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentCreatesNeverDoubleBook races many lease creations for a few hosts and then
// audits every allocation pair: no host may hold two overlapping windows.
func TestConcurrentCreatesNeverDoubleBook(t *testing.T) {
	m, st, _ := setup(t)
	addHosts(t, m, 3, nil)
	const workers, perWorker = 16, 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, rejected := 0, 0
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				start := time.Duration((w*perWorker+i)%10) * time.Hour
				_, err := m.CreateLease(context.Background(), alice, climate.LeaseRequest{
					Name: "race", Start: at(time.Hour + start), End: at(3*time.Hour + start),
					Reservations: []climate.ReservationRequest{hostReq(1, 2, "")},
				})
				mu.Lock()
				if err == nil {
					accepted++
				} else if climate.ErrorCode(err) == climate.CodeConflict {
					rejected++
				} else {
					t.Errorf("unexpected error: %v", err)
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	if accepted == 0 || rejected == 0 {
		t.Fatalf("accepted %d, rejected %d: the race did not contend", accepted, rejected)
	}
	var allocs []climate.Allocation
	err := st.View(context.Background(), func(tx climate.Tx) error {
		var err error
		allocs, err = tx.ListAllocations(context.Background(), climate.AllocationFilter{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range allocs {
		for _, b := range allocs[i+1:] {
			if a.ResourceID == b.ResourceID && climate.Overlaps(a.Start, a.End, b.Start, b.End) {
				t.Fatalf("host %s double-booked: lease %s [%s, %s) and lease %s [%s, %s)", a.ResourceID, a.LeaseID, a.Start, a.End, b.LeaseID, b.Start, b.End)
			}
		}
	}
	leases, _, _ := manager.CollectLeases(context.Background(), m, admin, climate.LeaseQuery{})
	if len(leases) != accepted {
		t.Fatalf("%d leases stored, %d accepted", len(leases), accepted)
	}
	t.Logf("%d accepted, %d rejected, %d allocations audited", accepted, rejected, len(allocs))
}

func TestHostRules(t *testing.T) {
	m, _, _ := setup(t)
	ctx := context.Background()
	ids := addHosts(t, m, 1, map[string]string{"gpu": "true"})
	l := create(t, m, alice, time.Hour, 2*time.Hour, hostReq(1, 1, `["==", "$gpu", "true"]`))
	err := m.DeleteHost(ctx, admin, ids[0])
	wantCode(t, err, climate.CodeConflict, "The host is reserved")
	_, err = m.UpdateHost(ctx, admin, ids[0], map[string]string{"gpu": "false"})
	wantCode(t, err, climate.CodeConflict, "filters on it")
	if _, err := m.UpdateHost(ctx, admin, ids[0], map[string]string{"rack": "r9"}); err != nil {
		t.Fatalf("an unused property should be settable: %v", err)
	}
	_, err = m.UpdateHost(ctx, admin, ids[0], map[string]string{})
	wantCode(t, err, climate.CodeInvalid, "No data to update")
	_, err = m.CreateHost(ctx, admin, map[string]string{"name": "x", strings.Repeat("k", 65): "v"})
	wantCode(t, err, climate.CodeInvalid, "Extra capability key too long")
	_, err = m.CreateHost(ctx, admin, map[string]string{"name": "y", "vcpus": "many"})
	wantCode(t, err, climate.CodeInvalid, "Malformed parameter vcpus")
	if err := m.DeleteLease(ctx, alice, l.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteHost(ctx, admin, ids[0]); err != nil {
		t.Fatalf("host without reservations should delete: %v", err)
	}
}

// Two managers on one store stand for two processes: each must notice the other's commits
// (by the store's revisions) and plan on current availability, not on a stale index.
func TestIndexFollowsOtherWriters(t *testing.T) {
	a, st, clk := setup(t)
	b := manager.New(st, clk, manager.Config{})
	addHosts(t, a, 1, nil)
	// Warm b's index before a books the only host.
	if _, err := b.CreateLease(context.Background(), alice, climate.LeaseRequest{Name: "warm", Start: at(20 * time.Hour), End: at(21 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	l := create(t, a, alice, time.Hour, 2*time.Hour, hostReq(1, 1, ""))
	_, err := b.CreateLease(context.Background(), bob, climate.LeaseRequest{Name: "late", Start: at(time.Hour), End: at(2 * time.Hour),
		Reservations: []climate.ReservationRequest{hostReq(1, 1, "")}})
	// The explanation comes from a current index: the host is counted as booked.
	wantCode(t, err, climate.CodeConflict, "0 free in the window; of 1 registered hosts 0 do not match the properties, 0 are not reservable, 0 are taken by this lease and 1 are booked")
	if err := a.DeleteLease(context.Background(), alice, l.ID); err != nil {
		t.Fatal(err)
	}
	create(t, b, bob, time.Hour, 2*time.Hour, hostReq(1, 1, ""))
	// A new host registered through a is plannable through b.
	addHosts(t, a, 1, map[string]string{"gpu": "true"})
	create(t, b, bob, time.Hour, 2*time.Hour, hostReq(1, 1, `["==", "$gpu", "true"]`))
}

// firingStore changes a lease's first event (UNDONE to DONE, as the engine would, or
// back) just before each of its next fires Updates begin, between an update's read and
// its write.
type firingStore struct {
	climate.Store
	lease string
	fires int
}

func (s *firingStore) Update(ctx context.Context, fn func(climate.Tx) error) error {
	if s.fires > 0 {
		s.fires--
		err := s.Store.Update(ctx, func(tx climate.Tx) error {
			l, err := tx.GetLease(ctx, s.lease)
			if err != nil {
				return err
			}
			e := &l.Events[0]
			if e.Status == climate.EventUndone {
				e.Status = climate.EventDone
			} else {
				e.Status = climate.EventUndone
			}
			return tx.UpdateLease(ctx, l)
		})
		if err != nil {
			return err
		}
	}
	return s.Store.Update(ctx, fn)
}

// An update whose lease saw an event fire between its read and its write starts again
// from the lease as it is then; only when that keeps happening does the client get a 409.
func TestUpdateStartsAgainWhenAnEventFires(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	fs := &firingStore{Store: st}
	m := manager.New(fs, clock.NewFake(t0), manager.Config{BeforeEnd: manager.DefaultBeforeEnd})
	addHosts(t, m, 1, nil)
	l := create(t, m, alice, time.Hour, 5*time.Hour, hostReq(1, 1, ""))
	fs.lease, fs.fires = l.ID, 1
	u, err := m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Name: ptr("renamed")})
	if err != nil {
		t.Fatalf("update with an event fired once meanwhile: %v; want it done on the second try", err)
	}
	if u.Name != "renamed" {
		t.Errorf("name after the update: %q", u.Name)
	}
	done := 0
	for _, e := range u.Events {
		if e.Status == climate.EventDone {
			done++
		}
	}
	if done != 1 {
		t.Errorf("the update wrote back the event it read: %d events DONE, want the 1 fired", done)
	}
	fs.fires = 100
	_, err = m.UpdateLease(ctx, alice, l.ID, climate.LeaseUpdate{Name: ptr("again")})
	if climate.ErrorCode(err) != climate.CodeConflict || !strings.Contains(err.Error(), "3 times in a row; try again") {
		t.Errorf("update whose lease changes at every try: %v; want a 409 after 3", err)
	}
}

// A lease's deletion tells EventsChanged when its earliest event was to fire, not "not
// known": an engine asleep until before then sleeps on, where it used to be woken to claim
// nothing after every deletion.
func TestDeleteLeaseTellsWhenItsEventsWereDue(t *testing.T) {
	st := openStore(t)
	var told []time.Time
	m := manager.New(st, clock.NewFake(t0), manager.Config{EventsChanged: func(due time.Time) { told = append(told, due) }})
	addHosts(t, m, 1, nil)
	l := create(t, m, alice, 2*time.Hour, 5*time.Hour, hostReq(1, 1, ""))
	told = nil
	if err := m.DeleteLease(context.Background(), alice, l.ID); err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(2 * time.Hour); len(told) != 1 || !told[0].Equal(want) {
		t.Errorf("after the deletion EventsChanged was told %v; want once, %v (the lease's start)", told, want)
	}
}
