package manager

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/clock"
	"climate/postgres"
	"climate/resource"
)

// heldReader is a PostgreSQL store whose first commit that asks for the changes once
// armed does not return until released: its read stays in flight for the manager
// meanwhile.
type heldReader struct {
	*postgres.Store
	mu               sync.Mutex
	asked            []bool        // whether each commit's since asked for the changes
	holding, release chan struct{} // armed: closed when a commit is held, and to let it go
}

// arm has the next commit that asks for the changes held.
func (s *heldReader) arm() (holding, release chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holding, s.release = make(chan struct{}), make(chan struct{})
	return s.holding, s.release
}

func (s *heldReader) UpdateThenChanges(ctx context.Context, since func() (int64, bool), fn func(climate.Tx) error) (int64, int64, []climate.AllocationChange, bool, error) {
	var want bool
	inventory, allocation, changes, ok, err := s.Store.UpdateThenChanges(ctx, func() (int64, bool) {
		var v int64
		v, want = since()
		return v, want
	}, fn)
	s.mu.Lock()
	s.asked = append(s.asked, want)
	var release chan struct{}
	if want && s.holding != nil {
		close(s.holding)
		release, s.holding = s.release, nil
	}
	s.mu.Unlock()
	if release != nil {
		<-release
	}
	return inventory, allocation, changes, ok, err
}

// lastAsked reports whether the latest commit asked for the changes.
func (s *heldReader) lastAsked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[len(s.asked)-1]
}

// A manager has one read of the allocation log in flight at a time: a commit sent while
// another's read is under way reads nothing, and what it booked stays among the hosts
// plans steer clear of until a read sent after it is applied, another commit's or a
// plan's check; that read brings it into the index.
func TestOneCatchUpReadInFlight(t *testing.T) {
	ctx := context.Background()
	pg, err := postgres.Open(ctx, postgres.TestDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	st := &heldReader{Store: pg}
	m := New(st, clock.NewFake(replicaT0), Config{})
	hosts := replicaHosts(t, m, 6)
	create := func(name string, from int) *climate.Lease {
		t.Helper()
		two := 2
		l, err := m.CreateLease(ctx, replicaMember, climate.LeaseRequest{Name: name,
			Start: climate.Date{Time: replicaT0.Add(time.Duration(from) * time.Hour)}, End: climate.Date{Time: replicaT0.Add(time.Duration(from+1) * time.Hour)},
			Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &two, Max: &two}}})
		if err != nil {
			t.Errorf("creating %s: %v", name, err)
		}
		return l
	}
	// held creates a lease whose commit's read is held in flight until finish is called.
	held := func(name string, from int) (finish func() *climate.Lease) {
		t.Helper()
		holding, release := st.arm()
		done := make(chan *climate.Lease, 1)
		go func() { done <- create(name, from) }()
		select {
		case <-holding:
		case <-done:
			t.Fatalf("%s returned without a read held", name)
		}
		return func() *climate.Lease { close(release); return <-done }
	}
	inFlight := func(l *climate.Lease) bool {
		got := resource.IDs(m.inFlight.overlapping(l.Start, l.End))
		return len(got) > 0 && !slices.ContainsFunc(allocationsOf(l), func(a climate.Allocation) bool { return !slices.Contains(got, a.ResourceID) })
	}
	current := func(when string) {
		t.Helper()
		if rev, _ := storeState(t, pg); revisionOf(m) != rev {
			t.Errorf("%s: index at revision %d, the store at %d", when, revisionOf(m), rev)
		}
	}
	create("warm", 1) // the index is built and current

	finishA := held("a", 3)
	b := create("b", 5)
	if st.lastAsked() {
		t.Fatal("b's commit asked for the changes while a's read was in flight")
	}
	if !inFlight(b) {
		t.Errorf("b's hosts are not in flight while no read has brought them: %v", m.inFlight.overlapping(b.Start, b.End))
	}
	a := finishA()
	if inFlight(a) || !inFlight(b) {
		t.Errorf("after a's read (sent before b's commit): a in flight %v, b %v; want only b", inFlight(a), inFlight(b))
	}
	c := create("c", 7)
	if !st.lastAsked() {
		t.Error("c's commit, with no read in flight, read nothing")
	}
	if inFlight(b) || inFlight(c) {
		t.Errorf("after c's read: b in flight %v, c %v; want neither", inFlight(b), inFlight(c))
	}
	current("after c's read, with no check of its own") // it brought b and c

	// The same, left to a plan's check of the index: it too is a read sent after e.
	finishD := held("d", 9)
	e := create("e", 11)
	finishD()
	if !inFlight(e) {
		t.Errorf("e's hosts are not in flight after d's read, sent before e's commit")
	}
	if err := m.view(ctx, func(*resource.View) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if inFlight(e) {
		t.Error("e's hosts are still in flight after a check brought the index up to date")
	}
	current("after the check")
	checkReplica(t, "m", m, pg, hosts)
}
