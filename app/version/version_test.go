package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestInfo(t *testing.T) {
	defer func(v, c, d string) { Version, Commit, BuildDate = v, c, d }(Version, Commit, BuildDate)
	Version, Commit, BuildDate = "1.2.3", "abc1234", "2026-11-23T20:00:00Z"
	i := Get()
	if i.Version != "1.2.3" || i.Commit != "abc1234" || i.BuildDate != "2026-11-23T20:00:00Z" || i.Go != runtime.Version() {
		t.Fatalf("Get() = %+v", i)
	}
	if got, want := i.String(), "switchboard 1.2.3 (commit abc1234, built 2026-11-23T20:00:00Z, "+runtime.Version()+")"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if s := (Info{Version: "dev", Go: "go1"}).String(); !strings.Contains(s, "commit unknown, built unknown") {
		t.Fatalf("unstamped: %q", s)
	}
}
