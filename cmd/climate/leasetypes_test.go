package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// eventStream is the live event stream of one lease, subscribed before what the test
// then does, so that nothing it causes is missed.
type eventStream struct{ lines *bufio.Scanner }

func subscribe(t *testing.T, url, id string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/events/stream?lease_id="+id, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return &eventStream{bufio.NewScanner(resp.Body)}
}

// await reads until a notification of eventType and returns its lease's status (the
// stream's 30 s deadline fails the test).
func (es *eventStream) await(t *testing.T, eventType string) string {
	t.Helper()
	for es.lines.Scan() {
		data, ok := strings.CutPrefix(es.lines.Text(), "data:")
		if !ok {
			continue
		}
		var n struct {
			EventType string `json:"event_type"`
			Payload   struct {
				Status string `json:"status"`
			} `json:"payload"`
		}
		if json.Unmarshal([]byte(data), &n) == nil && n.EventType == eventType {
			return n.Payload.Status
		}
	}
	t.Fatalf("no %s within 30 s: %v", eventType, es.lines.Err())
	return ""
}

// A retry lease through the server: it waits while the only host is taken, starts as soon
// as the lease holding it is deleted (no poll: the delete wakes the re-planning), and
// another that never fits fails at its retry_until, as its notification tells.
func TestRetryLeasesThroughTheServer(t *testing.T) {
	s := startServer(t, serveOptions{})
	post(t, s.url+"/v1/os-hosts", `{"name": "only"}`, 201)
	end := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	lease := func(body string) map[string]any {
		t.Helper()
		return post(t, s.url+"/v1/leases", body, 201)["lease"].(map[string]any)
	}
	res := `"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]`
	// The holder starts later (deleting a lease whose start is being handled is a 409), and
	// overlaps the waiter's window.
	later := time.Now().UTC().Add(30 * time.Minute).Format(time.RFC3339)
	holder := lease(`{"name": "holder", "start_date": "` + later + `", "end_date": "` + end + `", ` + res + `}`)
	waiter := lease(`{"name": "waiter", "lease_type": "retry", "start_date": "now", "end_date": "` + end + `", ` + res + `}`)
	if waiter["status"] != "WAITING" || waiter["lease_type"] != "retry" || waiter["retry_until"] == nil {
		t.Fatalf("a retry lease that does not fit: %v", waiter)
	}
	stream := subscribe(t, s.url, waiter["id"].(string))
	req, _ := http.NewRequest("DELETE", s.url+"/v1/leases/"+holder["id"].(string), nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	if status := stream.await(t, "lease.event.start_lease"); status != "ACTIVE" {
		t.Fatalf("the waiting lease started as %s", status)
	}

	until := time.Now().UTC().Add(2 * time.Second).Format(time.RFC3339Nano)
	late := lease(`{"name": "late", "lease_type": "best_effort", "retry_until": "` + until + `", "start_date": "now", "end_date": "` + end + `", ` + res + `}`)
	if late["status"] != "IN_PROGRESS" {
		t.Fatalf("a best-effort lease that does not fit: %v", late)
	}
	if status := subscribe(t, s.url, late["id"].(string)).await(t, "lease.event.retry_deadline"); status != "TIMEDOUT" {
		t.Fatalf("a best-effort lease at its deadline: %s", status)
	}
}

// The CLI's lease types: --type, --retry-until, --priority.
func TestLeaseTypeCommands(t *testing.T) {
	s := startServer(t, serveOptions{})
	post(t, s.url+"/v1/os-hosts", `{"name": "only"}`, 201)
	if out, err := runCLI(t, "lease", "create", "holder", "--url", s.url, "--end-date", "+2h", "--reservation", "resource_type=physical:host,min=1,max=1"); err != nil {
		t.Fatal(err, out)
	}
	out, err := runCLI(t, "lease", "create", "waiter", "--url", s.url, "--type", "retry", "--retry-until", "+3h", "--priority", "4",
		"--end-date", "+1h", "--reservation", "resource_type=physical:host,min=1,max=1", "-o", "json")
	var l map[string]any
	if err != nil || json.Unmarshal([]byte(out), &l) != nil || l["status"] != "WAITING" || l["lease_type"] != "retry" || l["priority"] != 4.0 {
		t.Fatalf("a waiting lease from the CLI: %v\n%s", err, out)
	}
	until, _ := time.Parse("2006-01-02T15:04:05.000000", l["retry_until"].(string))
	start, _ := time.Parse("2006-01-02T15:04:05.000000", l["start_date"].(string))
	if d := until.Sub(start); d < 3*time.Hour-2*time.Second || d > 3*time.Hour+2*time.Second {
		t.Fatalf("--retry-until +3h: %v after the start", d)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--type", "sometimes"}, `Unknown lease_type "sometimes"`},
		{[]string{"--type", "retry", "--retry-until", "whenever"}, `--retry-until "whenever"`},
		{[]string{"--type", "immediate", "--start-date", "+1h"}, "An immediate lease starts now"},
		{[]string{"--priority", "3"}, "retry_until, max_retries and priority go with"},
	} {
		args := append([]string{"lease", "create", "x", "--url", s.url, "--reservation", "resource_type=physical:host,min=1,max=1"}, c.args...)
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// A preemptible lease through the server and the CLI: it takes both hosts, one of them
// reserved from a few seconds on; it gets lease.preempted a notice (here 1 s) before that
// host is taken back, the reserving lease starts on time, and it keeps the other host.
func TestPreemptibleLeaseThroughTheServer(t *testing.T) {
	c := newCLI(t, serveOptions{preemptNotice: time.Second})
	c.ok("host", "create", "n1")
	c.ok("host", "create", "n2")
	p := c.leaseJSON("lease", "create", "sweep", "--preemptible", "--end-date", "+1h",
		"--reservation", "resource_type=physical:host,min=1,max=2", "--wait")
	if !p.Preemptible || p.OnPreempt != "shrink" || p.Status != "ACTIVE" {
		t.Fatalf("preemptible lease: preemptible %v, on_preempt %q, %s", p.Preemptible, p.OnPreempt, p.Status)
	}
	events := subscribe(t, c.url, p.ID)
	r := c.leaseJSON("lease", "create", "train", "--start-date", "+4s", "--end-date", "+1h",
		"--reservation", "resource_type=physical:host,min=1,max=1")
	if r.Status != "PENDING" {
		t.Fatalf("reserving lease is %s", r.Status)
	}
	if status := events.await(t, "lease.preempted"); status != "ACTIVE" {
		t.Errorf("lease.preempted: the preemptible lease is %s, want ACTIVE", status)
	}
	if out := c.ok("lease", "wait", "train", "--timeout", "30s", "-o", "value", "-c", "status"); out != "ACTIVE\n" {
		t.Fatalf("train: %q", out)
	}
	ends := c.ok("allocation", "list", "--lease", "sweep", "-o", "value", "-c", "end_date")
	if !strings.Contains(ends, r.StartDate) || !strings.Contains(ends, p.EndDate) {
		t.Errorf("sweep's allocations end %q; want one at train's start %s, one at sweep's end %s", ends, r.StartDate, p.EndDate)
	}
	if got := c.leaseJSON("lease", "show", "sweep"); got.Status != "ACTIVE" || got.EndDate != p.EndDate {
		t.Errorf("sweep after the take-back: %s until %s; want ACTIVE until %s on its other host", got.Status, got.EndDate, p.EndDate)
	}
}
