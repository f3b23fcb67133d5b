package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"climate/bench"
	"climate/http/api"
	"climate/postgres"
)

// climate serve with exec hooks and power management: each host sees power on, start,
// end and power off in that order; an idle host is powered off; a start hook that fails
// puts its lease into ERROR after its retries, with the hook's message in the log; hosts
// show their power state in the API and the CLI.
func TestServeRunsHooksAndManagesPower(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "hooks.log")
	record := func(what string) string {
		return `sh -c 'echo "` + what + ` $CLIMATE_HOST_NAME $CLIMATE_LEASE_NAME" >> ` + log + `'`
	}
	serverLog := &bench.CappedBuffer{Max: 1 << 20}
	c := newCLI(t, serveOptions{logLevel: "info", logTo: serverLog, actions: actionOptions{
		hookStart: `sh -c 'echo "start $CLIMATE_HOST_NAME $CLIMATE_LEASE_NAME" >> ` + log + `
			if [ "$CLIMATE_LEASE_NAME" = bad ]; then echo "no image for $CLIMATE_HOST_NAME" >&2; exit 4; fi'`,
		hookEnd:  record("end"),
		powerOn:  record("power_on"),
		powerOff: record("power_off"),
		timeout:  time.Minute, attempts: 2, parallel: 4,
		powerOnLead: 10 * time.Minute, powerOffIdle: 30 * time.Minute,
	}})
	c.ok("host", "create", "h1")
	c.ok("host", "create", "h2")
	c.ok("host", "create", "h3")
	c.ok("lease", "create", "short", "--reservation", "resource_type=physical:host,min=1,max=1,hypervisor_properties=[\"==\",\"$hypervisor_hostname\",\"h1\"]", "--end-date", "+2s")
	if out := c.ok("lease", "wait", "short", "--status", "terminated", "--timeout", "30s", "-o", "value", "-c", "status"); out != "TERMINATED\n" {
		t.Fatalf("short: %q", out)
	}
	// h1 is powered off once its lease has ended (the end wakes power management); h2 and
	// h3 were idle from the first plan.
	powerStates := func() map[string]api.Host {
		var hosts []api.Host
		if err := json.Unmarshal([]byte(c.ok("host", "list", "-o", "json")), &hosts); err != nil {
			t.Fatal(err)
		}
		out := map[string]api.Host{}
		for _, h := range hosts {
			out[h.HypervisorHostname] = h
		}
		return out
	}
	ended, err := api.ParseTime(c.leaseJSON("lease", "show", "short").EndDate)
	if err != nil {
		t.Fatal(err)
	}
	// h1 may already be off from before its lease (idle): it must be off since the end.
	offSinceEnd := func(h api.Host) bool {
		at, err := time.ParseInLocation("2006-01-02 15:04:05.999999", h.PowerStateChangedAt, time.UTC) // api.FormatCreated
		return h.PowerState == "off" && err == nil && !at.Before(ended)
	}
	deadline := time.Now().Add(30 * time.Second)
	for hosts := powerStates(); !offSinceEnd(hosts["h1"]) || hosts["h3"].PowerState != "off"; hosts = powerStates() {
		// Another process: nothing signals it but the API.
		if time.Now().After(deadline) {
			t.Fatalf("h1 not powered off after its lease, or h3 not while idle: %+v\n%+v\n%s", hosts["h1"], hosts["h3"], serverLog)
		}
		time.Sleep(20 * time.Millisecond)
	}

	c.fails("lease bad went to ERROR", "lease", "create", "bad", "--reservation",
		"resource_type=physical:host,min=1,max=1,hypervisor_properties=[\"==\",\"$hypervisor_hostname\",\"h2\"]",
		"--end-date", "+1h", "--wait", "--timeout", "30s", "--interval", "20ms")
	if msg := "start_lease failed on 1 of 1 hosts: host h2: command sh: exit status 4: no image for h2 (2 attempts)"; !strings.Contains(serverLog.String(), msg) {
		t.Errorf("the server's log lacks %q:\n%s", msg, serverLog)
	}

	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	perHost := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		perHost[f[1]] = append(perHost[f[1]], strings.Join(append([]string{f[0]}, f[2:]...), " "))
	}
	want := map[string]string{
		"h1": "power_on|start short|end short|power_off",
		"h2": "power_off|power_on|start bad|start bad", // idle, then on for bad, whose start hook fails twice
		"h3": "power_off",
	}
	for host, w := range want {
		// h1 may be powered off before its lease is seen (hosts created before it), then on.
		got := strings.Join(perHost[host], "|")
		if host == "h1" {
			got = strings.TrimPrefix(got, "power_off|")
		}
		if got != w {
			t.Errorf("%s saw %q, want %q", host, got, w)
		}
	}

	hosts := powerStates()
	if h := hosts["h2"]; h.PowerState != "on" || h.PowerStateChangedAt == "" {
		t.Errorf("h2 %+v: want on (its lease holds it, in ERROR)", h)
	}
	if h := hosts["h3"]; h.PowerState != "off" || h.PoweredOffHours < 0 {
		t.Errorf("h3 %+v: want off", h)
	}
	rows := lines(c.ok("host", "list"))
	if got := strings.Join(rows[0], " "); got != "ID HYPERVISOR HOSTNAME VCPUS MEMORY MB LOCAL GB RESERVABLE POWER STATE POWERED OFF HOURS" {
		t.Errorf("host list header %q: want the power columns", got)
	}
	if out := c.ok("host", "show", "h3", "-o", "value", "-c", "power_state"); out != "off\n" {
		t.Errorf("host show h3 -c power_state: %q", out)
	}
}

// Bad hook and power settings are refused at start with a clear message.
func TestServeRefusesBadActionSettings(t *testing.T) {
	for _, tc := range []struct {
		o    actionOptions
		want string
	}{
		{actionOptions{hookStart: "/no/such/program --flag"}, `--hook-start: program "/no/such/program" not found`},
		{actionOptions{hookEnd: "sh -c 'unterminated"}, "--hook-end: command line: unterminated single quote"},
		{actionOptions{hookStart: "https://"}, "--hook-start: webhook https:: not a URL with a host"},
		{actionOptions{powerOn: "true"}, "power management needs both --power-on and --power-off"},
		{actionOptions{powerOn: "true", powerOff: "true", powerOnLead: -time.Minute}, "--power-on-lead -1m0s"},
		{actionOptions{hookEnd: "true", attempts: 0}, "--hook-attempts 0: want at least 1"},
	} {
		o := tc.o
		if o.timeout == 0 {
			o.timeout = time.Minute
		}
		if o.attempts == 0 && !strings.Contains(tc.want, "attempts") {
			o.attempts = 1
		}
		if o.parallel == 0 {
			o.parallel = 1
		}
		if o.powerOnLead == 0 {
			o.powerOnLead = time.Minute
		}
		_, err := buildActions(&o, nil, nil, nil, false, nil, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.o, err, tc.want)
		}
	}
}

// Two replicas with engines and power management on one PostgreSQL schema: one leads
// power management, so each host is switched once, and a lease starting on either
// replica's engine finds its host on.
func TestPowerManagementOnPostgresRunsOnce(t *testing.T) {
	dsn := postgres.TestDSN(t)
	log := filepath.Join(t.TempDir(), "hooks.log")
	record := `sh -c 'echo "$CLIMATE_EVENT $CLIMATE_HOST_NAME" >> ` + log + `'`
	o := serveOptions{database: dsn, actions: actionOptions{hookStart: record, powerOn: record, powerOff: record,
		timeout: time.Minute, attempts: 1, parallel: 4, powerOnLead: 10 * time.Minute, powerOffIdle: 30 * time.Minute}}
	a, b := startServer(t, o), startServer(t, o)
	for _, name := range []string{"h1", "h2", "h3"} {
		post(t, a.url+"/v1/os-hosts", `{"name": "`+name+`"}`, 201)
	}
	end := time.Now().UTC().Add(time.Hour).Format("2006-01-02 15:04:05")
	lease := post(t, b.url+"/v1/leases", `{"name": "r", "start_date": "now", "end_date": "`+end+`",
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "[\"==\", \"$hypervisor_hostname\", \"h1\"]", "resource_properties": ""}]}`, 201)
	want := map[string]string{"h1": "on", "h2": "off", "h3": "off"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[string]string{}
		for _, h := range get(t, a.url+"/v1/os-hosts")["hosts"].([]any) {
			h := h.(map[string]any)
			got[h["hypervisor_hostname"].(string)], _ = h["power_state"].(string)
		}
		status := get(t, a.url+"/v1/leases/"+lease["lease"].(map[string]any)["id"].(string))["lease"].(map[string]any)["status"]
		if fmt.Sprint(got) == fmt.Sprint(want) && status == "ACTIVE" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("power states %v, want %v; lease %v", got, want, status)
		}
		time.Sleep(20 * time.Millisecond) // polling the API as a client would
	}
	b2, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	runs := strings.Split(strings.TrimSpace(string(b2)), "\n")
	// h1 may have been switched off while idle, between its registration and the lease's
	// creation, and on again for the lease: a legitimate plan. Two leaders would show as
	// a switch run twice.
	want1 := "power_off h2,power_off h3,power_on h1,start_lease h1"
	if slices.Index(runs, "power_off h1") >= 0 && slices.Index(runs, "power_off h1") < slices.Index(runs, "power_on h1") {
		want1 = "power_off h1," + want1
	}
	if got := strings.Join(slices.Sorted(slices.Values(runs)), ","); got != want1 {
		t.Errorf("hook runs %q: want each host switched once (h1 perhaps off first)", runs)
	}
	if slices.Index(runs, "power_on h1") > slices.Index(runs, "start_lease h1") {
		t.Errorf("h1 started before it was powered on: %q", runs)
	}
}
