package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"climate/bench"
)

// runClimate runs the root command with args and returns its stdout and stderr.
func runClimate(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	err := root.Execute()
	return stdout.String(), stderr.String(), err
}

// The flags reach the bench package, whose refusals come back as one-line errors.
func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "plan", "--scales", "100"},
		{"bench", "plan", "--scales", "0:10"},
		{"bench", "plan", "--scales", "a:b"},
		{"bench", "plan", "--windows", "0"},
		{"bench", "plan", "-o", "yaml"},
		{"bench", "plan", "--types", "gpu"},
		{"bench", "plan", "--floatingips", "10000"},
		{"bench", "api", "-o", "yaml"},
		{"bench", "api", "--requests", "0"},
		{"bench", "api", "--clients", "0"},
		{"bench", "api", "--kind", "gpu"},
		{"bench", "api", "--url", "localhost:1234"},
		{"bench", "api", "--type", "gpu"},
		{"bench", "api", "--type", "floatingip", "--kind", "filtered"},
		{"bench", "api", "--type", "floatingip", "--addresses", "5"},
		{"bench", "api", "--replicas", "0"},
		{"bench", "api", "--replicas", "1,3"},
		{"bench", "api", "--database-delay", "1ms"},
		{"bench", "api", "--url", "http://127.0.0.1:1234", "--database-delay", "1ms"},
		{"bench", "load", "--hosts", "0", "--data-dir", t.TempDir()},
		{"bench", "soak", "--idle", "-1"},
		{"bench", "soak", "--addresses", "251"},
		{"bench", "soak", "--duration", "0s"},
		{"bench", "soak", "--trickle", "0s"},
		{"bench", "soak", "--url", "http://192.0.2.1:1234"},
		{"bench", "soak", "--url", "http://127.0.0.1:1234", "--max-connections", "10"},
		{"bench", "soak", "--token", "x"},
		{"bench", "soak", "-o", "yaml"},
	} {
		_, _, err := runClimate(t, args...)
		if err == nil {
			t.Errorf("%v: no error", args)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error is not one line: %q", args, err)
		}
	}
	_, _, err := runClimate(t, "bench", "soak", "--url", "http://10.0.0.1:1234")
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("a remote soak --url: %v, want refused as not loopback", err)
	}
}

// "climate bench load" opens the data directory as "climate serve" does.
func TestBenchLoadIntoDataDir(t *testing.T) {
	dir := t.TempDir()
	stdout, _, err := runClimate(t, "bench", "load", "--hosts", "30", "--leases", "100", "--data-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Loaded 30 hosts, 100 leases, "; !strings.HasPrefix(stdout, want) || !strings.Contains(stdout, filepath.Join(dir, "climate.db")) {
		t.Errorf("summary: %q", stdout)
	}
}

// The built binary runs "bench api" whole: it finds itself to start "climate serve",
// and leaves neither its data directory nor its server behind.
func TestBenchAPIBinaryStartsItself(t *testing.T) {
	bin := climateBinary(t)
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "api", "--hosts", "50", "--leases", "200", "--requests", "10", "--clients", "1,2", "-o", "json")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep bench.APIReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if rep.Server != "subprocess" || rep.Hosts != 50 || len(rep.Runs) != 2 || rep.Runs[0].Created == 0 || rep.PeakRSSMiB == nil {
		t.Errorf("report: %+v", rep)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left behind in TMPDIR: %v", left)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(tmp)) {
			t.Errorf("server still running: %s: %q", p, b)
		}
	}
}
