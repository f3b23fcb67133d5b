package enforce_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/enforce"
)

var who = climate.Identity{UserID: "alice", ProjectID: "physics", Roles: []string{"member"}}

func lease() *climate.Lease {
	t0 := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	return &climate.Lease{ID: "l1", Name: "train", ProjectID: "physics", UserID: "alice", Start: t0, End: t0.Add(8 * time.Hour), Status: climate.LeasePending}
}

// The operator's service, a real HTTP server on loopback: 204 allows, 403 with a message
// refuses with it, anything else refuses with Blazar's message; it gets Blazar's payload
// and the token; a service that does not answer in time refuses (503), or allows when
// the filter fails open.
func TestExternalServiceFilter(t *testing.T) {
	type seen struct {
		path, token string
		body        map[string]any
	}
	got := make(chan seen, 10)
	answer := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			got <- seen{r.URL.Path, r.Header.Get("X-Auth-Token"), m}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}
	}
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		handler http.HandlerFunc
		code    climate.Code // "" allows
		msg     string
	}{
		{"allow", answer(204, ""), "", ""},
		{"refuse with a message", answer(403, `{"message": "project physics has no allocation left"}`), climate.CodeForbidden, "project physics has no allocation left"},
		{"refuse without one", answer(403, `not json`), climate.CodeForbidden, enforce.DeniedMessage},
		{"an error answer", answer(500, `{"message": "boom"}`), climate.CodeForbidden, enforce.DeniedMessage},
	} {
		srv := httptest.NewServer(c.handler)
		e := &enforce.External{Base: srv.URL + "/", Token: "s3cret"}
		err := e.CheckCreate(ctx, who, lease())
		if (err == nil) != (c.code == "") || (err != nil && (climate.ErrorCode(err) != c.code || err.Error() != c.msg)) {
			t.Errorf("%s: %v (%s); want %q %q", c.name, err, climate.ErrorCode(err), c.code, c.msg)
		}
		s := <-got
		if s.path != "/check-create" || s.token != "s3cret" || s.body["lease"].(map[string]any)["name"] != "train" ||
			s.body["context"].(map[string]any)["project_id"] != "physics" {
			t.Errorf("%s: the service got %+v", c.name, s)
		}
		srv.Close()
	}
	// check-update carries the current lease and the new one.
	srv := httptest.NewServer(answer(204, ""))
	e := &enforce.External{Base: srv.URL}
	longer := lease()
	longer.End = longer.End.Add(time.Hour)
	if err := e.CheckUpdate(ctx, who, lease(), longer); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.path != "/check-update" || s.token != "" || s.body["current_lease"].(map[string]any)["end_date"] != "2030-01-07T17:00:00.000000" ||
		s.body["lease"].(map[string]any)["end_date"] != "2030-01-07T18:00:00.000000" {
		t.Errorf("check-update: the service got %+v", s)
	}
	srv.Close()

	// A service that never answers: it holds the request until the client gives up.
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server notices the client hang up
		<-r.Context().Done()
	}))
	defer hung.Close()
	closed := &enforce.External{Base: hung.URL, Timeout: 50 * time.Millisecond}
	if err := closed.CheckCreate(ctx, who, lease()); climate.ErrorCode(err) != climate.CodeUnavailable || !strings.Contains(err.Error(), "did not answer within 50ms") {
		t.Errorf("fail-closed, no answer: %v", err)
	}
	open := &enforce.External{Base: hung.URL, Timeout: 50 * time.Millisecond, FailOpen: true}
	if err := open.CheckCreate(ctx, who, lease()); err != nil {
		t.Errorf("fail-open, no answer: %v", err)
	}
}

// OnEnd, a notification destination, posts each lease end to BASE/on-end with Blazar's
// payload; it takes lease ends only, and a failing service is retried (an error).
func TestOnEndTellsTheServiceOfLeaseEnds(t *testing.T) {
	status := make(chan int, 2)
	got := make(chan map[string]any, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		m["path"] = r.URL.Path
		got <- m
		w.WriteHeader(<-status)
	}))
	defer srv.Close()
	d := enforce.OnEnd{External: &enforce.External{Base: srv.URL}}
	end := &climate.Notification{EventType: "lease.event.end_lease", ProjectID: "physics", Payload: []byte(`{"lease_id": "l1", "id": "l1", "name": "train", "user_id": "alice"}`)}
	if d.Accepts(&climate.Notification{EventType: "lease.create"}) || !d.Accepts(end) {
		t.Error("OnEnd should take lease ends only")
	}
	status <- 500
	if err := d.Deliver(context.Background(), end); err == nil || !strings.Contains(err.Error(), "answered 500") {
		t.Errorf("a failing service: %v", err)
	}
	<-got
	status <- 204
	if err := d.Deliver(context.Background(), end); err != nil {
		t.Fatal(err)
	}
	m := <-got
	if m["path"] != "/on-end" || m["lease"].(map[string]any)["name"] != "train" || m["context"].(map[string]any)["user_id"] != "alice" ||
		m["context"].(map[string]any)["project_id"] != "physics" {
		t.Errorf("on-end got %v", m)
	}
}
