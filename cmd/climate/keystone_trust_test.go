package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Trusts with the real Keystone, as Blazar's: a lease is created with a trust from its
// creator to Climate's service user (Keystone has it), deleting the lease deletes it, and
// a lease whose trust was deleted fails its start saying so.
func TestKeystoneTrusts(t *testing.T) {
	k := needKeystone(t)
	s := startServer(t, keystoneServe(k))
	admin := k.token(t, "admin", "adminpass", "admin")
	demo := k.token(t, "demo", "demopass", "demo")
	if r := ksCall(t, "POST", s.url+"/v1/os-hosts", `{"name": "trust-host"}`, authTok(admin)); r.status != 201 {
		t.Fatalf("host: %s", r)
	}
	trustStatus := func(id string) int {
		return ksCall(t, "GET", k.url+"/OS-TRUST/trusts/"+id, "", authTok(admin)).status
	}

	r := ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(keystoneLease, "trusted"), authTok(demo))
	if r.status != 201 {
		t.Fatalf("lease: %s", r)
	}
	lease := r.body["lease"].(map[string]any)
	trust, _ := lease["trust_id"].(string)
	if trust == "" || trustStatus(trust) != 200 {
		t.Fatalf("lease trust_id %q: Keystone answers %d", trust, trustStatus(trust))
	}
	if r := ksCall(t, "DELETE", s.url+"/v1/leases/"+lease["id"].(string), "", authTok(demo)); r.status != 204 {
		t.Fatalf("delete: %s", r)
	}
	if got := trustStatus(trust); got != 404 {
		t.Fatalf("the deleted lease's trust: Keystone answers %d, want 404", got)
	}

	// A lease starting in 2 s whose trust an admin deletes first: its start fails, as the
	// lease's own notifications (the event stream) tell.
	start := time.Now().UTC().Add(2 * time.Second).Format("2006-01-02 15:04:05")
	end := time.Now().UTC().Add(time.Hour).Format("2006-01-02 15:04:05")
	r = ksCall(t, "POST", s.url+"/v1/leases", fmt.Sprintf(`{"name": "orphan", "start_date": %q, "end_date": %q,
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`, start, end), authTok(demo))
	if r.status != 201 {
		t.Fatalf("lease: %s", r)
	}
	lease = r.body["lease"].(map[string]any)
	if d := ksCall(t, "DELETE", k.url+"/OS-TRUST/trusts/"+lease["trust_id"].(string), "", authTok(admin)); d.status != 204 {
		t.Fatalf("deleting the trust in Keystone: %s", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/events/stream?lease_id="+lease["id"].(string), nil)
	req.Header.Set("X-Auth-Token", demo)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for lines := bufio.NewScanner(resp.Body); ; {
		if !lines.Scan() {
			t.Fatalf("no failed start within 30 s of a lease whose trust is gone: %v", lines.Err())
		}
		if l := lines.Text(); strings.HasPrefix(l, "data:") && strings.Contains(l, "lease.event.start_lease") {
			if !strings.Contains(l, `"status":"ERROR"`) {
				t.Fatalf("the start of a lease whose trust is gone: %s", l)
			}
			break
		}
	}
}
