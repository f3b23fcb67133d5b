package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"climate/http/api"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestAvailabilityCommands(t *testing.T) {
	s := startServer(t, serveOptions{})
	post(t, s.url+"/v1/os-hosts", `{"name": "g1", "gpu": "true"}`, 201)
	post(t, s.url+"/v1/os-hosts", `{"name": "g2", "gpu": "true"}`, 201)
	day := time.Now().UTC().Add(48 * time.Hour).Format("2006-01-02")
	post(t, s.url+"/v1/leases", `{"name": "busy", "start_date": "`+day+` 10:00", "end_date": "`+day+` 14:00",
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]}`, 201)

	out, err := runCLI(t, "availability", "earliest", "--url", s.url, "--count", "2", "--duration", "3h",
		"--after", day+" 08:00", "--resource-properties", `["==", "$gpu", "true"]`, "-o", "json")
	if err != nil {
		t.Fatal(err, out)
	}
	var got []api.Slot
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) == 0 || got[0].StartDate != day+"T14:00:00.000000" || got[0].FreeHosts != 2 {
		t.Fatalf("earliest: %v %q", err, out)
	}
	out, err = runCLI(t, "availability", "timeline", "--url", s.url, "--from", day+" 08:00", "--to", day+" 16:00", "--step", "4h", "--absolute-times")
	if err != nil || !strings.Contains(out, "2 matching hosts") || !strings.Contains(out, day+"T08:00:00Z  "+day+"T12:00:00Z  1\n") {
		t.Fatalf("timeline: %v\n%s", err, out)
	}
	// Errors are the server's message, one line.
	_, err = runCLI(t, "availability", "earliest", "--url", s.url, "--duration", "3h", "--resource-properties", `["==", "$nope", "1"]`)
	if err == nil || !strings.Contains(err.Error(), `Unknown property "nope"`) {
		t.Fatalf("unknown property: %v", err)
	}
	_, err = runCLI(t, "availability", "earliest", "--url", s.url)
	if err == nil || !strings.Contains(err.Error(), "--duration is required") {
		t.Fatalf("missing duration: %v", err)
	}
	_, err = runCLI(t, "availability", "timeline", "--url", "http://127.0.0.1:1", "--from", "now", "--to", day+" 00:00")
	if err == nil || !strings.Contains(err.Error(), "cannot reach Climate") {
		t.Fatalf("unreachable server: %v", err)
	}
}
