package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's five-minute walkthrough runs as written: its shell blocks, in order, with
// the real binary on PATH, against a fresh server (CLIMATE_URL pointed at it instead of
// the default port). Only the command the README shows failing fails, with the message it
// shows; every other command succeeds.
func TestReadmeWalkthrough(t *testing.T) {
	bin := climateBinary(t)
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## A five-minute walkthrough")
	section, _, ok2 := strings.Cut(section, "### The CLI for scripts and shells")
	if !ok || !ok2 {
		t.Fatal("README: the walkthrough section is not where it was")
	}
	var script strings.Builder
	// Each failing command is named on stderr; the walkthrough's own exports are replaced.
	script.WriteString("trap 'echo \"FAILED: $BASH_COMMAND\" >&2' ERR\n")
	for _, block := range strings.Split(section, "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		for _, line := range strings.Split(block, "\n") {
			if !strings.HasPrefix(line, "export CLIMATE_URL=") {
				script.WriteString(line + "\n")
			}
		}
	}
	s := startServer(t, serveOptions{})
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "CLIMATE_URL="+s.url, "XDG_CONFIG_HOME="+t.TempDir())
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the walkthrough: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var failed []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if f, ok := strings.CutPrefix(line, "FAILED: "); ok {
			failed = append(failed, f)
		}
	}
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "climate lease create one-more") {
		t.Errorf("failed commands %q; want only the one-more lease the README shows refused\nstdout:\n%s\nstderr:\n%s", failed, stdout.String(), stderr.String())
	}
	if want := "climate: Not enough hosts available: 1 requested, 0 free in the window; of 3 registered hosts 1 do not match the properties, 0 are not reservable, 0 are taken by this lease and 2 are booked in the window."; !strings.Contains(stderr.String(), want) {
		t.Errorf("the refusal the README shows is not what the CLI prints:\n%s", stderr.String())
	}
	for _, want := range []string{"compute-1", "gpu-training", "ACTIVE"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the walkthrough's output lacks %q:\n%s", want, stdout.String())
		}
	}
}
