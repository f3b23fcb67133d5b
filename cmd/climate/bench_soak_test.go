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
)

// A small soak, whole: server and attack subprocesses, the working client's phases, the
// server's shedding, memory and descriptors, and nothing left behind. It checks what
// happened, not how fast.
func TestBenchSoakSubprocesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the climate binary")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc for the server's memory and descriptors")
	}
	bin := climateBinary(t)
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "soak", "--idle", "60", "--slow-header", "30", "--slow-body", "30", "--slow-body-noauth", "30",
		"--addresses", "3", "--max-connections", "50", "--before", "500ms", "--duration", "3s", "--after", "500ms", "-o", "json")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep soakReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if len(rep.Phases) != 3 {
		t.Fatalf("phases %+v", rep.Phases)
	}
	for _, p := range rep.Phases {
		// The working client holds one connection: it is never shed for the attack's, whose
		// 3 addresses hold about 16 each.
		if p.Requests == 0 || p.Errors != 0 {
			t.Errorf("phase %+v: want requests and no errors", p)
		}
	}
	a := rep.Attack
	if a.Dialed <= 150 || a.ClosedByServer == 0 || a.Answers["503"] == 0 {
		t.Errorf("attack %+v: want more than 150 connections opened, some refused with 503", a)
	}
	if rep.Shed == nil || rep.Shed.Lines == 0 || rep.Shed.Refused == 0 {
		t.Errorf("server shedding %+v: want log lines with refusals", rep.Shed)
	}
	// 50 connections, the working client's, the listener, the database, the logs.
	if rep.FDs == nil || rep.FDs.Peak > 50+30 || rep.FDs.Peak < 50 || rep.RSSMiB == nil || rep.RSSMiB.Peak <= 0 || rep.PeakRSSMiB == nil {
		t.Errorf("server descriptors %+v, RSS %+v: want a peak between 50 and 80 descriptors, and memory figures", rep.FDs, rep.RSSMiB)
	}
	if rep.Server != "subprocess" || *rep.MaxConnections != 50 {
		t.Errorf("report %+v", rep)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left behind in TMPDIR: %v", left)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && (bytes.Contains(b, []byte(tmp)) || bytes.Contains(b, []byte(bin))) {
			t.Errorf("still running: %s: %q", p, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

func TestBenchSoakRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--idle", "-1"},
		{"--addresses", "251"},
		{"--duration", "0s"},
		{"--trickle", "0s"},
		{"--url", "http://192.0.2.1:1234"},
		{"--url", "http://127.0.0.1:1234", "--max-connections", "10"},
		{"--token", "x"},
		{"-o", "yaml"},
	} {
		_, _, err := runClimate(t, append([]string{"bench", "soak"}, args...)...)
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want a one-line error", args, err)
		}
	}
	_, _, err := runClimate(t, "bench", "soak", "--url", "http://10.0.0.1:1234")
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("a remote --url: %v, want refused as not loopback", err)
	}
}
