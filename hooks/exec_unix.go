//go:build unix

package hooks

import (
	"os/exec"
	"syscall"
)

// killGroup starts the command in a process group of its own and, when its context is
// done, kills the whole group: a shell's children die with it.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
