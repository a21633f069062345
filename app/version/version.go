// Package version says which build of Switchboard is running: the CLI's
// `version`, `status --json`, the dashboard's About and the packages all
// print the same. The version's one source is FyneApp.toml's Version,
// which the Makefile stamps here with -ldflags -X; a plain `go build`
// says "dev" and still knows its commit from the Go toolchain's VCS
// stamp.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// AppID is Switchboard's one application ID: fyne's app ID (which it
// gives Wayland as a window's app_id), FyneApp.toml's ID (the macOS
// bundle's), the name of the Linux desktop entry and icon, and the
// LaunchAgent's label. A desktop ties a window to its launcher by this
// name; packaging/mkpkg's tests check that every file says the same.
const AppID = "io.github.switchboard_mcp.switchboard"

// Set by the linker: -X github.com/switchboard-mcp/switchboard/app/version.Version=...
var (
	Version   = "dev"
	Commit    = ""
	BuildDate = ""
)

// Info is the build, as shown to people and in JSON.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	Go        string `json:"go"`
}

// Get returns this build's Info. Commit and date fall back to what the Go
// toolchain recorded from the repository at build time.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, BuildDate: BuildDate, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && i.Commit == "":
				i.Commit = s.Value
				if len(i.Commit) > 12 {
					i.Commit = i.Commit[:12]
				}
			case s.Key == "vcs.time" && i.BuildDate == "":
				i.BuildDate = s.Value
			}
		}
	}
	return i
}

// String is the one-line form: "switchboard 0.1.0 (commit abc123, built
// 2026-11-23T20:00:00Z, go1.26.8)".
func (i Info) String() string {
	commit, date := i.Commit, i.BuildDate
	if commit == "" {
		commit = "unknown"
	}
	if date == "" {
		date = "unknown"
	}
	return fmt.Sprintf("switchboard %s (commit %s, built %s, %s)", i.Version, commit, date, i.Go)
}
