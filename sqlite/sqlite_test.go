package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/sqlcore"
	"climate/storetest"
)

func open(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) climate.Store {
		return open(t, filepath.Join(t.TempDir(), "climate.db"))
	})
}

func TestMigrateIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "climate.db")
	s := open(t, path)
	h := &climate.Host{HypervisorHostname: "h1", CreatedAt: time.Now()}
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertHost(ctx, h) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path)
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	files, _ := fs.Glob(migrations, "migrations/*.sql")
	var applied int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != len(files) {
		t.Errorf("schema_migrations has %d rows, want one per migration (%d)", applied, len(files))
	}
	err := s.View(ctx, func(tx climate.Tx) error {
		_, err := tx.GetHost(ctx, h.ID)
		return err
	})
	if err != nil {
		t.Errorf("host written before reopening: %v", err)
	}
}

// TestPragmas checks every connection of both pools, since each is opened separately.
func TestPragmas(t *testing.T) {
	ctx := context.Background()
	// The path needs URI escaping: a raw '?' or '#' would cut it short.
	dir := filepath.Join(t.TempDir(), "a dir?#%")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := open(t, filepath.Join(dir, "climate.db"))
	defer s.Close()
	for _, p := range []struct {
		name     string
		db       *sql.DB
		n        int
		readOnly int
	}{{"writer", s.w, 1, 0}, {"reader", s.r, readers, 1}} {
		var conns []*sql.Conn
		for range p.n {
			c, err := p.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for i, c := range conns {
			for pragma, want := range map[string]string{
				"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "10000", "synchronous": "1",
				"query_only": fmt.Sprint(p.readOnly),
			} {
				var got string
				if err := c.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%s connection %d: %s = %s, want %s", p.name, i, pragma, got, want)
				}
			}
		}
		for _, c := range conns {
			c.Close()
		}
	}
}

// TestQueryPlans checks that the hot queries search an index rather than scan a table.
func TestQueryPlans(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "climate.db"))
	defer s.Close()
	from := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	window := climate.AllocationFilter{From: from, To: from.Add(48 * time.Hour), ExcludeLeaseID: "l1"}
	hosts := window
	hosts.ResourceIDs = []string{"1", "2"}
	for name, f := range map[string]climate.AllocationFilter{
		"window":      window,
		"hosts":       hosts,
		"lease":       {LeaseID: "l1"},
		"reservation": {ReservationID: "r1"},
	} {
		q, args := dialect.AllocationQuery(f)
		plan := explain(t, s.r, q, args...)
		if strings.Contains(plan, "SCAN allocations") {
			t.Errorf("%s: allocations scanned:\n%s", name, plan)
		}
	}
	// A host's allocations are read by the leases that hold it (the manager's
	// allocationsOn), not by searching every allocation that ends after the window's start.
	byLeases := hosts
	byLeases.LeaseIDs = []string{"l1", "l2"}
	q, args := dialect.AllocationQuery(byLeases)
	if plan := explain(t, s.r, q, args...); !strings.Contains(plan, "allocations_lease (lease_id=?)") {
		t.Errorf("a host's allocations are not read by their leases:\n%s", plan)
	}
	// A write's re-check reads the log's newest rows, after the plan's revision, in order.
	q = changesQuery(onResources)
	if plan := explain(t, s.r, q, 1, dialect.List([]string{"1", "2"}), 1, 2); !strings.Contains(plan, "USING INTEGER PRIMARY KEY (rowid>?)") ||
		strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("the re-check's read of the log does not search it from the revision:\n%s", plan)
	}
	// A page of leases is read in index order from its start: no sort, whatever the page.
	after := &climate.Lease{ID: "l1", CreatedAt: from}
	for name, f := range map[string]climate.LeaseFilter{
		"first page": {Limit: 500},
		"next page":  {After: after, Limit: 500},
		"project":    {ProjectID: "p1", After: after, Limit: 500},
	} {
		q, args := dialect.LeaseQuery(f)
		plan := explain(t, s.r, q, args...)
		if !strings.Contains(plan, "INDEX leases_") || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("lease %s: not read in index order:\n%s", name, plan)
		}
	}
	due := explain(t, s.r, `SELECT id FROM events WHERE (status = 'UNDONE' AND time <= ?) OR (status = 'IN_PROGRESS' AND claimed_until <= ?)`+sqlcore.DueOrder, 1, 1)
	if strings.Contains(due, "SCAN events") || !strings.Contains(due, "INDEX events_due") || !strings.Contains(due, "INDEX events_claims") {
		t.Errorf("due events: not searched in the due and claims indexes:\n%s", due)
	}
	// The engine's next wake-up reads the first entry of each (0022: partial indexes,
	// which hold only the events of the status a query names).
	next := explain(t, s.r, `SELECT min(time) FROM events WHERE status = 'UNDONE'
		UNION ALL SELECT min(claimed_until) FROM events WHERE status = 'IN_PROGRESS'`)
	if !strings.Contains(next, "COVERING INDEX events_due") || !strings.Contains(next, "COVERING INDEX events_claims") {
		t.Errorf("next event time: not read from the due and claims indexes:\n%s", next)
	}
	// Neither holds a finished event, so neither can find one.
	if done := explain(t, s.r, `SELECT count(*) FROM events WHERE status = 'DONE'`); strings.Contains(done, "events_due") || strings.Contains(done, "events_claims") {
		t.Errorf("finished events are in the engine's indexes:\n%s", done)
	}
}

func explain(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&plan, detail)
	}
	return plan.String()
}

// benchBase and benchDay place the benchmarks' book of leases.
var benchBase, benchDay = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), 24 * time.Hour

// hostLease is a pending lease of project p holding hosts over [start, end), in one
// reservation: ids id-r and id-HOST.
func hostLease(id string, hosts []string, start, end time.Time) *climate.Lease {
	r := climate.Reservation{ID: id + "-r", LeaseID: id, ResourceType: climate.ResourceTypeHost,
		Status: climate.ReservationPending, Min: len(hosts), Max: len(hosts), CreatedAt: benchBase}
	for _, h := range hosts {
		r.Allocations = append(r.Allocations, climate.Allocation{ID: id + "-" + h, ReservationID: r.ID,
			LeaseID: id, ResourceID: h, Start: start, End: end})
	}
	return &climate.Lease{ID: id, Name: id, ProjectID: "p", Start: start, End: end, Status: climate.LeasePending,
		CreatedAt: benchBase, Reservations: []climate.Reservation{r}}
}

// bookStore opens a store holding 25,000 allocations across 1,000 hosts: 5,000 five-host
// leases over ~6 months. It closes when b ends.
func bookStore(b *testing.B) *Store {
	ctx := context.Background()
	s := open(b, filepath.Join(b.TempDir(), "climate.db"))
	b.Cleanup(func() { s.Close() })
	const hosts, groups, slots = 1000, 200, 25 // 200 groups of 5 hosts, 25 leases each
	base, day := benchBase, benchDay
	rng := rand.New(rand.NewPCG(1, 2))
	err := s.Update(ctx, func(tx climate.Tx) error {
		for slot := range slots {
			for g := range groups {
				start := base.Add(time.Duration(slot)*7*day + time.Duration(rng.IntN(24))*time.Hour)
				end := start.Add(time.Duration(1+rng.IntN(5)) * day)
				var group []string
				for k := range hosts / groups {
					group = append(group, fmt.Sprint(g*hosts/groups+k))
				}
				if err := tx.InsertLease(ctx, hostLease(fmt.Sprintf("l-%d-%d", slot, g), group, start, end)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkInsertLease measures the writer's statements for one new lease of 10 hosts
// and its 3 events, each in a transaction of its own, on the book of bookStore: the
// allocations' indexes and their log, the lease's other rows and the commit.
func BenchmarkInsertLease(b *testing.B) {
	ctx := context.Background()
	s := bookStore(b)
	start := benchBase.Add(30 * 7 * benchDay)
	n := 0
	for b.Loop() {
		n++
		hosts := make([]string, 10)
		for k := range hosts {
			hosts[k] = fmt.Sprint((n*37 + k*101) % 1000)
		}
		s0 := start.Add(time.Duration(n) * time.Minute)
		l := hostLease(climate.NewID(), hosts, s0, s0.Add(time.Minute))
		for _, t := range []climate.EventType{climate.EventStartLease, climate.EventBeforeEndLease, climate.EventEndLease} {
			l.Events = append(l.Events, climate.Event{ID: climate.NewID(), LeaseID: l.ID, Type: t, Time: s0, Status: climate.EventUndone, CreatedAt: start})
		}
		if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, l) }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListAllocationsWindow measures the planner's overlap query over a 2-day window
// on the book of bookStore.
func BenchmarkListAllocationsWindow(b *testing.B) {
	ctx := context.Background()
	s := bookStore(b)
	base, day := benchBase, benchDay
	from := base.Add(12*7*day + 3*day)
	ten := make([]string, 10)
	for i := range ten {
		ten[i] = fmt.Sprint(i * 97)
	}
	for _, bc := range []struct {
		name string
		f    climate.AllocationFilter
	}{
		{"AllHosts", climate.AllocationFilter{From: from, To: from.Add(2 * day), ExcludeLeaseID: "l-0-0"}},
		{"TenHosts", climate.AllocationFilter{ResourceIDs: ten, From: from, To: from.Add(2 * day)}},
		// A write's re-check at the book's start and near its end: its cost follows
		// what is booked after the window's start, not what came before.
		{"TenHostsEarly", climate.AllocationFilter{ResourceIDs: ten, From: base.Add(day), To: base.Add(3 * day)}},
		{"TenHostsLate", climate.AllocationFilter{ResourceIDs: ten, From: base.Add(24*7*day + 3*day), To: base.Add(24*7*day + 5*day)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				err := s.View(ctx, func(tx climate.Tx) error {
					allocs, err := tx.ListAllocations(ctx, bc.f)
					n = len(allocs)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n), "rows/op")
		})
	}
}

// The writer asks for a background checkpoint each time it has written checkpointFrames
// more WAL frames, counted from its connection's total; a new connection counts from 0.
func TestCheckpointEveryFrames(t *testing.T) {
	s := &Store{ckptWanted: make(chan struct{}, 1)}
	asked := func() bool {
		select {
		case <-s.ckptWanted:
			return true
		default:
			return false
		}
	}
	for _, step := range []struct {
		frames int64
		want   bool
	}{
		{checkpointFrames - 1, false},
		{checkpointFrames, true},
		{2*checkpointFrames - 1, false},
		{2*checkpointFrames + 5, true},
		{7, false}, // the connection was opened again
		{checkpointFrames + 6, false},
		{checkpointFrames + 7, true},
	} {
		s.walWritten(step.frames)
		if got := asked(); got != step.want {
			t.Errorf("after %d frames: asked for a checkpoint %v, want %v", step.frames, got, step.want)
		}
	}
}

// framesWritten counts the pages the writer's commits append to the WAL.
func TestFramesWritten(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	defer s.Close()
	before, err := s.framesWritten(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := leaseWith("l", "h1", 3)
	if err := s.Update(ctx, func(tx climate.Tx) error { return tx.InsertLease(ctx, l) }); err != nil {
		t.Fatal(err)
	}
	after, err := s.framesWritten(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// At least the pages of the leases, reservations and allocations tables.
	if after-before < 3 {
		t.Errorf("a lease's commit wrote %d WAL frames (%d, then %d); want at least 3", after-before, before, after)
	}
}
