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
	release     chan struct{}
	mu          sync.Mutex
	asked       []bool // whether each commit's since asked for the changes
	armed, held bool
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
	hold := want && s.armed && !s.held
	s.held = s.held || hold
	s.mu.Unlock()
	if hold {
		<-s.release
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
// plans steer clear of until a read sent after it is applied; that read brings it into
// the index.
func TestOneCatchUpReadInFlight(t *testing.T) {
	ctx := context.Background()
	pg, err := postgres.Open(ctx, postgres.TestDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	st := &heldReader{Store: pg, release: make(chan struct{})}
	m := New(st, clock.NewFake(replicaT0), Config{})
	hosts := replicaHosts(t, m, 6)
	create := func(name string, from, to int) *climate.Lease {
		t.Helper()
		one := 2
		l, err := m.CreateLease(ctx, replicaMember, climate.LeaseRequest{Name: name,
			Start: climate.Date{Time: replicaT0.Add(time.Duration(from) * time.Hour)}, End: climate.Date{Time: replicaT0.Add(time.Duration(to) * time.Hour)},
			Reservations: []climate.ReservationRequest{{ResourceType: climate.ResourceTypeHost, Min: &one, Max: &one}}})
		if err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
		return l
	}
	inFlight := func(l *climate.Lease) bool {
		got := resource.IDs(m.inFlight.overlapping(l.Start, l.End))
		return len(got) > 0 && !slices.ContainsFunc(allocationsOf(l), func(a climate.Allocation) bool { return !slices.Contains(got, a.ResourceID) })
	}
	create("warm", 1, 2) // the index is built and current
	st.mu.Lock()
	st.armed = true
	st.mu.Unlock()

	done := make(chan *climate.Lease)
	go func() { done <- create("a", 3, 4) }() // its read is held in flight
	for {
		st.mu.Lock()
		held := st.held
		st.mu.Unlock()
		if held {
			break
		}
		select {
		case l := <-done:
			t.Fatalf("lease %s returned before its read was held", l.ID)
		case <-time.After(time.Millisecond):
		}
	}
	b := create("b", 5, 6)
	if st.lastAsked() {
		t.Fatal("b's commit asked for the changes while a's read was in flight")
	}
	if !inFlight(b) {
		t.Errorf("b's hosts are not in flight while no read has brought them: %v", m.inFlight.overlapping(b.Start, b.End))
	}
	close(st.release)
	a := <-done
	if inFlight(a) || !inFlight(b) {
		t.Errorf("after a's read (sent before b's commit): a in flight %v, b %v; want only b", inFlight(a), inFlight(b))
	}
	c := create("c", 7, 8)
	if !st.lastAsked() {
		t.Error("c's commit, with no read in flight, read nothing")
	}
	if inFlight(b) || inFlight(c) {
		t.Errorf("after c's read: b in flight %v, c %v; want neither", inFlight(b), inFlight(c))
	}
	// c's read brought b and c: the index is as the store, with no check of its own.
	rev, _ := storeState(t, pg)
	if got := revisionOf(m); got != rev {
		t.Errorf("index at revision %d, the store at %d", got, rev)
	}
	checkReplica(t, "m", m, pg, hosts)
}
