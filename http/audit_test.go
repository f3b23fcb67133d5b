package http_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"climate/http/api"
)

// TestAudit reads the audit trail through the API on each store: members and readers are
// refused, an admin sees the changes with their request ids and filters them, pages
// follow next links, writes answer 405, and no webhook secret or URL token shows.
func TestAudit(t *testing.T) {
	onEachStore(t, testAudit)
}

func auditList(t *testing.T, e *env, query string) ([]api.AuditEntry, string, string) {
	t.Helper()
	r := e.do(call{method: "GET", path: "/v1/audit" + query})
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/audit%s: %s", query, r)
	}
	var body struct {
		Audit []api.AuditEntry `json:"audit"`
		Links []api.Link       `json:"audit_links"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("GET /v1/audit%s: %v: %s", query, err, r.body)
	}
	next := ""
	if len(body.Links) == 1 {
		next = body.Links[0].Href
	}
	return body.Audit, next, string(r.body)
}

func actionsOf(es []api.AuditEntry) string {
	var out []string
	for _, e := range es {
		out = append(out, e.Action)
	}
	return strings.Join(out, ",")
}

func testAudit(t *testing.T, e *env) {
	host := e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "node-1"}`}, http.StatusCreated)["host"].(map[string]any)["id"].(string)
	r := e.do(call{method: "POST", path: "/v1/leases", header: asAlice, body: `{"name": "l", "start_date": "2026-11-21 12:00",
		"end_date": "2026-11-21 14:00", "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]}`})
	if r.status != http.StatusCreated {
		t.Fatalf("create lease: %s", r)
	}
	createReq := r.header.Get("X-OpenStack-Request-ID")
	var created struct {
		Lease struct {
			ID string `json:"id"`
		} `json:"lease"`
	}
	if err := json.Unmarshal(r.body, &created); err != nil {
		t.Fatal(err)
	}
	lease := created.Lease.ID
	e.mustDo(call{method: "PUT", path: "/v1/leases/" + lease, header: asAlice, body: `{"name": "l2"}`}, http.StatusOK)
	// A webhook with a secret of the client's and a token in its URL's query.
	const secret, token = "0123456789abcdef-very-secret", "tok-4242"
	hook := e.mustDo(call{method: "POST", path: "/v1/webhooks", header: asAlice,
		body: `{"url": "` + e.recv.url + `/alice?token=` + token + `", "secret": "` + secret + `"}`}, http.StatusCreated)["webhook"].(map[string]any)["id"].(string)
	e.mustDo(call{method: "PUT", path: "/v1/webhooks/" + hook, header: asAlice, body: `{"enabled": false}`}, http.StatusOK)
	e.mustDo(call{method: "DELETE", path: "/v1/webhooks/" + hook, header: asAlice}, http.StatusNoContent)
	e.mustDo(call{method: "DELETE", path: "/v1/leases/" + lease, header: asAlice}, http.StatusNoContent)

	t.Run("members and readers are refused", func(t *testing.T) {
		for _, who := range []map[string]string{asAlice, asReader} {
			checkError(t, e.do(call{method: "GET", path: "/v1/audit", header: who}), 403, "climate:audit:get")
		}
	})
	t.Run("read-only", func(t *testing.T) {
		for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
			r := e.do(call{method: m, path: "/v1/audit", body: `{"action": "lease.delete"}`})
			checkError(t, r, 405, m)
			if got := r.header.Get("Allow"); got != "GET, HEAD" {
				t.Errorf("%s: Allow %q", m, got)
			}
		}
	})

	all, next, raw := auditList(t, e, "")
	if got, want := actionsOf(all), "host.create,lease.create,lease.update,webhook.create,webhook.update,webhook.delete,lease.delete"; got != want {
		t.Fatalf("actions %s, want %s", got, want)
	}
	if next != "" {
		t.Errorf("a whole list has a next link %s", next)
	}
	t.Run("no secrets", func(t *testing.T) {
		for _, s := range []string{secret, token} {
			if strings.Contains(raw, s) {
				t.Errorf("%q appears in the audit trail: %s", s, raw)
			}
		}
		var whCreate map[string]any
		if err := json.Unmarshal(all[3].After, &whCreate); err != nil || whCreate["url"] != e.recv.url+"/alice" {
			t.Errorf("webhook.create after: %s (%v)", all[3].After, err)
		}
	})
	c := all[1]
	if c.Actor != "user" || c.ActorUserID != "alice" || c.ActorProjectID != "physics" || c.RequestID != createReq || c.LeaseID != lease ||
		c.ProjectID != "physics" || c.TargetType != "lease" || string(c.Before) != "null" {
		t.Errorf("lease.create entry: %+v (request id %s)", c, createReq)
	}
	if u := all[2]; string(u.Before) != `{"name":"l"}` || string(u.After) != `{"name":"l2"}` {
		t.Errorf("lease.update entry: before %s, after %s", u.Before, u.After)
	}

	t.Run("filters", func(t *testing.T) {
		for _, tc := range []struct{ query, want string }{
			{"?lease_id=" + lease, "lease.create,lease.update,lease.delete"},
			{"?host_id=" + host, "host.create"},
			{"?project_id=physics", "lease.create,lease.update,webhook.create,webhook.update,webhook.delete,lease.delete"},
			{"?project_id=chemistry", ""},
			{"?since=" + url.QueryEscape("2026-11-21 10:00") + "&until=" + url.QueryEscape("2026-11-21 10:01"), actionsOf(all)},
			{"?until=" + url.QueryEscape("2026-11-21 09:00"), ""},
		} {
			got, _, _ := auditList(t, e, tc.query)
			if actionsOf(got) != tc.want {
				t.Errorf("%s: %s, want %s", tc.query, actionsOf(got), tc.want)
			}
		}
		checkError(t, e.do(call{method: "GET", path: "/v1/audit?since=yesterday"}), 400, "since")
		checkError(t, e.do(call{method: "GET", path: "/v1/audit?lease=x"}), 400, "lease")
		checkError(t, e.do(call{method: "GET", path: "/v1/audit?limit=0"}), 400, "limit")
		checkError(t, e.do(call{method: "GET", path: "/v1/audit?since=2026-11-21T11:00:00Z&until=2026-11-21T10:00:00Z"}), 400, "until must be later than since")
		checkError(t, e.do(call{method: "GET", path: "/v1/audit?marker=nope"}), 400, "marker nope not found")
	})
	t.Run("pages", func(t *testing.T) {
		var got []api.AuditEntry
		page, next, _ := auditList(t, e, "?limit=3")
		got = append(got, page...)
		for next != "" {
			u, err := url.Parse(next)
			if err != nil {
				t.Fatal(err)
			}
			page, next, _ = auditList(t, e, "?"+u.RawQuery)
			got = append(got, page...)
		}
		if actionsOf(got) != actionsOf(all) {
			t.Errorf("pages of 3: %s, want %s", actionsOf(got), actionsOf(all))
		}
	})
}
