package http_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"climate"
	"climate/clock"
	climatehttp "climate/http"
	"climate/manager"
	"climate/postgres"
	"climate/sqlite"
)

var (
	propertySeed     = flag.Uint64("property.seed", 1, "seed of TestRandomRequests' generator (vary it to explore)")
	propertyRequests = flag.Int("property.n", 2000, "requests TestRandomRequests sends per store")
)

// maxHeapDuringRandomRequests bounds the test process's heap while it serves random
// requests; the inventory and leases involved take a few MB.
const maxHeapDuringRandomRequests = 256 << 20

// TestRandomRequests sends generated requests to every route, with every field replaced by
// values chosen to hurt (counts of 2^31-1, texts past every length limit, NUL characters,
// dates of year 1 and 9999, durations that overflow, deep nesting, wrong types, foreign
// origins and hosts, other projects' ids), on SQLite and on PostgreSQL. Every answer is a
// well-formed 2xx or 4xx, never a 5xx (a panic is one); a refused request changes nothing
// an admin can see; and the heap stays bounded.
func TestRandomRequests(t *testing.T) {
	onEachStore(t, func(t *testing.T, e *env) {
		g := &generator{rng: rand.New(rand.NewPCG(*propertySeed, 0x5eed)), vars: seed(e)}
		g.leases = []string{g.vars["lease"], g.vars["alease"]}
		g.reservations = []string{g.vars["res"], g.vars["ares"]}
		g.webhooks = []string{g.vars["ahook"]}
		g.fips = []string{g.vars["fip"]}
		state := e.state(g.vars)
		var peak uint64
		statuses := map[int]int{}
		for i := range *propertyRequests {
			c := g.request()
			r := e.do(c)
			statuses[r.status]++
			where := fmt.Sprintf("request %d (-property.seed=%d): %s %s %.300s", i, *propertySeed, c.method, c.path, c.body)
			if r.status >= 500 || r.status < 200 {
				t.Fatalf("%s\n→ %.500s", where, r)
			}
			if c.method != http.MethodHead && r.status != http.StatusNoContent && !json.Valid(r.body) {
				t.Fatalf("%s\n→ a body that is not JSON: %.500s", where, r.body)
			}
			if r.status >= 400 && c.method != http.MethodHead {
				checkErrorBody(t, r)
			}
			switch {
			case r.status >= 400 && c.method != http.MethodGet && c.method != http.MethodHead:
				if now := e.state(g.vars); now != state {
					t.Fatalf("%s\n→ %.300s, yet it changed the state: %s", where, r, stateDiff(state, now))
				}
			case r.status < 300 && c.method != http.MethodGet && c.method != http.MethodHead:
				g.learn(e, c, r)
				state = e.state(g.vars)
			}
			if i%50 == 0 {
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapAlloc)
			}
		}
		t.Logf("%d requests, statuses %v, peak heap %.1f MB", *propertyRequests, statuses, float64(peak)/(1<<20))
		if peak > maxHeapDuringRandomRequests {
			t.Errorf("peak heap %d MB, want at most %d MB", peak>>20, maxHeapDuringRandomRequests>>20)
		}
	})
}

// onEachStore runs fn against the API over SQLite, then over PostgreSQL (skipped without
// CLIMATE_TEST_POSTGRES), so that both stores answer every input alike.
func onEachStore(t *testing.T, fn func(t *testing.T, e *env)) {
	open := map[string]func(t *testing.T) (climate.Store, error){
		"sqlite": func(t *testing.T) (climate.Store, error) {
			return sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "climate.db"))
		},
		"postgres": func(t *testing.T) (climate.Store, error) {
			return postgres.Open(context.Background(), postgres.TestDSN(t))
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			st, err := open[name](t)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			fn(t, newEnvOn(t, st))
		})
	}
}

// newEnvOn is newEnv on a given store.
func newEnvOn(t testing.TB, st climate.Store) *env {
	clk := clock.NewFake(t0)
	mgr := manager.New(st, clk, manager.Config{BeforeEnd: manager.DefaultBeforeEnd})
	recv := newReceiver(t, http.StatusNoContent)
	api := &climatehttp.Server{Leases: mgr, Hosts: mgr, Availability: mgr, Auth: climatehttp.NoAuth{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Webhooks: webhookService(st, clk, true), FloatingIPs: mgr, Flavors: mgr}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, clk: clk, recv: recv}
}

// generator makes requests: mostly plausible ones with one to three fields made hostile,
// so that requests get past the first check and reach the deeper ones.
type generator struct {
	rng          *rand.Rand
	vars         map[string]string
	leases       []string // ids of leases that exist (or did)
	reservations []string
	hosts        []string
	webhooks     []string
	fips         []string // floating IP ids
}

func (g *generator) pick(items ...string) string { return items[g.rng.IntN(len(items))] }

func (g *generator) chance(p float64) bool { return g.rng.Float64() < p }

// hostile are JSON values that have broken, or could break, a server.
var hostile = []string{
	`2147483647`, `-2147483648`, `2147483648`, `9223372036854775808`, `1e308`, `-1`, `0`, `1.5`,
	`"2147483647"`, `null`, `true`, `[]`, `{}`, `""`, `" "`, `[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]`,
	`"now"`, `"earliest"`, `"0001-01-01 00:00"`, `"0002-01-01 00:00"`, `"9999-12-31 23:59"`, `"2199-12-31 23:59"`,
	`"2200-01-01 00:00"`, `"1969-12-31 23:59"`, `"1970-01-01 00:00"`, `"2026-11-21T10:00:00+14:00"`,
	`"2147483647d"`, `"36500d2562047h"`, `"106751d"`, `"1ns"`, `"-1h"`, `"0s"`,
	`"a\u0000b"`, `"\ud800"`, `"é\u2028"`, `"'; DROP TABLE leases; --"`, `"$gpu"`,
	`"[\"==\", \"$gpu\", \"true\"]"`, `"[\"and\", [\">=\", \"$vcpus\", \"2147483648\"]]"`, `"[\"==\", \"$nosuch\", 1]"`,
	`"` + strings.Repeat(`[\"not\", `, 60) + `[]` + strings.Repeat(`]`, 60) + `"`,
	`"` + strings.Repeat("x", 81) + `"`, `"` + strings.Repeat("x", 256) + `"`, `"` + strings.Repeat("x", 2800) + `"`,
	`"` + strings.Repeat("x", 70000) + `"`,
}

func (g *generator) value() string { return hostile[g.rng.IntN(len(hostile))] }

// text is a hostile value as plain text (for paths, query strings and headers).
func (g *generator) text() string {
	var s string
	if json.Unmarshal([]byte(g.value()), &s) != nil {
		return strings.Trim(g.value(), `"`)
	}
	return s
}

func (g *generator) lease() string {
	if len(g.leases) == 0 || g.chance(0.15) {
		return g.text()
	}
	return g.leases[g.rng.IntN(len(g.leases))]
}

func (g *generator) host() string {
	if g.chance(0.15) {
		return g.text()
	}
	if len(g.hosts) > 0 && g.chance(0.3) {
		return g.hosts[g.rng.IntN(len(g.hosts))]
	}
	return g.pick("1", "2", "3")
}

// mutate replaces, deletes or adds up to three keys of a JSON object.
func (g *generator) mutate(obj map[string]any) string {
	for range g.rng.IntN(4) {
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		switch {
		case len(keys) > 0 && g.chance(0.8):
			k := keys[g.rng.IntN(len(keys))]
			obj[k] = json.RawMessage(g.value())
		case len(keys) > 0 && g.chance(0.5):
			delete(obj, keys[g.rng.IntN(len(keys))])
		default:
			obj[g.pick("project_id", "id", "gpu", "rack", "x"+g.text())] = json.RawMessage(g.value())
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return `{"broken": ` // itself a case
	}
	return string(b)
}

func (g *generator) reservation() map[string]any {
	res := map[string]any{"resource_type": "physical:host", "min": 1 + g.rng.IntN(2), "max": 1 + g.rng.IntN(3),
		"hypervisor_properties": "", "resource_properties": g.pick("", `["==", "$gpu", "true"]`, `["==", "$rack", "r1"]`)}
	if len(g.reservations) > 0 && g.chance(0.5) {
		res["id"] = g.reservations[g.rng.IntN(len(g.reservations))]
	}
	return res
}

func (g *generator) leaseBody() map[string]any {
	day := 1 + g.rng.IntN(300)
	start := t0.AddDate(0, 0, day).Format("2006-01-02 15:04")
	end := t0.AddDate(0, 0, day+1+g.rng.IntN(5)).Format("2006-01-02 15:04")
	res := []any{}
	for range 1 + g.rng.IntN(2) {
		res = append(res, g.reservation())
	}
	body := map[string]any{"name": fmt.Sprintf("l%d", g.rng.IntN(1000)), "start_date": start, "end_date": end,
		"reservations": res, "events": []any{}}
	if g.chance(0.2) {
		body["start_date"], body["duration"] = "earliest", g.pick("1h", "2d", "90m")
		delete(body, "end_date")
	}
	if g.chance(0.2) {
		body["dry_run"] = true
	}
	if g.chance(0.2) {
		body["before_start_date"] = t0.AddDate(0, 0, day-1).Format("2006-01-02 15:04")
	}
	return body
}

func (g *generator) query(keys ...string) string {
	v := url.Values{}
	for _, k := range keys {
		if g.chance(0.5) {
			continue
		}
		if g.chance(0.6) {
			v.Set(k, g.text())
		} else {
			v.Set(k, g.pick("2026-11-22 00:00", "2026-11-30 00:00", "1h", "1d", "2", "now", "true", "False"))
		}
	}
	if g.chance(0.05) {
		v.Add(g.pick(keys...), "1") // repeated, or an unknown key
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// webhookBody is a webhook to create: on the env's receiver (or a closed port), for some
// event types, maybe with a secret, a project or every project.
func (g *generator) webhookBody() map[string]any {
	body := map[string]any{"url": g.pick(g.vars["hook"], g.vars["hook"]+"/x?token=1", "http://127.0.0.1:1/")}
	if g.chance(0.5) {
		types := []any{}
		for range g.rng.IntN(4) {
			types = append(types, g.pick(climate.NotificationTypes()...))
		}
		body["event_types"] = types
	}
	if g.chance(0.2) {
		body["secret"] = g.pick("0123456789abcdef", "whsec_"+strings.Repeat("ab", 32))
	}
	if g.chance(0.2) {
		body["project_id"] = g.pick("physics", "chemistry", "admin")
	}
	if g.chance(0.1) {
		body["all_projects"] = true
	}
	return body
}

func (g *generator) webhook() string {
	if len(g.webhooks) == 0 || g.chance(0.15) {
		return g.text()
	}
	return g.webhooks[g.rng.IntN(len(g.webhooks))]
}

func (g *generator) fip() string {
	if len(g.fips) == 0 || g.chance(0.15) {
		return g.text()
	}
	return g.fips[g.rng.IntN(len(g.fips))]
}

// request makes one request.
func (g *generator) request() call {
	var c call
	switch g.rng.IntN(18) {
	case 0:
		c = call{method: "GET", path: "/v1/leases" + g.query("limit", "marker", "status", "project_id")}
	case 1:
		c = call{method: "POST", path: "/v1/leases", body: g.mutate(g.leaseBody())}
	case 2:
		c = call{method: "GET", path: "/v1/leases/" + url.PathEscape(g.lease())}
	case 3:
		u := g.leaseBody()
		delete(u, "dry_run")
		delete(u, "duration")
		if g.chance(0.5) {
			delete(u, "start_date")
		}
		u["reservations"] = []any{g.reservation()}
		c = call{method: "PUT", path: "/v1/leases/" + url.PathEscape(g.lease()), body: g.mutate(u)}
	case 4:
		c = call{method: "DELETE", path: "/v1/leases/" + url.PathEscape(g.lease())}
	case 5:
		c = call{method: g.pick("GET", "POST"), path: "/v1/os-hosts", body: g.mutate(map[string]any{
			"name": fmt.Sprintf("h%d", g.rng.IntN(50)), "vcpus": g.rng.IntN(64), "gpu": g.pick("true", "false"), "rack": g.pick("r1", "r2")})}
	case 6:
		c = call{method: g.pick("GET", "PUT", "DELETE"), path: "/v1/os-hosts/" + url.PathEscape(g.host()),
			body: g.mutate(map[string]any{g.pick("rack", "vcpus", "hypervisor_hostname", "availability_zone", "reservable"): g.pick("r3", "8", "true")})}
	case 7:
		c = call{method: "GET", path: "/v1/os-hosts/allocations" + g.query("lease_id", "reservation_id", "from", "to", "limit", "marker")}
	case 8:
		c = call{method: "GET", path: "/v1/os-hosts/" + url.PathEscape(g.host()) + "/allocation" + g.query("lease_id", "reservation_id")}
	case 9:
		c = call{method: "GET", path: "/v1/os-hosts/properties" + g.query("detail", "all")}
	case 10:
		c = call{method: "PATCH", path: "/v1/os-hosts/properties/" + url.PathEscape(g.pick("gpu", "rack", g.text())), body: g.mutate(map[string]any{"private": g.chance(0.5)})}
	case 11:
		c = call{method: "GET", path: "/v1/availability/" + g.pick("earliest", "timeline") +
			g.query("count", "duration", "after", "deadline", "limit", "from", "to", "step", "hypervisor_properties", "resource_properties")}
	case 12:
		c = call{method: g.pick("GET", "POST"), path: "/v1/webhooks", body: g.mutate(g.webhookBody())}
	case 13:
		u := map[string]any{}
		for _, k := range []string{"url", "event_types", "enabled"} {
			if g.chance(0.5) {
				u[k] = g.webhookBody()[k]
			}
		}
		if g.chance(0.5) {
			u["enabled"] = g.chance(0.5)
		}
		c = call{method: g.pick("GET", "PUT", "PUT", "DELETE"), path: "/v1/webhooks/" + url.PathEscape(g.webhook()), body: g.mutate(u)}
	case 14:
		c = call{method: "GET", path: "/v1/webhooks/" + url.PathEscape(g.webhook()) + "/deliveries" + g.query("limit")}
	case 15:
		c = call{method: g.pick("GET", "POST", "POST"), path: "/v1/floatingips", body: g.mutate(map[string]any{
			"floating_network_id": g.pick("ext-net", "other-net"),
			"floating_ip_address": g.pick(fmt.Sprintf("172.24.4.%d", g.rng.IntN(300)), fmt.Sprintf("2001:db8::%x", g.rng.IntN(100)), "::ffff:172.24.4.101", "abc", ""),
			"subnet_id":           g.pick("sub-1", "")})}
	case 16:
		c = call{method: g.pick("GET", "DELETE"), path: "/v1/floatingips/" + url.PathEscape(g.fip())}
	default:
		c = call{method: "GET", path: g.pick("/", "/versions", "/v1", "/v1/nothing", "/v1/leases.json", "/v1/os-hosts/1/x", "/v1/webhooks/x/y", "/v1/floatingips/x/y")}
	}
	if c.method == "GET" || c.method == "DELETE" {
		c.body = ""
	}
	if g.chance(0.08) { // another method on the route
		c.method = g.pick("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")
	}
	if g.chance(0.05) && c.body != "" {
		c.body = g.pick(`[`+c.body+`]`, `{"a": `, `null`, c.body+c.body, strings.Repeat("[", 10000))
	}
	c.header = g.headers(c.body != "")
	return c
}

func (g *generator) headers(body bool) map[string]string {
	h := map[string]string{}
	switch g.rng.IntN(6) {
	case 0:
		maps := []map[string]string{asAlice, asBob, asReader, asGuest}
		for k, v := range maps[g.rng.IntN(len(maps))] {
			h[k] = v
		}
	case 1:
		h["X-Project-Id"], h["X-Roles"] = g.text(), g.pick("member", "admin", g.text())
	}
	if body && g.chance(0.05) {
		h["Content-Type"] = g.pick("", "text/plain", "application/x-www-form-urlencoded", "application/json; ; =")
	}
	if g.chance(0.03) {
		h["Origin"], h["Sec-Fetch-Site"] = g.pick("https://evil.example", "null"), g.pick("cross-site", "same-site", "")
	}
	if g.chance(0.02) {
		h["Host"] = g.pick("evil.example", "127.0.0.1.evil.example:1234", "[::1]:1", "localhost")
	}
	if g.chance(0.02) {
		h["OpenStack-API-Version"] = g.pick("reservation 9.9", "reservation x", "reservation latest")
	}
	for k, v := range h { // the client cannot send these bytes in a header at all
		if strings.ContainsAny(v, "\x00\r\n") || !isASCIIPrintable(v) {
			delete(h, k)
		}
	}
	return h
}

func isASCIIPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// learn remembers the ids an accepted request created, and deletes most new leases and
// webhooks again so the state (compared after every refusal) stays small.
func (g *generator) learn(e *env, c call, r response) {
	var body struct {
		Lease struct {
			ID           string
			Reservations []struct{ ID string }
		}
		Host       struct{ ID string }
		Webhook    struct{ ID string }
		FloatingIP struct{ ID string } `json:"floatingip"`
		DryRun     bool                `json:"dry_run"`
	}
	if json.Unmarshal(r.body, &body) != nil {
		return
	}
	if id := body.Webhook.ID; id != "" && c.method == "POST" {
		if len(g.webhooks) > 8 || g.chance(0.6) {
			e.mustDo(call{method: "DELETE", path: "/v1/webhooks/" + id}, http.StatusNoContent)
			return
		}
		g.webhooks = append(g.webhooks, id)
	}
	if id := body.FloatingIP.ID; id != "" && c.method == "POST" {
		if len(g.fips) > 16 || g.chance(0.3) {
			e.mustDo(call{method: "DELETE", path: "/v1/floatingips/" + id}, http.StatusNoContent)
			return
		}
		g.fips = append(g.fips, id)
	}
	if id := body.Host.ID; id != "" && c.method == "POST" {
		g.hosts = append(g.hosts, id)
	}
	if id := body.Lease.ID; id != "" && c.method == "POST" && !body.DryRun {
		if len(g.leases) > 12 || g.chance(0.6) {
			e.mustDo(call{method: "DELETE", path: "/v1/leases/" + id}, http.StatusNoContent)
			return
		}
		g.leases = append(g.leases, id)
		for _, res := range body.Lease.Reservations {
			g.reservations = append(g.reservations, res.ID)
		}
	}
}
