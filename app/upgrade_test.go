package app

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/npx/npxtest"
	"github.com/switchboard-mcp/switchboard/app/version"
	"github.com/switchboard-mcp/switchboard/pool"
)

// TestExecutable: what an upgrade or the tray's restart accepts as a
// program. Windows reports no execute bit on any file, so a check of the
// bits alone refused every binary there ("Restart Switchboard" failed).
func TestExecutable(t *testing.T) {
	for _, tc := range []struct {
		goos, path string
		mode       fs.FileMode
		want       bool
	}{
		{"linux", "/usr/bin/switchboard", 0o755, true},
		{"linux", "/usr/bin/switchboard", 0o700, true},
		{"linux", "/home/me/switchboard", 0o644, false},
		{"linux", "/usr/bin", fs.ModeDir | 0o755, false},
		{"darwin", "/Applications/Switchboard.app/Contents/MacOS/switchboard", 0o755, true},
		{"windows", `C:\Users\me\AppData\Local\Programs\Switchboard\switchboard.exe`, 0o666, true},
		{"windows", `C:\Switchboard\SWITCHBOARD.EXE`, 0o444, true},
		{"windows", `C:\Switchboard\switchboard`, 0o666, false},
		{"windows", `C:\Switchboard\notes.txt`, 0o666, false},
		{"windows", `C:\Switchboard.exe`, fs.ModeDir | 0o777, false},
	} {
		if got := executable(tc.goos, tc.path, tc.mode); got != tc.want {
			t.Errorf("executable(%s, %s, %v) = %v, want %v", tc.goos, tc.path, tc.mode, got, tc.want)
		}
	}
}

// The package version a child carried over an upgrade runs from is kept
// while the new program runs, however long ago a start last used it: the
// prune after another version's install leaves it (and removes a version
// nothing runs). On the first edition only versions the new program had
// resolved itself were kept: the carried child's folder, last used at its
// start by the earlier program 8 days before, was deleted under it.
func TestUpgradeKeepsTheCarriedChildsPackage(t *testing.T) {
	npxtest.NeedNPM(t)
	paths := sbHome(t)
	reg := npxtest.NewRegistry(t)
	reg.Publish(t, "@sbt/fresh", "1.0.0", map[string]string{
		"package.json": `{"name":"@sbt/fresh","version":"1.0.0","bin":{"fresh":"server.js"}}`,
		"server.js":    npxtest.Server,
	})
	// Two versions the earlier program installed, unused by a start for
	// 8 days: one runs in its carried child, the other in nothing.
	lastStart := time.Now().Add(-8 * 24 * time.Hour)
	folder := func(name string) string {
		dir := filepath.Join(paths.PackagesDir(), "@sbt+"+name+"@1.0.0-0123456789ab")
		pkg := filepath.Join(dir, "node_modules", "@sbt", name)
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "server.js"), []byte(npxtest.Server), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dir, lastStart, lastStart); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	carried, unused := folder("carried"), folder("unused")
	running, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"fresh": map[string]any{"command": "npx", "args": []string{"-y", "@sbt/fresh"}, "env": reg.Env(t.TempDir())},
	}})
	if err := os.WriteFile(paths.Config, running, 0o600); err != nil {
		t.Fatal(err)
	}
	// The child is described as the earlier program hands it over; it is
	// not a process of this test (no pid: it is not adopted).
	script := filepath.Join(carried, "node_modules", "@sbt", "carried", "server.js")
	hf, _ := json.Marshal(map[string]any{"format": HandoverFormat, "from": map[string]string{"version": "0.0.1"}, "lockFD": -1,
		"config": running, "carried": pool.Carried{Children: []pool.CarriedChild{
			{Server: "carried", Process: "of the earlier program", Resolved: []string{"/usr/bin/node", script, "--flag"}},
		}}})
	hpath := filepath.Join(paths.Run, "handover-test.json")
	if err := os.WriteFile(hpath, hf, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(HandoverEnv, hpath)
	inst, logs := startIn(t, Options{})
	runInstance(t, inst)
	eventually(t, 2*time.Minute, "@sbt/fresh resolved", func() bool { return strings.Contains(logs.String(), "server command resolved") })
	if !strings.Contains(logs.String(), "resolved to @sbt/fresh 1.0.0") {
		t.Fatalf("not resolved:\n%s", logs.String())
	}
	if _, err := os.Stat(unused); err == nil {
		t.Fatalf("the version nothing runs is still there: no prune ran")
	}
	if _, err := os.Stat(script); err != nil {
		t.Errorf("the carried child's package: %v", err)
	}
}

// What `switchboard upgrade` makes of each status while it waits: the old
// program (same PID, no newer upgrade) is waited on; the new one, by exec
// (same PID) or spawned (Windows: a PID of its own), ends the wait; a
// pool of another PID that took nothing over means the upgrading pool
// exited and the new program will not come.
func TestUpgradeOutcome(t *testing.T) {
	asked := time.Now()
	acc := control.UpgradeAccepted{PID: 100, Binary: "/opt/sb/switchboard",
		From: version.Info{Version: "1.0.0"}, To: version.Info{Version: "2.0.0"}}
	fresh := &control.UpgradeInfo{From: acc.From, At: asked.Add(time.Second)}
	stale := &control.UpgradeInfo{From: version.Info{Version: "0.9.0"}, At: asked.Add(-time.Hour)}
	for _, tc := range []struct {
		name    string
		st      control.Status
		done    bool
		wantErr string
	}{
		{"the old program, before its exec", control.Status{PID: 100, Version: "1.0.0"}, false, ""},
		{"the old program, itself upgraded before", control.Status{PID: 100, Version: "1.0.0", Upgrade: stale}, false, ""},
		{"the new program, by exec", control.Status{PID: 100, Version: "2.0.0", Upgrade: fresh}, true, ""},
		{"the new program, spawned", control.Status{PID: 200, Version: "2.0.0", Upgrade: fresh}, true, ""},
		{"a pool started afresh", control.Status{PID: 200, Version: "1.0.0"},
			false, "pool 100 exited during the upgrade and /opt/sb/switchboard did not take over (see the pool log); a new pool (pid 200) runs the old program, version 1.0.0"},
		{"a pool started afresh, that upgraded before", control.Status{PID: 200, Version: "2.0.0", Upgrade: stale},
			false, "a new pool (pid 200) runs the new program, version 2.0.0"},
	} {
		done, err := upgradeOutcome(acc, tc.st, asked)
		if done != tc.done || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: done %v, err %v; want done %v, err with %q", tc.name, done, err, tc.done, tc.wantErr)
		}
	}
}

// TestHandoverKeepsTheChildsBytes: a carried child's handshake reaches the
// next program as the child wrote it, its <, > and & as they are: the
// next pool serves its clients those bytes (its initialize and
// server/discover results keep a child's bytes), and an escaped spelling
// is not what the child said.
func TestHandoverKeepsTheChildsBytes(t *testing.T) {
	paths := sbHome(t)
	caps := `{"tools":{"listChanged":true},"experimental":{"note":"<b>a & b</b>"}}`
	info := `{"name":"<acme & co>","version":"1"}`
	hf := handoverFile{Format: HandoverFormat, LockFD: -1, Carried: &pool.Carried{Children: []pool.CarriedChild{{Server: "s",
		Handshake: pool.CarriedHandshake{Era: "legacy", Capabilities: json.RawMessage(caps), ServerInfo: json.RawMessage(info),
			Instructions: "use <x> & <y>"}}}}}
	data, err := hf.encode()
	if err != nil {
		t.Fatal(err)
	}
	hpath := filepath.Join(paths.Run, "handover-test.json")
	if err := os.MkdirAll(paths.Run, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hpath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(HandoverEnv, hpath)
	got, _ := takeHandover(paths, discardLog{})
	if got == nil || got.Carried == nil || len(got.Carried.Children) != 1 {
		t.Fatalf("the hand-over was not taken: %+v", got)
	}
	hs := got.Carried.Children[0].Handshake
	if string(hs.Capabilities) != caps || string(hs.ServerInfo) != info || hs.Instructions != "use <x> & <y>" {
		t.Fatalf("the handshake after the hand-over:\ncapabilities %s\nserverInfo %s\ninstructions %q", hs.Capabilities, hs.ServerInfo, hs.Instructions)
	}
}

// discardLog takes warnings and drops them.
type discardLog struct{}

func (discardLog) Warn(string, ...any) {}
