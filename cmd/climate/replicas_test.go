package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"climate/postgres"
)

var auditDuration = flag.Duration("audit-duration", 60*time.Second, "how long TestReplicasConcurrencyAudit's clients run")

// startReplicas starts n `climate serve` subprocesses of bin with args; replica i's stderr
// also goes to logs[i] when logs is not nil. They are stopped when the test ends.
func startReplicas(t *testing.T, bin string, n int, logs []io.Writer, args ...string) []*benchServer {
	t.Helper()
	var out []*benchServer
	for i := range n {
		var w io.Writer
		if logs != nil {
			w = logs[i]
		}
		s, err := startServeProcess(context.Background(), bin, args, w)
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		t.Cleanup(s.stop)
		out = append(out, s)
	}
	return out
}

// auditClient is a climate API client that records what it asked and what it got.
type auditClient struct {
	http *http.Client
	base string
}

// do sends a JSON request and returns the status and decoded body (nil unless JSON).
func (c *auditClient) do(ctx context.Context, method, path string, body any) (int, map[string]any, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var out map[string]any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s %s: %d with a body that is not JSON: %q", method, path, resp.StatusCode, data)
		}
	}
	return resp.StatusCode, out, nil
}

// auditLease is what the clients believe about one lease whose creation was accepted.
type auditLease struct {
	id, name, reservation string
	start, end            time.Time
	hosts                 int
	ips                   int // floating IPs of its virtual:floatingip reservation (0: none)
	deleted               bool
}

// auditTally counts answers per operation kind and status code.
type auditTally map[string]map[int]int

func (a auditTally) add(kind string, status int) {
	if a[kind] == nil {
		a[kind] = map[int]int{}
	}
	a[kind][status]++
}

const auditDate = "2006-01-02 15:04"

// Three replicas on one PostgreSQL schema, 32 clients spread over them creating,
// prolonging, shifting, resizing and deleting leases on 6 hosts for -audit-duration, with
// heavy contention (random windows within one day). Every answer is recorded; then the
// schema is audited directly: no two allocations of a host overlap, the leases are
// exactly those accepted and not deleted, with the dates and sizes of their last accepted
// update, and no rejected creation left anything behind. No answer may be a 5xx.
func TestReplicasConcurrencyAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3 server subprocesses for -audit-duration (60 s)")
	}
	dsn := postgres.TestDSN(t)
	bin := climateBinary(t)
	const (
		nReplicas = 3
		nClients  = 32
		nHosts    = 6
		slot      = 10 * time.Minute
	)
	replicas := startReplicas(t, bin, nReplicas, nil, "--database", dsn, "--log-level", "error")
	transport := &http.Transport{MaxIdleConnsPerHost: nClients}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Timeout: time.Minute, Transport: transport}
	ctx := context.Background()
	for i := range nHosts {
		c := &auditClient{http: hc, base: replicas[i%nReplicas].url}
		if status, body, err := c.do(ctx, "POST", "/v1/os-hosts", map[string]any{"name": fmt.Sprintf("audit-h%d", i)}); err != nil || status != 201 {
			t.Fatalf("create host: %d %v %v", status, body, err)
		}
		// As many floating IPs, which a third of the leases also reserve.
		if status, body, err := c.do(ctx, "POST", "/v1/floatingips", map[string]any{"floating_network_id": "audit-net",
			"floating_ip_address": fmt.Sprintf("172.24.4.%d", 10+i)}); err != nil || status != 201 {
			t.Fatalf("create floating IP: %d %v %v", status, body, err)
		}
	}

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
	var wg sync.WaitGroup
	for k := range nClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &auditClient{http: hc, base: replicas[k%nReplicas].url}
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
					name := fmt.Sprintf("audit-c%d-%d", k, n)
					start := base.Add(time.Duration(rng.IntN(144)) * slot)
					end := start.Add(time.Duration(3+rng.IntN(22)) * slot)
					hosts := 1 + rng.IntN(3)
					reservations := []map[string]any{{"resource_type": "physical:host", "min": hosts, "max": hosts,
						"hypervisor_properties": "", "resource_properties": ""}}
					ips := 0
					if rng.IntN(3) == 0 {
						ips = 1 + rng.IntN(2)
						reservations = append(reservations, map[string]any{"resource_type": "virtual:floatingip", "network_id": "audit-net", "amount": ips})
					}
					status, body, err := c.do(ctx, "POST", "/v1/leases", map[string]any{
						"name": name, "start_date": start.Format(auditDate), "end_date": end.Format(auditDate),
						"reservations": reservations,
					})
					if !record("create", status, body, err) {
						return
					}
					if status == 409 {
						mu.Lock()
						rejected = append(rejected, name)
						mu.Unlock()
						continue
					}
					l := body["lease"].(map[string]any)
					rec := &auditLease{id: l["id"].(string), name: name, start: start, end: end, hosts: hosts, ips: ips,
						reservation: l["reservations"].([]any)[0].(map[string]any)["id"].(string)}
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
				start, end, hosts := l.start, l.end, l.hosts
				switch op % 3 {
				case 0:
					kind = "prolong"
					end = end.Add(time.Duration(1+rng.IntN(6)) * slot)
					req = map[string]any{"end_date": end.Format(auditDate)}
				case 1:
					kind = "shift"
					d := time.Duration(rng.IntN(7)-3) * slot
					if d == 0 || start.Add(d).Before(base) {
						d = 2 * slot
					}
					start, end = start.Add(d), end.Add(d)
					req = map[string]any{"start_date": start.Format(auditDate), "end_date": end.Format(auditDate)}
				default:
					kind = "resize"
					hosts = 1 + (hosts+rng.IntN(2))%3 // another size in 1..3
					req = map[string]any{"reservations": []map[string]any{{"id": l.reservation, "min": hosts, "max": hosts}}}
				}
				status, body, err := c.do(ctx, "PUT", "/v1/leases/"+l.id, req)
				if !record(kind, status, body, err) {
					return
				}
				if status == 200 {
					mu.Lock()
					l.start, l.end, l.hosts = start, end, hosts
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()

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
		fmt.Fprintf(&summary, "\n  %-8s %6d accepted %6d rejected (409) %4d other", kind, ok, no, other)
	}
	live := 0
	for _, l := range leases {
		if !l.deleted {
			live++
		}
	}
	t.Logf("%d replicas, %d clients, %d hosts, %s: %d requests (%.0f/s), %d leases live at the end:%s",
		nReplicas, nClients, nHosts, *auditDuration, total, float64(total)/auditDuration.Seconds(), live, summary.String())
	for _, f := range failures {
		t.Error(f)
	}
	if tally["create"][201] == 0 || tally["create"][409] == 0 {
		t.Errorf("no contention or no progress: creations %v", tally["create"])
	}

	// The audit, straight against the schema.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT a.resource_id, a.lease_id, a.start_at, a.end_at, b.lease_id, b.start_at, b.end_at
		FROM allocations a JOIN allocations b
		  ON a.resource_id = b.resource_id AND a.id < b.id AND a.start_at < b.end_at AND b.start_at < a.end_at`)
	if err != nil {
		t.Fatal(err)
	}
	overlaps := 0
	for rows.Next() {
		var host, l1, l2 string
		var s1, e1, s2, e2 time.Time
		if err := rows.Scan(&host, &l1, &s1, &e1, &l2, &s2, &e2); err != nil {
			t.Fatal(err)
		}
		overlaps++
		t.Errorf("host %s double booked: lease %s [%s, %s) and lease %s [%s, %s)", host, l1, s1, e1, l2, s2, e2)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	type dbLease struct {
		name                             string
		start, end                       time.Time
		allocs, offDates, maxCnt, amount int
	}
	inDB := map[string]dbLease{}
	names := map[string]bool{}
	rows, err = conn.Query(ctx, `SELECT l.id, l.name, l.start_at, l.end_at,
		  (SELECT count(*) FROM allocations a WHERE a.lease_id = l.id),
		  (SELECT count(*) FROM allocations a WHERE a.lease_id = l.id AND (a.start_at <> l.start_at OR a.end_at <> l.end_at)),
		  (SELECT coalesce(max(max_count), 0) FROM reservations r WHERE r.lease_id = l.id),
		  (SELECT coalesce(max(amount), 0) FROM reservations r WHERE r.lease_id = l.id)
		FROM leases l`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var d dbLease
		if err := rows.Scan(&id, &d.name, &d.start, &d.end, &d.allocs, &d.offDates, &d.maxCnt, &d.amount); err != nil {
			t.Fatal(err)
		}
		inDB[id] = d
		names[d.name] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wrong := 0
	for _, l := range leases {
		d, ok := inDB[l.id]
		switch {
		case l.deleted && ok:
			t.Errorf("lease %s (%s) was deleted (204) but is in the database", l.id, l.name)
		case l.deleted:
			continue
		case !ok:
			t.Errorf("lease %s (%s) was created (201) and never deleted, but is not in the database", l.id, l.name)
		case !d.start.Equal(l.start) || !d.end.Equal(l.end):
			t.Errorf("lease %s (%s): [%s, %s) in the database, [%s, %s) after its last accepted update", l.id, l.name,
				d.start.UTC(), d.end.UTC(), l.start, l.end)
		case d.allocs != l.hosts+l.ips || d.maxCnt != l.hosts || d.amount != l.ips || d.offDates != 0:
			t.Errorf("lease %s (%s): %d allocations (%d with other dates), reservation max %d, amount %d; %d hosts and %d floating IPs after its last accepted update",
				l.id, l.name, d.allocs, d.offDates, d.maxCnt, d.amount, l.hosts, l.ips)
		default:
			delete(inDB, l.id)
			continue
		}
		wrong++
		delete(inDB, l.id)
	}
	for id, d := range inDB {
		t.Errorf("lease %s (%s) is in the database but no client saw its creation accepted", id, d.name)
	}
	for _, name := range rejected {
		if names[name] {
			t.Errorf("creation of %s was rejected (409) but the lease is in the database", name)
		}
	}
	t.Logf("audit: %d overlapping allocation pairs, %d leases checked (%d wrong), %d rejected creations absent",
		overlaps, len(leases), wrong, len(rejected))
}
