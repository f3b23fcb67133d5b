package http_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"climate"
	climatehttp "climate/http"
)

// storeLease is a lease as the manager would write it: one reservation holding hosts over
// [start, end), and its start and end events.
func storeLease(project string, status climate.LeaseStatus, created, start, end time.Time, hosts ...string) *climate.Lease {
	id := climate.NewID()
	r := climate.Reservation{ID: climate.NewID(), LeaseID: id, ResourceType: climate.ResourceTypeHost,
		Status: climate.ReservationPending, Min: len(hosts), Max: len(hosts), CreatedAt: created}
	for _, h := range hosts {
		r.Allocations = append(r.Allocations, climate.Allocation{ID: climate.NewID(), ReservationID: r.ID, LeaseID: id,
			ResourceID: h, Start: start, End: end})
	}
	return &climate.Lease{ID: id, Name: project + "-" + id[len(id)-8:], UserID: "u-" + project, ProjectID: project,
		Start: start, End: end, Status: status, CreatedAt: created, Reservations: []climate.Reservation{r},
		Events: []climate.Event{
			{ID: climate.NewID(), LeaseID: id, Type: climate.EventStartLease, Time: start, Status: climate.EventUndone, CreatedAt: created},
			{ID: climate.NewID(), LeaseID: id, Type: climate.EventEndLease, Time: end, Status: climate.EventUndone, CreatedAt: created},
		}}
}

// insert writes leases straight into the store, in one transaction (much faster than
// through the API).
func (e *env) insert(leases ...*climate.Lease) {
	e.t.Helper()
	err := e.store.Update(context.Background(), func(tx climate.Tx) error {
		for _, l := range leases {
			if err := tx.InsertLease(context.Background(), l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// addLeases inserts n leases of project with status, all created at created.
func (e *env) addLeases(n int, project string, status climate.LeaseStatus, created time.Time) {
	e.t.Helper()
	leases := make([]*climate.Lease, n)
	for i := range leases {
		leases[i] = storeLease(project, status, created, t0.Add(24*time.Hour), t0.Add(48*time.Hour), "1")
	}
	e.insert(leases...)
}

// page is one answer of a list: its items' ids (idKey) and its next link, if any.
type page struct {
	ids  []string
	next string
	keys []string
}

func (e *env) getPage(path, key, idKey string, header map[string]string) page {
	e.t.Helper()
	body := e.mustDo(call{method: "GET", path: path, header: header}, http.StatusOK)
	p := page{ids: []string{}, keys: keys(body)}
	items, ok := body[key].([]any)
	if !ok {
		e.t.Fatalf("GET %s: %q is %#v, want a list", path, key, body[key])
	}
	for _, it := range items {
		p.ids = append(p.ids, it.(map[string]any)[idKey].(string))
	}
	if links, ok := body[key+"_links"]; ok {
		l := links.([]any)
		if len(l) != 1 || l[0].(map[string]any)["rel"] != "next" {
			e.t.Fatalf("GET %s: links %v, want one next link", path, links)
		}
		p.next = l[0].(map[string]any)["href"].(string)
		if !strings.HasPrefix(p.next, e.url+"/") {
			e.t.Fatalf("GET %s: next link %s is not on %s", path, p.next, e.url)
		}
	}
	return p
}

// walk lists path page by page, following next links, and returns every id in order and
// the number of pages. Every page but the last must be full (limit items).
func (e *env) walk(path, key, idKey string, limit int, header map[string]string) (ids []string, pages int) {
	e.t.Helper()
	ids = []string{}
	for path != "" {
		p := e.getPage(path, key, idKey, header)
		pages++
		if len(p.ids) > limit || (p.next != "" && len(p.ids) != limit) {
			e.t.Fatalf("GET %s: %d items with next link %q, want %d (a full page) before a next link", path, len(p.ids), p.next, limit)
		}
		ids = append(ids, p.ids...)
		path = strings.TrimPrefix(p.next, e.url)
		if pages > 1000 {
			e.t.Fatalf("pages never end")
		}
	}
	return ids, pages
}

func TestListLeasesPages(t *testing.T) {
	e := newEnv(t, nil)
	// Ties in created_at: paging must order them by id, as the full list does.
	e.addLeases(25, "physics", climate.LeasePending, t0)
	e.addLeases(10, "chemistry", climate.LeaseActive, t0.Add(time.Second))
	e.addLeases(5, "physics", climate.LeaseError, t0.Add(-time.Second))

	full := e.getPage("/v1/leases", "leases", "id", nil)
	if len(full.ids) != 40 || !reflect.DeepEqual(full.keys, []string{"leases"}) {
		t.Fatalf("full list: %d leases, keys %v; want 40 in Blazar's shape {\"leases\": […]}", len(full.ids), full.keys)
	}
	var physics []string
	project := map[string]string{}
	for _, id := range full.ids {
		l := e.mustDo(call{method: "GET", path: "/v1/leases/" + id}, http.StatusOK)
		project[id] = lookup(t, l, "lease.project_id")
		if project[id] == "physics" {
			physics = append(physics, id)
		}
	}

	for _, limit := range []int{1, 7, 39, 40, 41, 1000} {
		ids, pages := e.walk(fmt.Sprintf("/v1/leases?limit=%d", limit), "leases", "id", limit, nil)
		if want := (40 + limit - 1) / limit; !reflect.DeepEqual(ids, full.ids) || pages != want {
			t.Errorf("limit %d: %d pages of %v, want %d pages of the full list %v", limit, pages, ids, want, full.ids)
		}
	}
	// Without a limit, a marker lists everything after it.
	if got := e.getPage("/v1/leases?marker="+full.ids[9], "leases", "id", nil); !reflect.DeepEqual(got.ids, full.ids[10:]) {
		t.Errorf("marker without limit: got %v, want %v", got.ids, full.ids[10:])
	}

	// Members page through their project's leases only.
	if ids, _ := e.walk("/v1/leases?limit=4", "leases", "id", 4, asAlice); !reflect.DeepEqual(ids, physics) {
		t.Errorf("alice's pages: got %v, want physics' leases %v", ids, physics)
	}
	if ids, _ := e.walk("/v1/leases?limit=4&project_id=physics", "leases", "id", 4, asAlice); !reflect.DeepEqual(ids, physics) {
		t.Errorf("alice's pages of her own project: got %v, want %v", ids, physics)
	}

	// Filters, kept in the next links.
	count := func(path string, header map[string]string) int {
		t.Helper()
		ids, _ := e.walk(path, "leases", "id", 3, header)
		all := e.getPage(strings.Replace(path, "limit=3", "", 1), "leases", "id", header)
		if !reflect.DeepEqual(ids, all.ids) {
			t.Errorf("%s: pages list %v, the whole list %v", path, ids, all.ids)
		}
		return len(ids)
	}
	for _, tc := range []struct {
		path   string
		header map[string]string
		want   int
	}{
		{"/v1/leases?limit=3&status=PENDING", nil, 25},
		{"/v1/leases?limit=3&status=active,error", nil, 15},
		{"/v1/leases?limit=3&status=ACTIVE&status=ERROR", nil, 15},
		{"/v1/leases?limit=3&status=ACTIVE", asAlice, 0},
		{"/v1/leases?limit=3&status=ERROR", asReader, 5},
		{"/v1/leases?limit=3&project_id=chemistry", nil, 10},
		{"/v1/leases?limit=3&project_id=chemistry&status=PENDING", nil, 0},
		{"/v1/leases?limit=3&project_id=nobody", nil, 0},
		{"/v1/leases?limit=3&name=" + url.QueryEscape("chemistry-"+full.ids[len(full.ids)-1][len(full.ids[len(full.ids)-1])-8:]), nil, 1},
	} {
		if got := count(tc.path, tc.header); got != tc.want {
			t.Errorf("%s: %d leases, want %d", tc.path, got, tc.want)
		}
	}

	// Bad input is a 400 that says what is wrong; another project's lease as a marker is
	// as unknown as a missing one.
	var chemistry string
	for _, id := range full.ids {
		if project[id] == "chemistry" {
			chemistry = id
		}
	}
	for _, tc := range []struct {
		path   string
		header map[string]string
		status int
		msg    string
	}{
		{"/v1/leases?limit=0", nil, 400, `limit="0" is not a positive integer`},
		{"/v1/leases?limit=-2", nil, 400, `limit="-2" is not a positive integer`},
		{"/v1/leases?limit=ten", nil, 400, `limit="ten" is not a positive integer`},
		{"/v1/leases?limit=", nil, 400, `limit="" is not a positive integer`},
		{"/v1/leases?limit=2&marker=nope", nil, 400, "marker nope not found"},
		{"/v1/leases?marker=nope", nil, 400, "marker nope not found"},
		{"/v1/leases?limit=2&marker=" + chemistry, asAlice, 400, "marker " + chemistry + " not found"},
		{"/v1/leases?status=BOGUS", nil, 400, `Invalid lease status "BOGUS": expected one of PENDING, ACTIVE`},
		{"/v1/leases?project_id=chemistry", asAlice, 403, "Only admins may list the leases of another project"},
		{"/v1/leases?limit=2", asGuest, 403, "blazar:leases:get"},
	} {
		r := e.do(call{method: "GET", path: tc.path, header: tc.header})
		checkHeaders(t, r)
		checkError(t, r, tc.status, tc.msg)
	}

	// HEAD answers as GET, without a body, limited or not.
	for _, path := range []string{"/v1/leases", "/v1/leases?limit=2", "/v1/leases?marker=nope"} {
		head, get := e.do(call{method: "HEAD", path: path}), e.do(call{method: "GET", path: path})
		if head.status != get.status || len(head.body) != 0 {
			t.Errorf("HEAD %s: %s, want %d without a body", path, head, get.status)
		}
	}
}

// TestListLimitClamped checks that a limit above the maximum page is clamped to it, and
// the next link says so; and that pages and the whole list cross the manager's batches of
// 500 leases without losing or repeating one.
func TestListLimitClamped(t *testing.T) {
	e := newEnv(t, nil)
	e.addLeases(climatehttp.MaxLimit+1, "physics", climate.LeasePending, t0)
	whole := e.getPage("/v1/leases", "leases", "id", nil)
	seen := map[string]bool{}
	for _, id := range whole.ids {
		seen[id] = true
	}
	if len(whole.ids) != climatehttp.MaxLimit+1 || len(seen) != len(whole.ids) {
		t.Fatalf("whole list: %d leases, %d distinct; want %d", len(whole.ids), len(seen), climatehttp.MaxLimit+1)
	}
	for _, limit := range []int{499, 500, 501} {
		if ids, _ := e.walk(fmt.Sprintf("/v1/leases?limit=%d", limit), "leases", "id", limit, nil); !reflect.DeepEqual(ids, whole.ids) {
			t.Errorf("pages of %d: %d leases, not the whole list's", limit, len(ids))
		}
	}
	first := e.getPage("/v1/leases?limit=5000", "leases", "id", nil)
	if len(first.ids) != climatehttp.MaxLimit || !strings.Contains(first.next, fmt.Sprintf("limit=%d&", climatehttp.MaxLimit)) {
		t.Fatalf("limit=5000: %d leases, next %q; want %d and a next link with limit=%d", len(first.ids), first.next, climatehttp.MaxLimit, climatehttp.MaxLimit)
	}
	if last := e.getPage(strings.TrimPrefix(first.next, e.url), "leases", "id", nil); len(last.ids) != 1 || last.next != "" {
		t.Errorf("second page: %d leases, next %q; want the last lease and no link", len(last.ids), last.next)
	}
}

func TestListAllocationsPages(t *testing.T) {
	e := newEnv(t, nil)
	for i := 1; i <= 5; i++ {
		e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: fmt.Sprintf(`{"name": "compute-%d"}`, i)}, http.StatusCreated)
	}
	h := func(hours int) time.Time { return t0.Add(time.Duration(hours) * time.Hour) }
	past := storeLease("physics", climate.LeaseTerminated, t0, h(-48), h(-24), "1")
	soon := storeLease("physics", climate.LeasePending, t0, h(24), h(48), "1", "2")
	current := storeLease("chemistry", climate.LeaseActive, t0, h(-1), h(1), "4")
	later := storeLease("chemistry", climate.LeasePending, t0, h(240), h(264), "5")
	e.insert(past, soon, current, later)

	// reservations lists, per host in order, the leases holding it.
	reservations := func(path string) string {
		t.Helper()
		body := e.mustDo(call{method: "GET", path: path}, http.StatusOK)
		var out []string
		for _, a := range body["allocations"].([]any) {
			a := a.(map[string]any)
			var held []string
			for _, r := range a["reservations"].([]any) {
				for name, l := range map[string]*climate.Lease{"past": past, "soon": soon, "current": current, "later": later} {
					if r.(map[string]any)["lease_id"] == l.ID {
						held = append(held, name)
					}
				}
			}
			out = append(out, a["resource_id"].(string)+":"+strings.Join(held, ","))
		}
		return strings.Join(out, " ")
	}
	q := func(s string) string { return url.QueryEscape(s) }
	for _, tc := range []struct{ path, want string }{
		// Blazar's default: from now on, every host listed.
		{"/v1/os-hosts/allocations", "1:soon 2:soon 3: 4:current 5:later"},
		{"/v1/os-hosts/allocations?from=" + q("2026-11-18 00:00"), "1:past,soon 2:soon 3: 4:current 5:later"},
		{"/v1/os-hosts/allocations?to=" + q("2026-11-23 10:00"), "1:soon 2:soon 3: 4:current 5:"},
		{"/v1/os-hosts/allocations?from=" + q("2026-11-22 12:00") + "&to=" + q("2026-12-01T12:00:00Z"), "1:soon 2:soon 3: 4: 5:later"},
		{"/v1/os-hosts/allocations?lease_id=" + past.ID, "1:past 2: 3: 4: 5:"},
		{"/v1/os-hosts/allocations?limit=2", "1:soon 2:soon"},
		{"/v1/os-hosts/allocations?limit=2&marker=2", "3: 4:current"},
		{"/v1/os-hosts/allocations?marker=4", "5:later"},
		{"/v1/os-hosts/1/allocation?from=" + q("2026-11-18 00:00"), ""}, // checked below
	} {
		if strings.Contains(tc.path, "/1/allocation") {
			body := e.mustDo(call{method: "GET", path: tc.path}, http.StatusOK)
			if n := len(body["allocation"].(map[string]any)["reservations"].([]any)); n != 2 {
				t.Errorf("%s: %d reservations, want past and soon", tc.path, n)
			}
			continue
		}
		if got := reservations(tc.path); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.path, got, tc.want)
		}
	}
	for _, limit := range []int{1, 2, 4, 5} {
		ids, _ := e.walk(fmt.Sprintf("/v1/os-hosts/allocations?limit=%d&from=%s", limit, q("2026-11-18 00:00")), "allocations", "resource_id", limit, nil)
		if want := []string{"1", "2", "3", "4", "5"}; !reflect.DeepEqual(ids, want) {
			t.Errorf("limit %d: hosts %v, want %v", limit, ids, want)
		}
	}
	for _, tc := range []struct {
		path   string
		header map[string]string
		status int
		msg    string
	}{
		{"/v1/os-hosts/allocations?limit=0", nil, 400, "limit"},
		{"/v1/os-hosts/allocations?marker=99", nil, 400, "marker 99 not found"},
		{"/v1/os-hosts/allocations?from=yesterday", nil, 400, `from="yesterday" is an invalid date`},
		{"/v1/os-hosts/allocations?from=" + q("2026-11-22 12:00") + "&to=" + q("2026-11-22 12:00"), nil, 400, "must be later than its start"},
		{"/v1/os-hosts/1/allocation?to=never", nil, 400, `to="never" is an invalid date`},
		{"/v1/os-hosts/allocations?limit=2", asGuest, 403, "blazar:oshosts:get_allocations"},
	} {
		r := e.do(call{method: "GET", path: tc.path, header: tc.header})
		checkHeaders(t, r)
		checkError(t, r, tc.status, tc.msg)
	}
}

// A project member or reader may not see which leases hold the hosts (Blazar's
// blazar:oshosts:get_allocations is admin-only), but climate:oshosts:get_busy lets them
// list allocations with other projects' reservations redacted: busy windows only.
func TestMemberListsOtherProjectsAllocationsAsBusy(t *testing.T) {
	e := newEnv(t, nil)
	for i := 1; i <= 3; i++ {
		e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: fmt.Sprintf(`{"name": "compute-%d"}`, i)}, http.StatusCreated)
	}
	h := func(hours int) time.Time { return t0.Add(time.Duration(hours) * time.Hour) }
	mine := storeLease("physics", climate.LeasePending, t0, h(24), h(48), "1")
	theirs := storeLease("chemistry", climate.LeasePending, t0, h(30), h(40), "2", "3")
	e.insert(mine, theirs)
	// seen renders an answer's allocations as host:lease@start (lease "busy" when redacted).
	seen := func(allocs []any) string {
		var out []string
		for _, a := range allocs {
			a := a.(map[string]any)
			var held []string
			for _, r := range a["reservations"].([]any) {
				r := r.(map[string]any)
				switch {
				case r["lease_id"] == mine.ID && r["id"] == mine.Reservations[0].ID:
					held = append(held, "mine@"+r["start_date"].(string))
				case r["lease_id"] == theirs.ID:
					held = append(held, "theirs@"+r["start_date"].(string))
				case r["lease_id"] == "" && r["id"] == "":
					held = append(held, "busy@"+r["start_date"].(string))
				default:
					held = append(held, fmt.Sprintf("%v", r))
				}
			}
			out = append(out, a["resource_id"].(string)+":"+strings.Join(held, ","))
		}
		return strings.Join(out, " ")
	}
	list := func(path string, who map[string]string) string {
		t.Helper()
		return seen(e.mustDo(call{method: "GET", path: path, header: who}, http.StatusOK)["allocations"].([]any))
	}
	for _, tc := range []struct {
		name, path string
		who        map[string]string
		want       string
	}{
		{"admin", "/v1/os-hosts/allocations", asAdmin, "1:mine@2026-11-22T10:00:00.000000 2:theirs@2026-11-22T16:00:00.000000 3:theirs@2026-11-22T16:00:00.000000"},
		{"member", "/v1/os-hosts/allocations", asAlice, "1:mine@2026-11-22T10:00:00.000000 2:busy@2026-11-22T16:00:00.000000 3:busy@2026-11-22T16:00:00.000000"},
		{"reader", "/v1/os-hosts/allocations?limit=2", asReader, "1:mine@2026-11-22T10:00:00.000000 2:busy@2026-11-22T16:00:00.000000"},
		{"other member", "/v1/os-hosts/allocations", asBob, "1:busy@2026-11-22T10:00:00.000000 2:theirs@2026-11-22T16:00:00.000000 3:theirs@2026-11-22T16:00:00.000000"},
		{"member, window", "/v1/os-hosts/allocations?from=2026-11-22T12:00:00Z&to=2026-11-22T15:00:00Z", asAlice, "1:mine@2026-11-22T10:00:00.000000 2: 3:"},
		// Filtering on another project's lease must not tell which hosts it holds.
		{"member, their lease", "/v1/os-hosts/allocations?lease_id=" + theirs.ID, asAlice, "1: 2: 3:"},
		{"member, their reservation", "/v1/os-hosts/allocations?reservation_id=" + theirs.Reservations[0].ID, asAlice, "1: 2: 3:"},
		{"member, own lease", "/v1/os-hosts/allocations?lease_id=" + mine.ID, asAlice, "1:mine@2026-11-22T10:00:00.000000 2: 3:"},
	} {
		if got := list(tc.path, tc.who); got != tc.want {
			t.Errorf("%s: %s\n got %s\nwant %s", tc.name, tc.path, got, tc.want)
		}
	}
	one := e.mustDo(call{method: "GET", path: "/v1/os-hosts/2/allocation", header: asAlice}, http.StatusOK)["allocation"]
	if got := seen([]any{one}); got != "2:busy@2026-11-22T16:00:00.000000" {
		t.Errorf("member's host 2 allocation: %s", got)
	}
	// Other roles still get nothing, and hosts stay admin-only.
	checkError(t, e.do(call{method: "GET", path: "/v1/os-hosts/allocations", header: asGuest}), 403, "blazar:oshosts:get_allocations")
	checkError(t, e.do(call{method: "GET", path: "/v1/os-hosts", header: asAlice}), 403, "blazar:oshosts:get")
}

// cutShort lists one batch of n leases, then fails.
type cutShort struct {
	climate.LeaseService
	n int
}

func (c cutShort) ListLeases(_ context.Context, _ climate.Identity, _ climate.LeaseQuery, fn func([]climate.Lease) error) (bool, error) {
	batch := make([]climate.Lease, c.n)
	for i := range batch {
		batch[i] = *storeLease("physics", climate.LeasePending, t0, t0.Add(time.Hour), t0.Add(2*time.Hour), "1")
	}
	if err := fn(batch); err != nil {
		return false, err
	}
	return false, errors.New("disk on fire")
}

// TestListCutShort checks that a list that fails after the start of its body was sent
// does not look complete: the connection is cut, so the client sees a truncated body. A
// failure before anything was sent is an ordinary error answer.
func TestListCutShort(t *testing.T) {
	serve := func(n int) string {
		api := &climatehttp.Server{Leases: cutShort{n: n}, Auth: climatehttp.NoAuth{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		srv := httptest.NewServer(api.Handler())
		t.Cleanup(srv.Close)
		return srv.URL
	}
	// 100 leases are more than the 32 KiB buffer: the list's start is sent before the failure.
	resp, err := http.Get(serve(100) + "/v1/leases")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("status %d, read error %v; want 200 and an unexpected EOF", resp.StatusCode, err)
	}
	if !strings.HasPrefix(string(body), `{"leases":[{"id":`) || json.Valid(body) {
		t.Errorf("body %q: want the start of the list, cut", body)
	}

	// One lease fits in the buffer, and a page is read before anything is sent: the error
	// is an answer.
	e := &env{t: t, url: serve(1)}
	for _, path := range []string{"/v1/leases", "/v1/leases?limit=5"} {
		r := e.do(call{method: "GET", path: path})
		checkHeaders(t, r)
		checkErrorBody(t, r)
		if r.status != http.StatusInternalServerError || strings.Contains(string(r.body), "fire") {
			t.Errorf("GET %s: %s, want a 500 that reveals nothing", path, r)
		}
	}
}
