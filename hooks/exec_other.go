//go:build !unix

package hooks

import "os/exec"

// killGroup: without process groups, only the command itself is killed at its timeout.
func killGroup(*exec.Cmd) {}
