//go:build unix

package main

import "syscall"

// openFileLimit returns the process's soft limit on open files (RLIMIT_NOFILE).
func openFileLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false
	}
	return uint64(rl.Cur), true
}
