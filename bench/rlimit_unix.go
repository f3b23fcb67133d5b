//go:build unix

package bench

import "syscall"

// raiseOpenFileLimit raises the soft limit on open files to the hard limit and returns
// both (Go does this at start on most systems; this makes sure).
func raiseOpenFileLimit() (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	if rl.Cur < rl.Max {
		raised := rl
		raised.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return uint64(rl.Cur), uint64(rl.Max), err
		}
		rl = raised
	}
	return uint64(rl.Cur), uint64(rl.Max), nil
}
