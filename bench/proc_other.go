//go:build !linux

package bench

import "os/exec"

// setDeathSignal has no portable equivalent outside Linux; the benchmark still kills its
// server on a normal exit and on Ctrl-C.
func setDeathSignal(*exec.Cmd) {}
