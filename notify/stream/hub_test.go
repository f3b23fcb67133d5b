package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/notify"
	"climate/notify/stream"
	"climate/sqlite"
)

var (
	admin   = climate.Identity{UserID: "root", ProjectID: "ops", Roles: []string{"admin"}}
	alice   = climate.Identity{UserID: "alice", ProjectID: "physics", Roles: []string{"member"}}
	bob     = climate.Identity{UserID: "bob", ProjectID: "chemistry", Roles: []string{"member"}}
	rita    = climate.Identity{UserID: "rita", ProjectID: "physics", Roles: []string{"reader"}}
	guest   = climate.Identity{UserID: "gus", ProjectID: "physics", Roles: []string{"guest"}}
	quiet   = slog.New(slog.NewTextHandler(io.Discard, nil))
	t0      = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	timeout = 10 * time.Second // a failsafe: every wait below ends on an event
)

// fixture is a hub running on a fresh SQLite store with two leases: p1 of physics and c1
// of chemistry.
type fixture struct {
	t     *testing.T
	store *sqlite.Store
	hub   *stream.Hub
	p1    *climate.Lease
	c1    *climate.Lease
}

func newFixture(t *testing.T, cfg stream.Config) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Logger = quiet
	f := &fixture{t: t, store: st, hub: stream.New(st, cfg)}
	f.p1 = f.lease("p1", "physics")
	f.c1 = f.lease("c1", "chemistry")
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = f.hub.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func (f *fixture) lease(name, project string) *climate.Lease {
	f.t.Helper()
	l := &climate.Lease{ID: climate.NewID(), Name: name, UserID: "u", ProjectID: project, Start: t0, End: t0.Add(time.Hour),
		Status: climate.LeasePending, CreatedAt: t0}
	if err := f.store.Update(context.Background(), func(tx climate.Tx) error { return tx.InsertLease(context.Background(), l) }); err != nil {
		f.t.Fatal(err)
	}
	return l
}

// notify commits one notification of type typ about l and wakes the hub, as the manager's
// Notified hook does; it returns its Seq.
func (f *fixture) notify(typ string, l *climate.Lease) int64 {
	f.t.Helper()
	n, err := notify.New(typ, l, nil, t0)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.store.Update(context.Background(), func(tx climate.Tx) error { return tx.AddNotification(context.Background(), n) }); err != nil {
		f.t.Fatal(err)
	}
	f.hub.Wake()
	return n.Seq
}

func (f *fixture) watch(who climate.Identity, q climate.NotificationQuery) climate.NotificationStream {
	f.t.Helper()
	s, err := f.hub.WatchNotifications(context.Background(), who, q)
	if err != nil {
		f.t.Fatalf("WatchNotifications(%s, %+v): %v", who.UserID, q, err)
	}
	f.t.Cleanup(s.Close)
	return s
}

// next reads one notification, failing on an error.
func next(t *testing.T, s climate.NotificationStream) *climate.Notification {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	n, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return n
}

// expect reads len(want) notifications and checks their Seqs.
func expect(t *testing.T, s climate.NotificationStream, want ...int64) {
	t.Helper()
	for _, w := range want {
		if n := next(t, s); n.Seq != w {
			t.Fatalf("got notification %d (%s of %s), want %d", n.Seq, n.EventType, n.LeaseID, w)
		}
	}
}

func TestFanOutByProjectLeaseAndType(t *testing.T) {
	f := newFixture(t, stream.Config{})
	before := f.notify(climate.NotifyLeaseCreate, f.p1) // committed before anyone watches

	all := f.watch(admin, climate.NotificationQuery{})
	physics := f.watch(alice, climate.NotificationQuery{})
	reader := f.watch(rita, climate.NotificationQuery{LeaseID: f.p1.ID})
	chemistryByAdmin := f.watch(admin, climate.NotificationQuery{ProjectID: "chemistry"})
	starts := f.watch(admin, climate.NotificationQuery{EventTypes: []string{climate.NotifyEvent(climate.EventStartLease)}})
	if got := f.hub.Subscribers(); got != 5 {
		t.Fatalf("Subscribers = %d, want 5", got)
	}

	s1 := f.notify(climate.NotifyLeaseUpdate, f.p1)
	s2 := f.notify(climate.NotifyLeaseUpdate, f.c1)
	s3 := f.notify(climate.NotifyEvent(climate.EventStartLease), f.c1)
	s4 := f.notify(climate.NotifyEvent(climate.EventStartLease), f.p1)
	if before >= s1 {
		t.Fatalf("seqs %d, %d not increasing", before, s1)
	}

	// Live streams start after the notifications committed before them: each stream's
	// first notification is its first match after it opened.
	expect(t, all, s1, s2, s3, s4)
	expect(t, physics, s1, s4)
	expect(t, reader, s1, s4)
	expect(t, chemistryByAdmin, s2, s3)
	expect(t, starts, s3, s4)

	// The payload is the lease as the API shows it.
	last := f.notify(climate.NotifyLeaseDelete, f.p1)
	n := next(t, physics)
	if n.Seq != last || n.EventType != climate.NotifyLeaseDelete || n.LeaseID != f.p1.ID || n.ProjectID != "physics" || len(n.Payload) == 0 {
		t.Fatalf("lease.delete: %+v", n)
	}
}

func TestPolicy(t *testing.T) {
	f := newFixture(t, stream.Config{})
	for _, c := range []struct {
		who  climate.Identity
		q    climate.NotificationQuery
		code climate.Code
	}{
		{guest, climate.NotificationQuery{}, climate.CodeForbidden},
		{alice, climate.NotificationQuery{ProjectID: "chemistry"}, climate.CodeForbidden},
		{alice, climate.NotificationQuery{LeaseID: f.c1.ID}, climate.CodeNotFound}, // not even confirmed
		{alice, climate.NotificationQuery{LeaseID: "nope"}, climate.CodeNotFound},
		{admin, climate.NotificationQuery{LeaseID: "nope"}, climate.CodeNotFound},
		{alice, climate.NotificationQuery{EventTypes: []string{"lease.created"}}, climate.CodeInvalid},
		{alice, climate.NotificationQuery{Replay: true, After: -1}, climate.CodeInvalid},
	} {
		s, err := f.hub.WatchNotifications(context.Background(), c.who, c.q)
		if climate.ErrorCode(err) != c.code {
			t.Errorf("%s %+v: %v, want code %s", c.who.UserID, c.q, err, c.code)
		}
		if s != nil {
			s.Close()
		}
	}
	if got := f.hub.Subscribers(); got != 0 {
		t.Fatalf("refused watches left %d subscribers", got)
	}
	// Alice names her own project: fine. Bob never sees physics.
	own := f.watch(alice, climate.NotificationQuery{ProjectID: "physics"})
	chem := f.watch(bob, climate.NotificationQuery{})
	p := f.notify(climate.NotifyLeaseUpdate, f.p1)
	c := f.notify(climate.NotifyLeaseUpdate, f.c1)
	expect(t, own, p)
	expect(t, chem, c)
}

func TestSlowSubscriberIsDroppedAndResumes(t *testing.T) {
	f := newFixture(t, stream.Config{Buffer: 2})
	slow := f.watch(admin, climate.NotificationQuery{})
	fast := f.watch(admin, climate.NotificationQuery{})
	var seqs []int64
	for range 5 {
		seqs = append(seqs, f.notify(climate.NotifyLeaseUpdate, f.p1))
		// The fast reader keeps up; once it has a notification, the hub has offered it
		// to both (in Seq order), so the slow one's buffer overflows at the third.
		expect(t, fast, seqs[len(seqs)-1])
	}
	if got := f.hub.Subscribers(); got != 1 {
		t.Fatalf("Subscribers = %d after the slow one overflowed, want 1", got)
	}
	// The slow reader gets what its buffer held, then is told it was dropped.
	expect(t, slow, seqs[0], seqs[1])
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := slow.Next(ctx); !errors.Is(err, climate.ErrStreamLagged) {
		t.Fatalf("slow reader after its buffer: %v, want ErrStreamLagged", err)
	}
	if p := slow.Position(); p != seqs[1] {
		t.Fatalf("dropped stream's Position = %d, want %d (the last it returned)", p, seqs[1])
	}
	// It resumes from its position: the rest from the outbox, then live, nothing twice.
	resumed := f.watch(admin, climate.NotificationQuery{Replay: true, After: slow.Position()})
	expect(t, resumed, seqs[2:]...)
	more := f.notify(climate.NotifyLeaseDelete, f.p1)
	expect(t, resumed, more)
	expect(t, fast, more)
}

func TestReplayThenLiveWithoutGapsOrRepeats(t *testing.T) {
	f := newFixture(t, stream.Config{})
	// More than one replay batch before, some of another project (filtered out), and
	// notifications committed while the replay runs.
	var physics []int64
	for i := range 150 {
		l := f.p1
		if i%3 == 0 {
			l = f.c1
		}
		if s := f.notify(climate.NotifyLeaseUpdate, l); l == f.p1 {
			physics = append(physics, s)
		}
	}
	from := physics[9]
	s := f.watch(alice, climate.NotificationQuery{Replay: true, After: from})
	want := append([]int64(nil), physics[10:]...)
	var mu sync.Mutex
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		for range 40 {
			seq := f.notify(climate.NotifyLeaseUpdate, f.p1)
			mu.Lock()
			want = append(want, seq)
			mu.Unlock()
			f.notify(climate.NotifyLeaseUpdate, f.c1)
		}
	}()
	var got []int64
	for len(got) < len(physics)-10+40 {
		n := next(t, s)
		if n.ProjectID != "physics" {
			t.Fatalf("alice got %s's notification", n.ProjectID)
		}
		got = append(got, n.Seq)
	}
	<-writer
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replay then live:\ngot  %v\nwant %v", got, want)
	}
}

// TestResumeBeyondTheOutbox: a position the outbox has not reached (a client of a
// database since restored from a backup) resumes from the outbox's end, not after it.
func TestResumeBeyondTheOutbox(t *testing.T) {
	f := newFixture(t, stream.Config{})
	f.notify(climate.NotifyLeaseCreate, f.p1)
	s := f.watch(admin, climate.NotificationQuery{Replay: true, After: 1000})
	next1 := f.notify(climate.NotifyLeaseUpdate, f.p1)
	expect(t, s, next1)
}

// TestPositionPassesFilteredNotifications: a stream watching one lease tells a position
// past the other leases' notifications, so a resume does not re-read them.
func TestPositionPassesFilteredNotifications(t *testing.T) {
	f := newFixture(t, stream.Config{})
	watched := f.watch(admin, climate.NotificationQuery{LeaseID: f.p1.ID})
	all := f.watch(admin, climate.NotificationQuery{})
	a := f.notify(climate.NotifyLeaseUpdate, f.p1)
	b := f.notify(climate.NotifyLeaseUpdate, f.c1)
	expect(t, all, a, b)
	expect(t, watched, a)
	// The hub offered b under its lock, which Subscribers takes: once it returns, that
	// round is over and its position published.
	f.hub.Subscribers()
	if p := watched.Position(); p != b {
		t.Fatalf("Position = %d, want %d (past the unwatched lease's notification)", p, b)
	}
}

func TestStreamsEndWhenTheHubStops(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hub := stream.New(st, stream.Config{Logger: quiet})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = hub.Run(runCtx); close(done) }()
	s, err := hub.WatchNotifications(ctx, admin, climate.NotificationQuery{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cancel()
	<-done
	if _, err := s.Next(ctx); !errors.Is(err, climate.ErrStreamClosed) {
		t.Fatalf("Next after the hub stopped: %v", err)
	}
	if _, err := hub.WatchNotifications(ctx, admin, climate.NotificationQuery{}); !errors.Is(err, climate.ErrStreamClosed) {
		t.Fatalf("WatchNotifications after the hub stopped: %v", err)
	}
}

// TestOtherProcessCommitsAreReadPeriodically: a commit the hub is not told of (another
// process's) reaches subscribers by the periodic re-read.
func TestOtherProcessCommitsAreReadPeriodically(t *testing.T) {
	f := newFixture(t, stream.Config{MaxSleep: 20 * time.Millisecond})
	s := f.watch(admin, climate.NotificationQuery{})
	n, err := notify.New(climate.NotifyLeaseUpdate, f.p1, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Update(context.Background(), func(tx climate.Tx) error { return tx.AddNotification(context.Background(), n) }); err != nil {
		t.Fatal(err)
	}
	// No Wake: Next returns once the hub's timer made it look.
	expect(t, s, n.Seq)
}

// BenchmarkFanOut measures publishing to many subscribers of one project.
func BenchmarkFanOut(b *testing.B) {
	for _, subs := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "climate.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			hub := stream.New(st, stream.Config{Logger: quiet, Buffer: 1 << 16})
			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() { _ = hub.Run(runCtx) }()
			l := &climate.Lease{ID: climate.NewID(), ProjectID: "physics", Start: t0, End: t0.Add(time.Hour), Status: climate.LeasePending, CreatedAt: t0}
			var streams []climate.NotificationStream
			for range subs {
				s, err := hub.WatchNotifications(ctx, admin, climate.NotificationQuery{ProjectID: "physics"})
				if err != nil {
					b.Fatal(err)
				}
				streams = append(streams, s)
			}
			b.ResetTimer()
			for range b.N {
				n, _ := notify.New(climate.NotifyLeaseUpdate, l, nil, t0)
				if err := st.Update(ctx, func(tx climate.Tx) error { return tx.AddNotification(ctx, n) }); err != nil {
					b.Fatal(err)
				}
				hub.Wake()
				for _, s := range streams {
					if _, err := s.Next(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
