package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"climate/buildinfo"
	"climate/http/api"
)

// Issue 18 (3): a mistyped subcommand of any group fails with a suggestion, as the root
// does; a group given nothing shows its help and succeeds.
func TestUnknownSubcommandsFail(t *testing.T) {
	_, _, err := runClimate(t, "lease", "lst")
	if err == nil || !strings.Contains(err.Error(), `unknown command "lst" for "climate lease"`) || !strings.Contains(err.Error(), "Did you mean this?\n\tlist") {
		t.Errorf("climate lease lst: %v", err)
	}
	var groups []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasParent() && c.HasSubCommands() {
			groups = append(groups, c)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
	if len(groups) < 10 {
		t.Fatalf("found %d command groups", len(groups))
	}
	for _, g := range groups {
		path := strings.Fields(g.CommandPath())[1:]
		if _, _, err := runClimate(t, append(path, "no-such-thing")...); err == nil || !strings.Contains(err.Error(), "unknown command") {
			t.Errorf("climate %s no-such-thing: %v, want an unknown-command error", strings.Join(path, " "), err)
		}
		if out, _, err := runClimate(t, path...); err != nil || !strings.Contains(out, "Available Commands") {
			t.Errorf("climate %s: %v, want its help\n%s", strings.Join(path, " "), err, out)
		}
	}
}

// Issue 18 (5): +DURATION dates keep the microseconds: a lease from now to +3s ends 3 s
// after the moment the command ran, not up to a second before. Bracketing that moment with
// this process's clock (the CLI and the server share it) keeps the check free of latency.
func TestRelativeDatesKeepPrecision(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "n1")
	before := time.Now().Truncate(time.Microsecond) // the wire carries microseconds
	l := c.leaseJSON("lease", "create", "quick", "--end-date", "+3s", "--reservation", "resource_type=physical:host,min=1,max=1")
	after := time.Now()
	start, err1 := api.ParseTime(l.StartDate)
	end, err2 := api.ParseTime(l.EndDate)
	if err1 != nil || err2 != nil || start.Before(before) || start.After(after) ||
		end.Before(before.Add(3*time.Second)) || end.After(after.Add(3*time.Second)) || end.Sub(start) > 3*time.Second {
		t.Errorf("lease from %s to %s (%v, %v): want it to start between %s and %s and end 3 s after the command ran",
			l.StartDate, l.EndDate, err1, err2, api.FormatTime(before), api.FormatTime(after))
	}
}

// Issue 18 (6): lease show lists events by time, the start first.
func TestLeaseShowListsEventsByTime(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "n1")
	for i := range 5 { // ids are random: an order by id shows up among five leases
		name, day := fmt.Sprintf("l%d", i), fmt.Sprintf("2030-01-0%d", i+1)
		c.ok("lease", "create", name, "--start-date", day+" 09:00", "--end-date", day+" 10:00", "--before-end-date", "-10m",
			"--reservation", "resource_type=physical:host,min=1,max=1")
		var types []string
		for _, e := range c.leaseJSON("lease", "show", name).Events {
			types = append(types, e.EventType)
		}
		if got := strings.Join(types, " "); got != "start_lease before_end_lease end_lease" {
			t.Errorf("lease %s events %s; want start_lease before_end_lease end_lease", name, got)
		}
	}
}

// Issue 18 (7): climate version prints this build and the server's; --version works;
// an unreachable server is reported, not an error.
func TestVersion(t *testing.T) {
	c := newCLI(t, serveOptions{})
	var r versionReport
	if err := json.Unmarshal([]byte(c.ok("version", "-o", "json")), &r); err != nil {
		t.Fatal(err)
	}
	if r.Version != buildinfo.Version || r.Go != runtime.Version() || r.Server != c.url || r.ServerVersion != buildinfo.Version || r.ServerGo != runtime.Version() || r.ServerError != "" {
		t.Errorf("climate version -o json: %+v", r)
	}
	if out := c.ok("--version"); out != "climate "+buildinfo.Get().String()+"\n" {
		t.Errorf("climate --version: %q", out)
	}
	out := c.ok("version", "--url", "http://127.0.0.1:1")
	if !strings.Contains(out, "server_error") || !strings.Contains(out, "cannot reach Climate at http://127.0.0.1:1") {
		t.Errorf("climate version against nothing:\n%s", out)
	}
}

// Issue 18 (14): host create and update take the built-in fields as flags; --extra refuses
// them, naming the flag.
func TestHostFieldFlags(t *testing.T) {
	c := newCLI(t, serveOptions{})
	var h api.Host
	if err := json.Unmarshal([]byte(c.ok("host", "create", "n1", "--vcpus", "32", "--memory-mb", "131072", "--local-gb", "900",
		"--hypervisor-type", "QEMU", "--availability-zone", "az1", "--extra", "gpu=true", "-o", "json")), &h); err != nil {
		t.Fatal(err)
	}
	if h.VCPUs != 32 || h.MemoryMB != 131072 || h.LocalGB != 900 || h.HypervisorType != "QEMU" || h.AvailabilityZone != "az1" || h.Extra["gpu"] != "true" {
		t.Errorf("host create with field flags: %+v", h)
	}
	c.fails("--extra vcpus=32: vcpus is a built-in host field, not an extra capability; set it with --vcpus", "host", "create", "n2", "--extra", "vcpus=32")
	c.fails("set it with --memory-mb", "host", "update", "n1", "--extra", "memory_mb=1")
	c.fails("cpu_info is a built-in host field the server sets", "host", "create", "n3", "--extra", "cpu_info=x")
	if err := json.Unmarshal([]byte(c.ok("host", "update", "n1", "--vcpus", "64", "-o", "json")), &h); err != nil || h.VCPUs != 64 {
		t.Errorf("host update --vcpus 64: %+v, %v", h, err)
	}
	c.ok("host", "update", "n1", "--extra", "reservable=false") // Blazar's way to take a host out
}

// Issue 18 (13): a lease's only reservation is updated without its id; a lease with two
// needs one, and says so.
func TestUpdateOnlyReservationWithoutID(t *testing.T) {
	c := newCLI(t, serveOptions{})
	for _, h := range []string{"n1", "n2", "n3"} {
		c.ok("host", "create", h)
	}
	c.ok("lease", "create", "one", "--start-date", "2030-01-07 09:00", "--end-date", "2030-01-07 17:00", "--reservation", "resource_type=physical:host,min=1,max=1")
	l := c.leaseJSON("lease", "update", "one", "--reservation", "max=3")
	if n := l.Reservations[0].Fields["max"]; fmt.Sprint(n) != "3" {
		t.Errorf("after --reservation max=3: max %v", n)
	}
	c.ok("lease", "create", "two", "--start-date", "2030-01-08 09:00", "--end-date", "2030-01-08 17:00",
		"--reservation", "resource_type=physical:host,min=1,max=1", "--reservation", "resource_type=physical:host,min=1,max=1")
	c.fails("lease two has 2 reservations: name one with id=RESERVATION_ID", "lease", "update", "two", "--reservation", "max=2")
}

// Issue 18 (15): a config file with an unknown key names the file, the line and the key.
func TestConfigErrorsNameFileLineAndKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("url: http://127.0.0.1:1\ntokn: s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := runClimate(t, "lease", "list", "--config", path)
	if want := "config file " + path + `, line 2: unknown key "tokn" (the keys are url and token)`; err == nil || err.Error() != want {
		t.Errorf("error %v; want %q", err, want)
	}
	if err := os.WriteFile(path, []byte("url: [unclosed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runClimate(t, "lease", "list", "--config", path); err == nil || !strings.Contains(err.Error(), "config file "+path+": ") || !strings.Contains(err.Error(), "line") {
		t.Errorf("a file that is not YAML: %v", err)
	}
}

// Issue 18 (16): every command's help shows each flag's default once: no usage text that
// states a default the flag's own "(default …)" repeats.
func TestHelpShowsEachDefaultOnce(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			shown := f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "[]" && f.DefValue != "0s"
			if shown && (strings.Contains(f.Usage, "default:") || strings.Contains(f.Usage, "(default") || strings.Contains(f.Usage, "the default is")) {
				t.Errorf("%s --%s: %q states a default and help adds (default %s)", c.CommandPath(), f.Name, f.Usage, f.DefValue)
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
	out, _, err := runClimate(t, "serve", "--help")
	for _, line := range strings.Split(out, "\n") {
		if err != nil || strings.Count(line, "(default") > 1 {
			t.Errorf("serve --help: %v %q", err, line)
		}
	}
}

// Issue 18 (1): lease show, allocation lists and dry runs name the hosts a lease holds.
func TestHostNamesInLeasesAndAllocations(t *testing.T) {
	c := newCLI(t, serveOptions{})
	c.ok("host", "create", "compute-1")
	c.ok("host", "create", "compute-2")
	res := "resource_type=physical:host,min=2,max=2"
	dry := c.leaseJSON("lease", "create", "try", "--start-date", "2030-01-07 09:00", "--end-date", "2030-01-07 17:00", "--reservation", res, "--dry-run")
	l := c.leaseJSON("lease", "create", "gpu-training", "--start-date", "2030-01-07 09:00", "--end-date", "2030-01-07 17:00", "--reservation", res)
	for what, got := range map[string][]string{"dry run": dry.Reservations[0].Hosts, "create": l.Reservations[0].Hosts,
		"show": c.leaseJSON("lease", "show", "gpu-training").Reservations[0].Hosts} {
		if slices.Sort(got); strings.Join(got, ",") != "compute-1,compute-2" {
			t.Errorf("%s: hosts %v; want compute-1 and compute-2", what, got)
		}
	}
	if out := c.ok("lease", "show", "gpu-training"); !strings.Contains(out, "hosts=compute-1,compute-2") && !strings.Contains(out, "hosts=compute-2,compute-1") {
		t.Errorf("lease show table lacks the hosts:\n%s", out)
	}
	hosts := strings.Fields(c.ok("allocation", "list", "--lease", "gpu-training", "-o", "value", "-c", "host"))
	if slices.Sort(hosts); strings.Join(hosts, ",") != "compute-1,compute-2" {
		t.Errorf("allocation list -c host: %v", hosts)
	}
}
