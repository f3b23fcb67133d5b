package bench

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A small soak, whole: server and attack subprocesses, the working client's phases, the
// server's shedding, memory and descriptors, and nothing left behind. It checks what
// happened, not how fast.
func TestBenchSoakSubprocesses(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc for the server's memory and descriptors")
	}
	bin := climateBinaryForTest(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := &SoakOptions{Idle: 60, SlowHeader: 30, SlowBody: 30, SlowBodyNoAuth: 30, Addresses: 3, MaxConnections: 50, MaxPerClient: -1,
		Before: 500 * time.Millisecond, Duration: 3 * time.Second, After: 500 * time.Millisecond, Trickle: time.Second, Reconnect: time.Second,
		Pause: 5 * time.Millisecond, Exe: bin}
	rep, err := runSoak(ctx, o, io.Discard)
	if err != nil {
		t.Fatal(err)
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
