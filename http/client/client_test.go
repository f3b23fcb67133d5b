package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"climate/clock"
	climatehttp "climate/http"
	"climate/http/api"
	"climate/http/client"
	"climate/manager"
	"climate/sqlite"
)

// newServer runs the real API on a real SQLite file behind a real HTTP server (no engine:
// leases stay as created).
func newServer(t *testing.T) *client.Client {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := manager.New(st, clock.Real{}, manager.Config{})
	srv := httptest.NewServer((&climatehttp.Server{Leases: m, Hosts: m, Availability: m, Auth: climatehttp.NoAuth{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL+"/", "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var ctx = context.Background()

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:1234", "ftp://h", "http://", "://x"} {
		if _, err := client.New(u, ""); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

func TestLeasesAndHosts(t *testing.T) {
	c := newServer(t)
	h, err := c.CreateHost(ctx, map[string]any{"name": "n1", "gpu": true, "cores": 64})
	if err != nil || h.ID != "1" || h.HypervisorHostname != "n1" || h.Extra["gpu"] != "true" || h.Extra["cores"] != "64" {
		t.Fatalf("CreateHost: %v %+v", err, h)
	}
	if _, err := c.CreateHost(ctx, map[string]any{"name": "n2"}); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"n2", "2"} {
		if h, err := c.FindHost(ctx, ref); err != nil || h.HypervisorHostname != "n2" {
			t.Fatalf("FindHost(%q): %v %+v", ref, err, h)
		}
	}
	if _, err := c.FindHost(ctx, "n9"); !client.IsNotFound(err) {
		t.Fatalf("FindHost(n9): %v", err)
	}

	start := time.Now().UTC().Add(time.Hour).Truncate(time.Minute)
	req := api.LeaseRequest{Name: "job", StartDate: start.Format(api.DateFormat), EndDate: start.Add(time.Hour).Format(api.DateFormat),
		Reservations: []map[string]any{{"resource_type": "physical:host", "min": 1, "max": 1, "resource_properties": `["==", "$gpu", "true"]`}}}
	plan, err := c.CreateLease(ctx, api.LeaseRequest{Name: req.Name, StartDate: req.StartDate, EndDate: req.EndDate, Reservations: req.Reservations, DryRun: true})
	if err != nil || strings.Join(plan.Reservations[0].Hosts, ",") != "n1" { // by name
		t.Fatalf("dry run: %v %+v", err, plan)
	}
	l, err := c.CreateLease(ctx, req)
	if err != nil || l.Status != "PENDING" || l.StartDate != start.Format(api.TimeFormat) {
		t.Fatalf("CreateLease: %v %+v", err, l)
	}
	// The filtered host is taken: a second lease gets the server's 409 as an *Error.
	_, err = c.CreateLease(ctx, req)
	var apiErr *client.Error
	if !asError(err, &apiErr) || apiErr.Status != http.StatusConflict || !strings.Contains(apiErr.Message, "Not enough hosts") {
		t.Fatalf("second lease: %v", err)
	}
	if _, err := c.CreateLease(ctx, api.LeaseRequest{Name: "job", StartDate: req.StartDate, EndDate: req.EndDate,
		Reservations: []map[string]any{{"resource_type": "physical:host", "min": 1, "max": 1}}}); err != nil {
		t.Fatal(err)
	}

	// Names resolve; a shared name is an error listing the ids.
	if _, err := c.FindLease(ctx, "job"); err == nil || !strings.Contains(err.Error(), `2 leases are named "job"`) {
		t.Fatalf("ambiguous name: %v", err)
	}
	if got, err := c.FindLease(ctx, l.ID); err != nil || got.ID != l.ID {
		t.Fatalf("FindLease by id: %v", err)
	}
	u, err := c.UpdateLease(ctx, l.ID, api.LeaseUpdate{Name: "job-1", EndDate: start.Add(2 * time.Hour).Format(time.RFC3339)})
	if err != nil || u.Name != "job-1" || u.EndDate != start.Add(2*time.Hour).Format(api.TimeFormat) {
		t.Fatalf("UpdateLease: %v %+v", err, u)
	}
	allocs, err := c.ListAllocations(ctx, client.AllocationQuery{LeaseID: l.ID})
	// Like Blazar, every host is listed, with only the matching reservations.
	if err != nil || len(allocs) != 2 || allocs[0].ResourceID != "1" || len(allocs[0].Reservations) != 1 || allocs[0].Reservations[0].LeaseID != l.ID || len(allocs[1].Reservations) != 0 {
		t.Fatalf("ListAllocations: %v %+v", err, allocs)
	}
	if a, err := c.GetAllocation(ctx, "1", client.AllocationQuery{}); err != nil || len(a.Reservations) != 1 {
		t.Fatalf("GetAllocation: %v %+v", err, a)
	}
	slots, err := c.Earliest(ctx, client.SlotQuery{Count: 2, Duration: "1h", After: start.Format(time.RFC3339)})
	if err != nil || len(slots) == 0 || slots[0].StartDate != start.Add(2*time.Hour).Format(api.TimeFormat) {
		t.Fatalf("Earliest: %v %+v", err, slots)
	}
	tl, err := c.Timeline(ctx, client.TimelineQuery{From: start.Format(time.RFC3339), To: start.Add(4 * time.Hour).Format(time.RFC3339), Step: "2h", Filter: client.Filter{ResourceProperties: `["==", "$gpu", "true"]`}})
	if err != nil || tl.MatchingHosts != 1 || len(tl.Timeline) != 2 || tl.Timeline[0].FreeHosts != 0 || tl.Timeline[1].FreeHosts != 1 {
		t.Fatalf("Timeline: %v %+v", err, tl)
	}
	if _, err := c.SetPropertyPrivate(ctx, "cores", true); err != nil {
		t.Fatal(err)
	}
	props, err := c.ListProperties(ctx, false, true)
	if err != nil || len(props) != 1 || props[0].Name != "gpu" || props[0].Values[0] != "true" {
		t.Fatalf("ListProperties without private ones: %v %+v", err, props)
	}

	// Another project, through identity headers (noauth), sees none of these leases.
	other, _ := client.New(c.URL(), "")
	other.Headers.Set("X-User-Id", "bob")
	other.Headers.Set("X-Project-Id", "chemistry")
	other.Headers.Set("X-Roles", "member")
	if leases, err := other.ListLeases(ctx, client.LeaseQuery{}); err != nil || len(leases) != 0 {
		t.Fatalf("other project's leases: %v %d", err, len(leases))
	}
	if err := other.DeleteLease(ctx, l.ID); !client.IsNotFound(err) {
		t.Fatalf("other project deleting: %v", err)
	}
	if err := c.DeleteLease(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetLease(ctx, l.ID); !client.IsNotFound(err) {
		t.Fatalf("deleted lease: %v", err)
	}
	if err := c.DeleteHost(ctx, "2"); err == nil {
		t.Fatal("deleted a host a lease holds")
	}
}

func TestUnreachableAndNotClimate(t *testing.T) {
	c, _ := client.New("http://127.0.0.1:1", "")
	if _, err := c.ListLeases(ctx, client.LeaseQuery{}); err == nil || !strings.Contains(err.Error(), "cannot reach Climate at http://127.0.0.1:1") {
		t.Fatalf("unreachable: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>hello</html>")) }))
	defer srv.Close()
	c, _ = client.New(srv.URL, "")
	if _, err := c.ListLeases(ctx, client.LeaseQuery{}); err == nil || !strings.Contains(err.Error(), "is "+srv.URL+" a Climate server?") {
		t.Fatalf("not Climate: %v", err)
	}
}

func asError(err error, target **client.Error) bool {
	e, ok := err.(*client.Error)
	*target = e
	return ok
}

// requests records the requests a client sends.
type requests struct {
	urls []string
}

func (r *requests) RoundTrip(req *http.Request) (*http.Response, error) {
	r.urls = append(r.urls, req.URL.RequestURI())
	return http.DefaultTransport.RoundTrip(req)
}

// TestListsPage checks that lists are asked for page by page, after each page's marker,
// and stop at the limit.
func TestListsPage(t *testing.T) {
	c := newServer(t)
	for i := range 3 {
		if _, err := c.CreateHost(ctx, map[string]any{"name": fmt.Sprintf("n%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now().UTC().Add(time.Hour)
	for i := range 7 {
		req := api.LeaseRequest{Name: fmt.Sprintf("l%d", i), StartDate: start.Format(time.RFC3339), EndDate: start.Add(time.Hour).Format(time.RFC3339)}
		if _, err := c.CreateLease(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.ListLeases(ctx, client.LeaseQuery{})
	if err != nil || len(all) != 7 {
		t.Fatalf("ListLeases: %v, %d leases", err, len(all))
	}
	ids := func(ls []api.Lease) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.ID)
		}
		return out
	}
	rec := &requests{}
	c.HTTP = &http.Client{Transport: rec}
	c.PageSize = 3
	for _, tc := range []struct {
		q    client.LeaseQuery
		want []string
		reqs []string
	}{
		{client.LeaseQuery{}, ids(all), []string{"limit=3", "limit=3&marker=" + all[2].ID, "limit=3&marker=" + all[5].ID}},
		{client.LeaseQuery{Limit: 4}, ids(all[:4]), []string{"limit=3", "limit=1&marker=" + all[2].ID}},
		{client.LeaseQuery{Limit: 3}, ids(all[:3]), []string{"limit=3"}},
		{client.LeaseQuery{Statuses: []string{"ACTIVE", "ERROR"}}, nil, []string{"limit=3&status=ACTIVE%2CERROR"}},
		{client.LeaseQuery{Name: "l4", ProjectID: "nobody"}, nil, []string{"limit=3&name=l4&project_id=nobody"}},
	} {
		rec.urls = nil
		got, err := c.ListLeases(ctx, tc.q)
		var want []string
		for _, r := range tc.reqs {
			want = append(want, "/v1/leases?"+r)
		}
		if err != nil || !reflect.DeepEqual(ids(got), tc.want) || !reflect.DeepEqual(rec.urls, want) {
			t.Errorf("ListLeases(%+v): %v, %v after requests %v; want %v after %v", tc.q, err, ids(got), rec.urls, tc.want, want)
		}
	}
	rec.urls = nil
	if l, err := c.FindLease(ctx, "l4"); err != nil || l.Name != "l4" || len(rec.urls) != 1 || !strings.Contains(rec.urls[0], "name=l4") {
		t.Errorf("FindLease(l4): %v, %+v after %v; want one request by name", err, l, rec.urls)
	}
	rec.urls = nil
	c.PageSize = 2
	allocs, err := c.ListAllocations(ctx, client.AllocationQuery{From: "now", To: "2100-01-01 00:00"})
	if err != nil || len(allocs) != 3 || allocs[2].ResourceID != "3" || len(rec.urls) != 2 {
		t.Errorf("ListAllocations: %v, %+v after %v; want 3 hosts in 2 pages", err, allocs, rec.urls)
	}

	// A server that does not page (Blazar) answers everything at once; the limit still holds.
	blazar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"leases": [{"id": "a"}, {"id": "b"}, {"id": "c"}]}`))
	}))
	defer blazar.Close()
	b, _ := client.New(blazar.URL, "")
	for limit, want := range map[int]int{0: 3, 2: 2, 5: 3} {
		if got, err := b.ListLeases(ctx, client.LeaseQuery{Limit: limit}); err != nil || len(got) != want {
			t.Errorf("Blazar, limit %d: %v, %d leases; want %d", limit, err, len(got), want)
		}
	}
}
