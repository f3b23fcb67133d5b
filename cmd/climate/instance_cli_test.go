package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"climate/http/api"
)

// Instance slots from the CLI: a lease of slots (and of a registered flavor, whose id
// looks like a number), its reservation's keys, the slots per host in allocations, and
// the availability of slots and floating IPs.
func TestInstanceCommands(t *testing.T) {
	s := startServer(t, serveOptions{})
	post(t, s.url+"/v1/os-hosts", `{"name": "c1", "vcpus": 8, "memory_mb": 16384}`, 201)
	post(t, s.url+"/v1/os-hosts", `{"name": "c2", "vcpus": 8, "memory_mb": 16384}`, 201)
	post(t, s.url+"/v1/flavors", `{"id": "42", "name": "m1.medium", "vcpus": 2, "ram": 4096, "disk": 0}`, 201)
	day := time.Now().UTC().Add(48 * time.Hour).Format("2006-01-02")

	out, err := runCLI(t, "lease", "create", "web", "--url", s.url, "--start-date", day+" 10:00", "--end-date", day+" 14:00",
		"--reservation", "resource_type=virtual:instance,amount=2,vcpus=2,memory_mb=2048,disk_gb=0,affinity=False", "-o", "json")
	if err != nil {
		t.Fatal(err, out)
	}
	var l api.Lease
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Reservations) != 1 {
		t.Fatalf("lease create -o json: %v %s", err, out)
	}
	if f := l.Reservations[0].Fields; f["amount"] != 2.0 || f["vcpus"] != 2.0 || f["affinity"] != false || f["server_group_id"] == nil {
		t.Fatalf("instance reservation keys: %v", f)
	}
	// affinity=false needs 3 distinct hosts for 3 slots: only 2 exist.
	_, err = runCLI(t, "lease", "create", "web3", "--url", s.url, "--start-date", day+" 10:00", "--end-date", day+" 14:00",
		"--reservation", "resource_type=virtual:instance,amount=3,vcpus=1,memory_mb=512,disk_gb=0,affinity=false")
	if err == nil || !strings.Contains(err.Error(), "on distinct hosts (anti-affinity)") {
		t.Fatalf("3 anti-affine slots on 2 hosts: %v", err)
	}
	out, err = runCLI(t, "lease", "create", "batch", "--url", s.url, "--start-date", day+" 10:00", "--end-date", day+" 14:00",
		"--reservation", "resource_type=flavor:instance,flavor_id=42,amount=2")
	if err != nil {
		t.Fatal(err, out)
	}
	out, err = runCLI(t, "allocation", "list", "--url", s.url)
	if err != nil || !strings.Contains(out, "SLOTS") {
		t.Fatalf("allocation list: %v\n%s", err, out)
	}

	out, err = runCLI(t, "availability", "timeline", "--url", s.url, "--from", day+" 08:00", "--to", day+" 16:00", "--step", "4h",
		"--vcpus", "2", "--memory-mb", "2048", "--absolute-times")
	// Both hosts hold slots from 10:00 (no host free whole); 4 more slots of 2 vCPUs fit
	// beside them (1 on the host holding 6 of its 8 vCPUs, 3 on the other).
	if err != nil || !strings.Contains(out, "FREE SLOTS") || !hasRow(out, day+"T08:00:00Z", day+"T12:00:00Z", "0", "4") {
		t.Fatalf("timeline of slots: %v\n%s", err, out)
	}
	out, err = runCLI(t, "availability", "earliest", "--url", s.url, "--duration", "4h", "--after", day+" 08:00",
		"--slots", "8", "--vcpus", "2", "--memory-mb", "2048", "-o", "json")
	var slots []api.Slot
	if err != nil || json.Unmarshal([]byte(out), &slots) != nil || len(slots) == 0 || slots[0].StartDate != day+"T14:00:00.000000" {
		t.Fatalf("earliest 8 slots: %v\n%s", err, out)
	}
	_, err = runCLI(t, "availability", "earliest", "--url", s.url, "--duration", "4h", "--vcpus", "2")
	if err == nil || !strings.Contains(err.Error(), "slots (how many instance slots) is required") {
		t.Fatalf("--vcpus without --slots: %v", err)
	}
}

// hasRow reports whether a table has a line whose fields are want.
func hasRow(table string, want ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		if slices.Equal(strings.Fields(line), want) {
			return true
		}
	}
	return false
}
