package hooks

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestExecTimeoutKillsTheProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	r := &Runner{Attempts: 1, Timeout: 200 * time.Millisecond, Logger: quiet}
	// The shell starts a child that would outlive it, and waits.
	err := r.Run(context.Background(), sh(`sleep 60 & echo $! > "$1"; wait`, pidFile), vars)
	if err == nil || err.Error() != "command sh: timed out after 200ms (1 attempts)" {
		t.Fatalf("error %v, want a timeout", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	if !exits(pid, 5*time.Second) {
		t.Errorf("the hook's child %d survived its timeout", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// exits reports whether pid ends within d. SIGKILL is delivered asynchronously, so a
// process just killed may still run for a moment: wait on a pidfd, which becomes readable
// when the process exits.
func exits(pid int, d time.Duration) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return errors.Is(err, unix.ESRCH) // already gone
	}
	defer unix.Close(fd)
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(d.Milliseconds()))
	return err == nil && n == 1
}
