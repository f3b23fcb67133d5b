package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"climate/http/api"
	"climate/http/client"
	"climate/notify/webhook"
)

// The README's webhook receiver (examples/webhook-receiver.py), run with Python against
// climate serve: it verifies real deliveries, refuses a forged one and handles a repeated
// delivery id once. The README shows the file as it is.
func TestExampleWebhookReceiver(t *testing.T) {
	example, err := os.ReadFile("../../examples/webhook-receiver.py")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, example) {
		t.Error("README.md does not show examples/webhook-receiver.py as it is")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to run the example with")
	}
	const secret = "example-receiver-secret"
	cmd := exec.Command(python, "../../examples/webhook-receiver.py", "0")
	cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+secret)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the receiver exited")
			}
			return l
		case <-time.After(time.Minute):
			t.Fatal("the receiver printed nothing for a minute")
		}
		return ""
	}
	port := strings.TrimPrefix(next(), "listening on ")
	receiverURL := "http://127.0.0.1:" + port + "/climate"

	o := serveOptions{}
	o.notify.webhook.allowPrivate = true
	srv := startServer(t, o)
	ctx := context.Background()
	c, err := client.New(srv.url, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateWebhook(ctx, api.WebhookRequest{URL: receiverURL, Secret: secret}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateHost(ctx, map[string]any{"name": "h1"}); err != nil {
		t.Fatal(err)
	}
	l, err := c.CreateLease(ctx, api.LeaseRequest{Name: "example", StartDate: "now", EndDate: time.Now().Add(3 * time.Hour).UTC().Format(time.RFC3339),
		Reservations: []map[string]any{{"resource_type": "physical:host", "min": 1, "max": 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lease.create " + l.ID + " PENDING", "lease.event.start_lease " + l.ID + " ACTIVE"} {
		if got := next(); got != want {
			t.Fatalf("receiver printed %q, want %q", got, want)
		}
	}

	post := func(delivery, signature string, body []byte) int {
		req, _ := http.NewRequest("POST", receiverURL, bytes.NewReader(body))
		req.Header.Set(webhook.DeliveryHeader, delivery)
		req.Header.Set(webhook.EventHeader, "lease.update")
		req.Header.Set(webhook.SignatureHeader, signature)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	body, _ := json.Marshal(map[string]any{"event_type": "lease.update", "lease_id": "L", "payload": map[string]any{"status": "PENDING"}})
	if code := post("forged", webhook.Sign("not-the-secret", time.Now(), body), body); code != 401 {
		t.Errorf("forged delivery: %d, want 401", code)
	}
	if code := post("old", webhook.Sign(secret, time.Now().Add(-time.Hour), body), body); code != 401 {
		t.Errorf("replayed old delivery: %d, want 401", code)
	}
	for i := range 2 { // the same delivery twice: handled once
		if code := post("twice", webhook.Sign(secret, time.Now(), body), body); code != 204 {
			t.Errorf("delivery %d: %d, want 204", i, code)
		}
	}
	last, _ := json.Marshal(map[string]any{"event_type": "lease.delete", "lease_id": "L", "payload": map[string]any{"status": "PENDING"}})
	post("last", webhook.Sign(secret, time.Now(), last), last)
	for _, want := range []string{"lease.update L PENDING", "lease.delete L PENDING"} {
		if got := next(); got != want {
			t.Fatalf("receiver printed %q, want %q (a forged, old or repeated delivery is not handled)", got, want)
		}
	}
}
