package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"climate/http/api"
	"climate/http/client"
	"climate/notify/webhook"
	"climate/postgres"
)

// BenchmarkWebhookLatency measures how long after a lease's start time its
// lease.event.start_lease notification reaches a webhook receiver on loopback: the engine
// fires the event, commits it with its outbox row, the worker posts it signed. Leases start
// 60 ms apart (1,000 events a minute), each op is one lease; run with -benchtime 1000x -v
// for a minute's worth and the p50/p99 figures.
func BenchmarkWebhookLatency(b *testing.B) {
	o := serveOptions{}
	o.notify.webhook.allowPrivate = true
	benchWebhookLatency(b, startServer(b, o).url)
}

// BenchmarkWebhookLatencyPostgres is BenchmarkWebhookLatency on PostgreSQL.
func BenchmarkWebhookLatencyPostgres(b *testing.B) {
	o := serveOptions{database: postgres.TestDSN(b)}
	o.notify.webhook.allowPrivate = true
	benchWebhookLatency(b, startServer(b, o).url)
}

func benchWebhookLatency(b *testing.B, url string) {
	ctx := context.Background()
	c, err := client.New(url, "")
	if err != nil {
		b.Fatal(err)
	}
	rc := newHookReceiver(b)
	if _, err := c.CreateWebhook(ctx, api.WebhookRequest{URL: rc.url, EventTypes: []string{"lease.event.start_lease"}}); err != nil {
		b.Fatal(err)
	}
	const spacing = 60 * time.Millisecond
	base := time.Now().Add(2*time.Second + time.Duration(b.N)*15*time.Millisecond).Truncate(time.Millisecond)
	starts := map[string]time.Time{} // lease id → start
	for i := range b.N {
		if _, err := c.CreateHost(ctx, map[string]any{"name": fmt.Sprintf("wh%d", i)}); err != nil {
			b.Fatal(err)
		}
		start := base.Add(time.Duration(i) * spacing)
		l, err := c.CreateLease(ctx, api.LeaseRequest{Name: fmt.Sprintf("wl%d", i), StartDate: start.UTC().Format(time.RFC3339Nano),
			EndDate: start.Add(time.Hour).UTC().Format(time.RFC3339Nano), Reservations: []map[string]any{{"resource_type": "physical:host", "min": 1, "max": 1}}})
		if err != nil {
			b.Fatal(err)
		}
		starts[l.ID] = start
	}
	if time.Now().After(base) {
		b.Fatal("creating the leases took longer than planned: the first started before the last was created")
	}
	b.ResetTimer()
	rc.waitFor(b, b.N, time.Duration(b.N)*spacing+time.Minute)
	b.StopTimer()
	var lat, fired, posted []time.Duration
	for _, r := range rc.requests() {
		if r.event == webhook.PingEvent {
			continue
		}
		var n api.Notification
		if err := json.Unmarshal(r.body, &n); err != nil {
			b.Fatal(err)
		}
		start, ok := starts[n.LeaseID]
		if !ok || n.EventType != "lease.event.start_lease" {
			b.Fatalf("unexpected delivery %s %s", n.EventType, n.LeaseID)
		}
		committed, err := api.ParseTime(n.CreatedAt)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, r.at.Sub(start))
		fired, posted = append(fired, committed.Sub(start)), append(posted, r.at.Sub(committed))
	}
	logLatencies(b, "of which the engine's firing (start time → the event's commit)", fired, false)
	logLatencies(b, "of which delivery (the commit → webhook receipt)", posted, false)
	logLatencies(b, fmt.Sprintf("%d start events at 1,000 a minute, start time → webhook receipt", len(lat)), lat, true)
}
