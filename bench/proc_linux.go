package bench

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the server subprocess if this process dies first
// (even by SIGKILL), so a benchmark never leaves a server behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
