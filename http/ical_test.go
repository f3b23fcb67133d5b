package http_test

import (
	"net/http"
	"strings"
	"testing"
)

// GET /v1/leases.ics: the caller's leases as a calendar, another project's left out, the
// list's filters honoured; the calendar is text/calendar with CRLF lines.
func TestLeasesCalendar(t *testing.T) {
	e := newEnv(t, nil)
	e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "node-1"}`}, 201)
	e.mustDo(call{method: "POST", path: "/v1/os-hosts", body: `{"name": "node-2"}`}, 201)
	lease := func(name string, who map[string]string, start, end string) string {
		body := `{"name": "` + name + `", "start_date": "` + start + `", "end_date": "` + end + `",
			"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}], "events": []}`
		out := e.mustDo(call{method: "POST", path: "/v1/leases", body: body, header: who}, 201)
		return out["lease"].(map[string]any)["id"].(string)
	}
	mine := lease("gpu, run; 1", asAlice, "2026-11-22 09:00", "2026-11-22 17:00")
	theirs := lease("chem", asBob, "2026-11-22 09:00", "2026-11-22 17:00")

	r := e.do(call{method: "GET", path: "/v1/leases.ics", header: asAlice})
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/calendar; charset=utf-8" {
		t.Fatalf("GET /v1/leases.ics: %s (%s)", r, r.header.Get("Content-Type"))
	}
	cal := strings.ReplaceAll(string(r.body), "\r\n ", "")
	for _, want := range []string{"BEGIN:VCALENDAR\r\n", "X-WR-CALNAME:Climate leases of project physics\r\n", "UID:" + mine + "@climate\r\n",
		"DTSTART:20261122T090000Z\r\n", "DTEND:20261122T170000Z\r\n", `SUMMARY:gpu\, run\; 1` + "\r\n", "STATUS:TENTATIVE\r\n",
		"DESCRIPTION:Lease " + mine + ` (PENDING)\, project physics.\nphysical:host: 1 held (`} {
		if !strings.Contains(cal, want) {
			t.Errorf("calendar lacks %q:\n%s", want, cal)
		}
	}
	if strings.Contains(cal, theirs) || strings.Count(cal, "BEGIN:VEVENT") != 1 {
		t.Errorf("alice's calendar shows bob's lease or not one event:\n%s", cal)
	}
	// An admin sees both; with project_id, one.
	all := string(e.do(call{method: "GET", path: "/v1/leases.ics"}).body)
	chem := string(e.do(call{method: "GET", path: "/v1/leases.ics?project_id=chemistry"}).body)
	if strings.Count(all, "BEGIN:VEVENT") != 2 || strings.Count(chem, "BEGIN:VEVENT") != 1 || !strings.Contains(chem, theirs) {
		t.Errorf("admin: %d events, with project_id=chemistry %d", strings.Count(all, "BEGIN:VEVENT"), strings.Count(chem, "BEGIN:VEVENT"))
	}
	checkError(t, e.do(call{method: "POST", path: "/v1/leases.ics", body: `{}`}), http.StatusMethodNotAllowed, "Method POST is not allowed")
	checkError(t, e.do(call{method: "GET", path: "/v1/leases.ics?limit=x"}), http.StatusBadRequest)
}
