package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
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

// userHZ is the unit of /proc/PID/stat's CPU times: USER_HZ, 100 on every Linux ABI.
const userHZ = 100

// cpuTime reads the CPU time (user and system) a process has used, from /proc/PID/stat
// ("self" for this one).
func cpuTime(pid string) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(data)
}

// parseStatCPU reads utime and stime, the 14th and 15th fields of /proc/PID/stat; the
// second field, the command in parentheses, may hold spaces, so fields count from its end.
func parseStatCPU(stat []byte) (time.Duration, error) {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:]) // from the 3rd field on
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/PID/stat: %d fields after the command, want 13 or more", len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/PID/stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// IO is what a process has asked of the kernel's read and write calls so far, from
// /proc/PID/io: the calls (read, pread, write, pwrite and their vector forms, files and
// sockets alike) and the bytes they wrote. Unlike CPU time, other work on the machine
// does not move them.
type IO struct {
	ReadCalls, WriteCalls, WrittenBytes int64
}

// ProcIO reads a process's IO ("self" for this one).
func ProcIO(pid string) (IO, error) {
	data, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		return IO{}, err
	}
	var c IO
	found := 0
	for _, line := range strings.Split(string(data), "\n") {
		name, value, _ := strings.Cut(line, ": ")
		field := map[string]*int64{"syscr": &c.ReadCalls, "syscw": &c.WriteCalls, "wchar": &c.WrittenBytes}[name]
		if field == nil {
			continue
		}
		if *field, err = strconv.ParseInt(value, 10, 64); err != nil {
			return IO{}, fmt.Errorf("/proc/PID/io: %w", err)
		}
		found++
	}
	if found != 3 {
		return IO{}, fmt.Errorf("/proc/PID/io: %d of syscr, syscw and wchar", found)
	}
	return c, nil
}

// postgresCPU sums the CPU time of this host's processes named postgres (the postmaster,
// its backends and helpers): with the database on this host, what it spent. A backend
// that exits takes its time with it, so it is a lower bound; processes it may not read are
// left out.
func postgresCPU() time.Duration {
	var total time.Duration
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if comm, err := os.ReadFile(d + "/comm"); err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		if t, err := cpuTime(filepath.Base(d)); err == nil {
			total += t
		}
	}
	return total
}
