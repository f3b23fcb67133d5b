package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Process memory and descriptors, read from Linux's /proc.

// peakRSS reads a process's peak resident set size (VmHWM) in bytes from /proc.
func peakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmHWM(data)
}

func parseVmHWM(status []byte) (int64, error) { return parseStatusKB(status, "VmHWM:") }

// parseStatusKB reads a size in kB (e.g. "VmHWM:") from /proc/PID/status, in bytes.
func parseStatusKB(status []byte, field string) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				break
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s line in /proc/PID/status", strings.TrimSuffix(field, ":"))
}

// procRSS reads a process's resident set size (VmRSS) in bytes.
func procRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(data, "VmRSS:")
}

// procFDs counts a process's open file descriptors.
func procFDs(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(entries), err
}

// residentBytes reads one of this process's memory figures (VmRSS:, VmHWM:) from /proc.
func residentBytes(field string) (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	return parseStatusKB(data, field)
}

// resetPeakRSS sets this process's peak resident memory (VmHWM) back to its current one,
// so that a scale's peak is its own (Linux; elsewhere nothing is measured).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }
