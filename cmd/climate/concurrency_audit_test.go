package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for the audit's SQL on PostgreSQL

	"climate"
)

// One `climate serve` in this process on its SQLite file, 16 clients running the
// concurrency audit's workload (runConcurrencyAudit) against it for -audit-duration; then
// the file is audited with SQL. In this process, so that -race watches the server too.
func TestSQLiteConcurrencyAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 16 clients for -audit-duration")
	}
	s := startServer(t, serveOptions{})
	runConcurrencyAudit(t, auditTarget{label: "1 server on SQLite", urls: []string{s.url}, clients: 16,
		driver: "sqlite", dsn: "file:" + filepath.Join(s.dataDir, "climate.db") + "?mode=ro&_pragma=busy_timeout(10000)"})
}

// auditTarget is what a concurrency audit runs against: the API servers its clients are
// spread over and the database they share, audited afterwards (a database/sql driver,
// "pgx" or "sqlite", and its DSN).
type auditTarget struct {
	label       string
	urls        []string
	clients     int
	driver, dsn string
}

// auditHostCapacities are the audit's hosts (vcpus, memory_mb, local_gb): small, and
// each filled first on another dimension by auditSizes, so that slots contend.
var auditHostCapacities = []climate.Size{
	{VCPUs: 8, MemoryMB: 16384, DiskGB: 100},
	{VCPUs: 16, MemoryMB: 8192, DiskGB: 100},
	{VCPUs: 16, MemoryMB: 16384, DiskGB: 40},
	{VCPUs: 8, MemoryMB: 8192, DiskGB: 40},
	{VCPUs: 12, MemoryMB: 12288, DiskGB: 60},
	{VCPUs: 4, MemoryMB: 4096, DiskGB: 20},
}

// auditSizes are the slot sizes instance reservations ask for: CPU-heavy, memory-heavy,
// disk-heavy, balanced and small.
var auditSizes = []climate.Size{
	{VCPUs: 4, MemoryMB: 1024, DiskGB: 5},
	{VCPUs: 1, MemoryMB: 4096, DiskGB: 5},
	{VCPUs: 1, MemoryMB: 1024, DiskGB: 20},
	{VCPUs: 2, MemoryMB: 2048, DiskGB: 10},
	{VCPUs: 1, MemoryMB: 512, DiskGB: 0},
}

// auditAffinities are an instance reservation's possible affinities: packing (null), one
// host, distinct hosts.
var auditAffinities = []*bool{nil, new(true), new(false)}

// auditLease is what the clients believe about one lease whose creation was accepted,
// after its last accepted update.
type auditLease struct {
	id, name   string
	start, end time.Time
	// hostRes is its physical:host reservation ("": none) of hosts hosts.
	hostRes string
	hosts   int
	ips     int // floating IPs of its virtual:floatingip reservation (0: none)
	// instRes is its virtual:instance reservation ("": none): amount slots of size.
	instRes  string
	amount   int
	size     climate.Size
	affinity *bool
	deleted  bool
}

// auditTally counts answers per operation kind and status code.
type auditTally map[string]map[int]int

func (a auditTally) add(kind string, status int) {
	if a[kind] == nil {
		a[kind] = map[int]int{}
	}
	a[kind][status]++
}

// instanceRequest is the virtual:instance reservation of l as a request.
func instanceRequest(l *auditLease) map[string]any {
	return map[string]any{"resource_type": "virtual:instance", "amount": l.amount, "vcpus": l.size.VCPUs,
		"memory_mb": l.size.MemoryMB, "disk_gb": l.size.DiskGB, "affinity": l.affinity, "resource_properties": ""}
}

func affinityText(a *bool) string {
	if a == nil {
		return "null"
	}
	return fmt.Sprint(*a)
}

// runConcurrencyAudit registers 6 small hosts (auditHostCapacities) and 6 floating IPs,
// then runs tg.clients clients spread over tg.urls for -audit-duration, creating,
// prolonging, shifting, resizing and deleting leases with heavy contention (random windows
// within one day): two thirds reserve 1-3 whole hosts; a third reserve 1-4 instance slots
// (auditSizes; affinity null, true or false), a third of those beside one whole host; and
// a third of all leases also reserve 1-2 floating IPs. Every answer is recorded and none
// may be a 5xx. The allocations are audited with SQL (auditAllocations) once a second
// during the run and after it: no resource is in two overlapping whole-resource
// allocations, no whole-resource allocation overlaps a slot allocation of the same host,
// and at every instant a slot allocation starts the slots on its host fit the host's
// vcpus, memory_mb and local_gb. After the run, the leases are exactly those accepted and
// not deleted, each holding what its last accepted update asked (hosts, addresses, slots
// adding up to the amount, of the size, on one host with affinity and on distinct hosts
// with anti-affinity); no rejected creation left anything behind.
func runConcurrencyAudit(t *testing.T, tg auditTarget) {
	const slot = 10 * time.Minute
	nHosts := len(auditHostCapacities)
	transport := &http.Transport{MaxIdleConnsPerHost: tg.clients}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Timeout: time.Minute, Transport: transport}
	ctx := context.Background()
	for i, capacity := range auditHostCapacities {
		c := &auditClient{http: hc, base: tg.urls[i%len(tg.urls)]}
		if status, body, err := c.do(ctx, "POST", "/v1/os-hosts", map[string]any{"name": fmt.Sprintf("audit-h%d", i),
			"vcpus": capacity.VCPUs, "memory_mb": capacity.MemoryMB, "local_gb": capacity.DiskGB}); err != nil || status != 201 {
			t.Fatalf("create host: %d %v %v", status, body, err)
		}
		// As many floating IPs, which a third of the leases also reserve.
		if status, body, err := c.do(ctx, "POST", "/v1/floatingips", map[string]any{"floating_network_id": "audit-net",
			"floating_ip_address": fmt.Sprintf("172.24.4.%d", 10+i)}); err != nil || status != 201 {
			t.Fatalf("create floating IP: %d %v %v", status, body, err)
		}
	}

	// The database, audited with SQL while the clients run (a snapshot a second, catching
	// what is deleted or moved before the end) and after.
	db, err := sql.Open(tg.driver, tg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	during, snapshots := newAllocationAudit(), 0
	var snapshotErr error
	snapshotsDone := make(chan struct{})

	// Leases start at least an hour ahead (so none starts during the run and every update
	// is allowed) within one day, in 10-minute slots.
	base := time.Now().UTC().Add(time.Hour).Truncate(slot)
	deadline := time.Now().Add(*auditDuration)
	var (
		mu       sync.Mutex
		leases   []*auditLease
		rejected []string // names of rejected creations
		tally    = auditTally{}
		failures []string
	)
	go func() {
		defer close(snapshotsDone)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for range tick.C {
			if !time.Now().Before(deadline) {
				return
			}
			a, err := auditAllocations(ctx, db)
			if err != nil {
				snapshotErr = err
				return
			}
			during.merge(a)
			snapshots++
		}
	}()
	var wg sync.WaitGroup
	for k := range tg.clients {
		wg.Go(func() {
			c := &auditClient{http: hc, base: tg.urls[k%len(tg.urls)]}
			rng := rand.New(rand.NewPCG(uint64(k), uint64(time.Now().UnixNano())))
			var mine []*auditLease // live leases of this client: only it touches them
			record := func(kind string, status int, body map[string]any, err error) bool {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures = append(failures, fmt.Sprintf("client %d %s: %v", k, kind, err))
					return false
				}
				tally.add(kind, status)
				if status >= 500 || (status >= 400 && status != 409) {
					failures = append(failures, fmt.Sprintf("client %d %s: HTTP %d %v", k, kind, status, body))
					return false
				}
				return true
			}
			for n := 0; time.Now().Before(deadline); n++ {
				op := rng.IntN(100)
				if len(mine) < 2 || op < 40 {
					// create
					start := base.Add(time.Duration(rng.IntN(144)) * slot)
					rec := &auditLease{name: fmt.Sprintf("audit-c%d-%d", k, n), start: start, end: start.Add(time.Duration(3+rng.IntN(22)) * slot)}
					kind := "create"
					var reservations []map[string]any
					if rng.IntN(3) == 0 {
						kind = "create-slots"
						rec.amount = 1 + rng.IntN(4)
						rec.size = auditSizes[rng.IntN(len(auditSizes))]
						rec.affinity = auditAffinities[rng.IntN(len(auditAffinities))]
						reservations = append(reservations, instanceRequest(rec))
						if rng.IntN(3) == 0 {
							rec.hosts = 1
						}
					} else {
						rec.hosts = 1 + rng.IntN(3)
					}
					if rec.hosts > 0 {
						reservations = append(reservations, map[string]any{"resource_type": "physical:host", "min": rec.hosts, "max": rec.hosts,
							"hypervisor_properties": "", "resource_properties": ""})
					}
					if rng.IntN(3) == 0 {
						rec.ips = 1 + rng.IntN(2)
						reservations = append(reservations, map[string]any{"resource_type": "virtual:floatingip", "network_id": "audit-net", "amount": rec.ips})
					}
					status, body, err := c.do(ctx, "POST", "/v1/leases", map[string]any{
						"name": rec.name, "start_date": rec.start.Format(auditDate), "end_date": rec.end.Format(auditDate),
						"reservations": reservations,
					})
					if !record(kind, status, body, err) {
						return
					}
					if status == 409 {
						mu.Lock()
						rejected = append(rejected, rec.name)
						mu.Unlock()
						continue
					}
					l := body["lease"].(map[string]any)
					rec.id = l["id"].(string)
					for _, r := range l["reservations"].([]any) {
						r := r.(map[string]any)
						switch r["resource_type"] {
						case "physical:host":
							rec.hostRes = r["id"].(string)
						case "virtual:instance":
							rec.instRes = r["id"].(string)
						}
					}
					mine = append(mine, rec)
					mu.Lock()
					leases = append(leases, rec)
					mu.Unlock()
					continue
				}
				i := rng.IntN(len(mine))
				l := mine[i]
				if op >= 88 {
					status, body, err := c.do(ctx, "DELETE", "/v1/leases/"+l.id, nil)
					if !record("delete", status, body, err) {
						return
					}
					if status == 409 {
						continue
					}
					mu.Lock()
					l.deleted = true
					mu.Unlock()
					mine = append(mine[:i], mine[i+1:]...)
					continue
				}
				var kind string
				var req map[string]any
				next := *l
				switch op % 3 {
				case 0:
					kind = "prolong"
					next.end = next.end.Add(time.Duration(1+rng.IntN(6)) * slot)
					req = map[string]any{"end_date": next.end.Format(auditDate)}
				case 1:
					kind = "shift"
					d := time.Duration(rng.IntN(7)-3) * slot
					if d == 0 || next.start.Add(d).Before(base) {
						d = 2 * slot
					}
					next.start, next.end = next.start.Add(d), next.end.Add(d)
					req = map[string]any{"start_date": next.start.Format(auditDate), "end_date": next.end.Format(auditDate)}
				default:
					if l.instRes != "" && (l.hostRes == "" || rng.IntN(2) == 0) {
						kind = "resize-slots"
						next.amount = 1 + (l.amount+rng.IntN(3))%4 // another amount in 1..4
						r := map[string]any{"id": l.instRes, "amount": next.amount}
						if rng.IntN(3) == 0 {
							next.size = auditSizes[rng.IntN(len(auditSizes))]
							r["vcpus"], r["memory_mb"], r["disk_gb"] = next.size.VCPUs, next.size.MemoryMB, next.size.DiskGB
						}
						if rng.IntN(4) == 0 {
							next.affinity = auditAffinities[rng.IntN(len(auditAffinities))]
							r["affinity"] = next.affinity
						}
						req = map[string]any{"reservations": []map[string]any{r}}
					} else {
						kind = "resize"
						next.hosts = 1 + (l.hosts+rng.IntN(2))%3 // another size in 1..3
						req = map[string]any{"reservations": []map[string]any{{"id": l.hostRes, "min": next.hosts, "max": next.hosts}}}
					}
				}
				status, body, err := c.do(ctx, "PUT", "/v1/leases/"+l.id, req)
				if !record(kind, status, body, err) {
					return
				}
				if status == 200 {
					mu.Lock()
					*l = next
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	<-snapshotsDone
	if snapshotErr != nil {
		t.Fatalf("audit snapshot during the run: %v", snapshotErr)
	}

	// Summary: operations per kind, accepted (2xx) and rejected (409).
	var kinds []string
	for kind := range tally {
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	var summary strings.Builder
	total := 0
	for _, kind := range kinds {
		ok, no, other := 0, 0, 0
		for status, n := range tally[kind] {
			switch {
			case status < 300:
				ok += n
			case status == 409:
				no += n
			default:
				other += n
			}
			total += n
		}
		fmt.Fprintf(&summary, "\n  %-12s %6d accepted %6d rejected (409) %4d other", kind, ok, no, other)
	}
	live, liveSlots := 0, 0
	for _, l := range leases {
		if !l.deleted {
			live++
			if l.instRes != "" {
				liveSlots++
			}
		}
	}
	t.Logf("%s, %d clients, %d hosts, %s: %d requests (%.0f/s), %d leases live at the end (%d with instance slots):%s",
		tg.label, tg.clients, nHosts, *auditDuration, total, float64(total)/auditDuration.Seconds(), live, liveSlots, summary.String())
	for _, f := range failures {
		t.Error(f)
	}
	for _, kind := range []string{"create", "create-slots"} {
		if tally[kind][201] == 0 || tally[kind][409] == 0 {
			t.Errorf("no contention or no progress: %s %v", kind, tally[kind])
		}
	}

	// The audit, straight against the database. Too many findings of one kind are
	// counted, not all printed.
	const maxShown = 10
	shown := map[string]int{}
	report := func(kind, format string, args ...any) {
		if shown[kind]++; shown[kind] <= maxShown {
			t.Errorf(format, args...)
		}
	}

	final, err := auditAllocations(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []struct {
		name     string
		findings map[string]string
	}{{"overlap", final.overlaps}, {"whole/slots", final.wholeSlots}, {"capacity", final.over}} {
		for _, f := range kind.findings {
			report(kind.name, "%s", f)
		}
	}
	// What the snapshots taken during the run saw, though since deleted or moved.
	if n := len(during.overlaps) + len(during.wholeSlots) + len(during.over); n > 0 {
		t.Errorf("the %d snapshots taken during the run found %d overlapping whole-resource allocation pairs, %d whole-host/slot overlaps and %d host instants over capacity",
			snapshots, len(during.overlaps), len(during.wholeSlots), len(during.over))
		for _, findings := range []map[string]string{during.overlaps, during.wholeSlots, during.over} {
			for _, f := range findings {
				report("during", "during the run: %s", f)
			}
		}
	}
	var hostsSeen int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM hosts`).Scan(&hostsSeen); err != nil {
		t.Fatal(err)
	}
	if hostsSeen != nHosts {
		t.Errorf("%d hosts in the database, %d registered", hostsSeen, nHosts)
	}

	// (d) The leases are those accepted and not deleted, each holding what it asked.
	inDB, err := loadAuditLeases(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range inDB {
		names[d.name] = true
	}
	wrong, slotAllocs := 0, 0
	for _, l := range leases {
		d, ok := inDB[l.id]
		var problems []string
		switch {
		case l.deleted && ok:
			problems = []string{"deleted (204) but in the database"}
		case l.deleted:
			continue
		case !ok:
			problems = []string{"created (201) and never deleted, but not in the database"}
		default:
			problems = d.problems(l)
			for _, r := range d.reservations {
				for _, a := range r.allocs {
					if a.slots > 0 {
						slotAllocs++
					}
				}
			}
		}
		delete(inDB, l.id)
		if len(problems) > 0 {
			wrong++
			report("lease", "lease %s (%s): %s", l.id, l.name, strings.Join(problems, "; "))
		}
	}
	for id, d := range inDB {
		report("unknown", "lease %s (%s) is in the database but no client saw its creation accepted", id, d.name)
	}
	for _, name := range rejected {
		if names[name] {
			report("rejected", "creation of %s was rejected (409) but the lease is in the database", name)
		}
	}
	for kind, n := range shown {
		if n > maxShown {
			t.Errorf("... and %d more findings of kind %s", n-maxShown, kind)
		}
	}
	t.Logf("audit: %d overlapping whole-resource allocation pairs, %d whole-host/slot overlaps; "+
		"%d slot allocations live, %d instants checked on %d hosts (%d with a host full in vcpus, memory or disk), %d over capacity; "+
		"%d leases checked (%d wrong), %d rejected creations absent; "+
		"%d snapshots during the run: %d instants checked, %d overlapping pairs, %d whole-host/slot overlaps, %d instants over capacity",
		len(final.overlaps), len(final.wholeSlots), slotAllocs, final.instants, len(final.hosts), final.full, len(final.over),
		len(leases), wrong, len(rejected), snapshots, during.instants, len(during.overlaps), len(during.wholeSlots), len(during.over))
}

// allocationAudit is what auditAllocations finds in one snapshot of the allocations (or
// in several, merged): findings by a key naming the allocations or the host instant.
type allocationAudit struct {
	overlaps   map[string]string // (a) two whole-resource allocations of one resource overlap
	wholeSlots map[string]string // (b) a whole-resource allocation overlaps a slot allocation
	over       map[string]string // (c) a host's slots exceed its capacity at an instant
	// instants is how many host instants were checked, full how many of them found the
	// host full in some dimension; hosts are those holding slots.
	instants, full int
	hosts          map[string]bool
}

func newAllocationAudit() *allocationAudit {
	return &allocationAudit{overlaps: map[string]string{}, wholeSlots: map[string]string{}, over: map[string]string{}, hosts: map[string]bool{}}
}

// merge adds o's findings and counts to a.
func (a *allocationAudit) merge(o *allocationAudit) {
	for _, m := range [][2]map[string]string{{a.overlaps, o.overlaps}, {a.wholeSlots, o.wholeSlots}, {a.over, o.over}} {
		for k, v := range m[1] {
			m[0][k] = v
		}
	}
	for h := range o.hosts {
		a.hosts[h] = true
	}
	a.instants += o.instants
	a.full += o.full
}

// auditAllocations checks the allocations table with SQL (each query reads one snapshot):
// (a) no resource is in two overlapping whole-resource allocations (slots = 0); (b) no
// whole-resource allocation overlaps a slot allocation of the same resource; (c) at every
// instant a slot allocation starts on a host (the load only rises there), the slots of
// the host's slot allocations covering it, times their size, fit the host's vcpus,
// memory_mb and local_gb.
func auditAllocations(ctx context.Context, db *sql.DB) (*allocationAudit, error) {
	out := newAllocationAudit()
	rows, err := db.QueryContext(ctx, `SELECT a.id, a.resource_id, a.lease_id, a.start_at, a.end_at, b.id, b.lease_id, b.slots, b.start_at, b.end_at
		FROM allocations a JOIN allocations b
		  ON a.resource_id = b.resource_id AND a.id <> b.id AND a.start_at < b.end_at AND b.start_at < a.end_at
		WHERE a.slots = 0 AND (b.slots > 0 OR a.id < b.id)`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id1, id2, resource, l1, l2 string
		var slots int
		var s1, e1, s2, e2 auditTime
		if err := rows.Scan(&id1, &resource, &l1, &s1, &e1, &id2, &l2, &slots, &s2, &e2); err != nil {
			rows.Close()
			return nil, err
		}
		key := id1 + " " + id2
		if slots == 0 {
			out.overlaps[key] = fmt.Sprintf("resource %s double booked: lease %s [%s, %s) and lease %s [%s, %s)", resource, l1, s1, e1, l2, s2, e2)
		} else {
			out.wholeSlots[key] = fmt.Sprintf("host %s held whole by lease %s [%s, %s) and %d slots of it by lease %s [%s, %s)",
				resource, l1, s1, e1, slots, l2, s2, e2)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = db.QueryContext(ctx, `SELECT p.resource_id, p.start_at, h.vcpus, h.memory_mb, h.local_gb,
		  sum(a.slots * a.vcpus), sum(a.slots * a.memory_mb), sum(a.slots * a.disk_gb), sum(a.slots), count(*)
		FROM (SELECT DISTINCT resource_id, start_at FROM allocations WHERE slots > 0) p
		JOIN allocations a ON a.resource_id = p.resource_id AND a.slots > 0 AND a.start_at <= p.start_at AND p.start_at < a.end_at
		JOIN hosts h ON h.id = p.resource_id
		GROUP BY p.resource_id, p.start_at, h.vcpus, h.memory_mb, h.local_gb`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var host string
		var at auditTime
		var capacity, load climate.Size
		var slots, allocs int
		if err := rows.Scan(&host, &at, &capacity.VCPUs, &capacity.MemoryMB, &capacity.DiskGB,
			&load.VCPUs, &load.MemoryMB, &load.DiskGB, &slots, &allocs); err != nil {
			rows.Close()
			return nil, err
		}
		out.instants++
		out.hosts[host] = true
		switch {
		case !load.Within(capacity):
			out.over[host+" "+at.String()] = fmt.Sprintf("host %s over capacity at %s: %d slots in %d allocations take %+v of %+v",
				host, at, slots, allocs, load, capacity)
		case load.VCPUs == capacity.VCPUs || load.MemoryMB == capacity.MemoryMB || load.DiskGB == capacity.DiskGB:
			out.full++
		}
	}
	return out, rows.Err()
}

// auditTime scans a time column: PostgreSQL's timestamptz or SQLite's microseconds.
type auditTime struct{ time.Time }

func (t *auditTime) Scan(v any) error {
	switch v := v.(type) {
	case time.Time:
		t.Time = v.UTC()
	case int64:
		t.Time = time.UnixMicro(v).UTC()
	default:
		return fmt.Errorf("a time column holds %T", v)
	}
	return nil
}

func (t auditTime) String() string { return t.Format(auditDate) }

// auditDBLease is a lease as the database holds it.
type auditDBLease struct {
	name         string
	start, end   auditTime
	reservations []*auditDBReservation
}

type auditDBReservation struct {
	id, resourceType, status string
	maxCount, amount         int
	size                     climate.Size
	affinity                 sql.NullBool
	allocs                   []auditDBAllocation
}

type auditDBAllocation struct {
	resource   string
	start, end auditTime
	slots      int
	size       climate.Size
}

// loadAuditLeases reads every lease with its reservations and their allocations.
func loadAuditLeases(ctx context.Context, db *sql.DB) (map[string]*auditDBLease, error) {
	out := map[string]*auditDBLease{}
	rows, err := db.QueryContext(ctx, `SELECT id, name, start_at, end_at FROM leases`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		l := &auditDBLease{}
		if err := rows.Scan(&id, &l.name, &l.start, &l.end); err != nil {
			return nil, err
		}
		out[id] = l
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	res := map[string]*auditDBReservation{}
	rows, err = db.QueryContext(ctx, `SELECT id, lease_id, resource_type, status, max_count, amount, vcpus, memory_mb, disk_gb, affinity
		FROM reservations`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var lease string
		r := &auditDBReservation{}
		if err := rows.Scan(&r.id, &lease, &r.resourceType, &r.status, &r.maxCount, &r.amount,
			&r.size.VCPUs, &r.size.MemoryMB, &r.size.DiskGB, &r.affinity); err != nil {
			return nil, err
		}
		if l := out[lease]; l != nil {
			l.reservations = append(l.reservations, r)
		}
		res[r.id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = db.QueryContext(ctx, `SELECT reservation_id, resource_id, start_at, end_at, slots, vcpus, memory_mb, disk_gb FROM allocations`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var reservation string
		var a auditDBAllocation
		if err := rows.Scan(&reservation, &a.resource, &a.start, &a.end, &a.slots, &a.size.VCPUs, &a.size.MemoryMB, &a.size.DiskGB); err != nil {
			return nil, err
		}
		if r := res[reservation]; r != nil {
			r.allocs = append(r.allocs, a)
		}
	}
	return out, rows.Err()
}

// problems compares the lease in the database with what the clients believe of it.
func (d *auditDBLease) problems(l *auditLease) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if !d.start.Equal(l.start) || !d.end.Equal(l.end) {
		bad("[%s, %s) in the database, [%s, %s) after its last accepted update", d.start, d.end, l.start.Format(auditDate), l.end.Format(auditDate))
	}
	want := 0
	for _, n := range []int{l.hosts, l.ips, l.amount} {
		if n > 0 {
			want++
		}
	}
	if len(d.reservations) != want {
		bad("%d reservations, %d asked", len(d.reservations), want)
	}
	for _, r := range d.reservations {
		if r.status != string(climate.ReservationPending) {
			bad("reservation %s is %s", r.id, r.status)
		}
		hosts := map[string]bool{}
		slots := 0
		for _, a := range r.allocs {
			if !a.start.Equal(d.start.Time) || !a.end.Equal(d.end.Time) {
				bad("%s allocation of %s over [%s, %s), the lease's window is [%s, %s)", r.resourceType, a.resource, a.start, a.end, d.start, d.end)
			}
			if hosts[a.resource] {
				bad("reservation %s holds %s in two allocations", r.id, a.resource)
			}
			hosts[a.resource] = true
			slots += a.slots
			if r.resourceType == "virtual:instance" {
				if a.slots <= 0 || a.size != r.size {
					bad("slot allocation of %s: %d slots of %+v, the reservation's slots are %+v", a.resource, a.slots, a.size, r.size)
				}
			} else if a.slots != 0 {
				bad("%s allocation of %s holds %d slots", r.resourceType, a.resource, a.slots)
			}
		}
		switch r.resourceType {
		case "physical:host":
			if r.id != l.hostRes || r.maxCount != l.hosts || len(r.allocs) != l.hosts {
				bad("host reservation %s: max %d, %d hosts; reservation %s of %d hosts asked", r.id, r.maxCount, len(r.allocs), l.hostRes, l.hosts)
			}
		case "virtual:floatingip":
			if r.amount != l.ips || len(r.allocs) != l.ips {
				bad("floating IP reservation: amount %d, %d addresses; %d asked", r.amount, len(r.allocs), l.ips)
			}
		case "virtual:instance":
			var affinity *bool
			if r.affinity.Valid {
				affinity = &r.affinity.Bool
			}
			if r.id != l.instRes || r.amount != l.amount || r.size != l.size || affinityText(affinity) != affinityText(l.affinity) {
				bad("instance reservation %s: %d slots of %+v, affinity %s; reservation %s of %d slots of %+v, affinity %s asked",
					r.id, r.amount, r.size, affinityText(affinity), l.instRes, l.amount, l.size, affinityText(l.affinity))
			}
			switch {
			case slots != r.amount:
				bad("instance reservation %s: %d slots held, amount %d", r.id, slots, r.amount)
			case affinity != nil && *affinity && len(r.allocs) != 1:
				bad("instance reservation %s with affinity: its %d slots on %d hosts", r.id, slots, len(r.allocs))
			case affinity != nil && !*affinity && len(r.allocs) != slots:
				bad("instance reservation %s with anti-affinity: its %d slots on %d hosts", r.id, slots, len(r.allocs))
			}
		default:
			bad("reservation %s of type %s", r.id, r.resourceType)
		}
	}
	return out
}
