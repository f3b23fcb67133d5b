// Package buildinfo says which Climate this binary is: its version, the commit and time
// it was built from, and the Go that built it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version is the release, set at build time with
// -ldflags "-X climate/buildinfo.Version=v1.2.3"; "dev" for other builds.
var Version = "dev"

// Info describes a build. Commit and Date come from the version control information Go
// stamps into binaries built in a checkout (go build); they are empty otherwise (go run,
// go test).
type Info struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Date     string `json:"date,omitempty"`
	Modified bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Get returns this binary's build information.
func Get() Info {
	i := Info{Version: Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Commit = s.Value
			case "vcs.time":
				i.Date = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	return i
}

// String is the build on one line: "dev (commit 1a2b3c4d5e6f, 2026-11-25T01:00:00Z, go1.24 linux/amd64)".
func (i Info) String() string {
	s := i.Version + " ("
	if i.Commit != "" {
		c := i.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += "commit " + c
		if i.Modified {
			s += "+changes"
		}
		s += ", "
		if i.Date != "" {
			s += i.Date + ", "
		}
	}
	return s + i.Go + " " + i.Platform + ")"
}
