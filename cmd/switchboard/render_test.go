package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/app"
	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/importer"
)

var update = flag.Bool("update", false, "rewrite the renderers' golden files")

// TestImportReport renders the results package importer's own tests keep
// as golden files (one per client, real imports of its fixtures) into the
// report `switchboard import` and `setup` print.
func TestImportReport(t *testing.T) {
	for _, client := range []string{"claude-code", "claude-desktop", "cursor", "vscode"} {
		for _, kind := range []string{"", "-dry-run"} {
			t.Run(client+kind, func(t *testing.T) {
				data, err := os.ReadFile(filepath.Join("..", "..", "app", "importer", "testdata", client, "result"+kind+".golden"))
				if err != nil {
					t.Fatal(err)
				}
				var res importer.Result
				if err := json.Unmarshal(data, &res); err != nil {
					t.Fatal(err)
				}
				var out bytes.Buffer
				if err := writeImportReport(&out, &res); err != nil {
					t.Fatal(err)
				}
				golden(t, filepath.Join("testdata", "import", client, "report"+kind+".golden"), out.String())
			})
		}
	}
}

func TestConfigCheckText(t *testing.T) {
	msg := "the pool's own error"
	diff := config.DiffResult{Added: []string{"new"}, Removed: []string{"old"},
		Changed: []config.Change{{Name: "memory", Fields: []string{"args"}, Restarts: true}, {Name: "off", Fields: []string{"disabled"}, Stops: true},
			{Name: "slow", Fields: []string{"idleTimeout"}}},
		Unchanged: []string{"time"}, Settings: []string{"hangThreshold"}}
	tests := []struct {
		name string
		chk  app.ConfigCheck
		want string
	}{
		{"problems", app.ConfigCheck{File: "c.json", EnvChecked: true, Problems: []config.Problem{
			{Field: "mcpServers.memory.env.K", Msg: "environment variable K is not set"}, {Msg: "line 1, column 22: unexpected '}'"}}},
			`c.json: 2 problems:
  mcpServers.memory.env.K: environment variable K is not set
  line 1, column 22: unexpected '}'
(${VAR} references were checked against this shell's environment; Switchboard expands them from its own.)
`},
		{"a server not started", app.ConfigCheck{File: "c.json", EnvChecked: true, Servers: []string{"gh", "memory"}, NotStarted: []config.Problem{
			{Field: "mcpServers.gh.env.K", Msg: "environment variable K is not set; the server is not started"}}},
			`c.json: valid, 2 servers (gh, memory)
  warning: mcpServers.gh.env.K: environment variable K is not set; the server is not started
(${VAR} references were checked against this shell's environment; Switchboard expands them from its own.)
No Switchboard is running; nothing to compare with.
`},
		{"a cwd that does not exist", app.ConfigCheck{File: "c.json", Servers: []string{"memory"}, Warnings: []config.Problem{
			{Field: "mcpServers.memory.cwd", Msg: "directory /x does not exist; the server cannot start until it does"}}},
			`c.json: valid, 1 server (memory)
  warning: mcpServers.memory.cwd: directory /x does not exist; the server cannot start until it does
No Switchboard is running; nothing to compare with.
`},
		// A file's text reaches the terminal escaped: a server name with an
		// OSC sequence does not retitle it.
		{"escape sequences in the file", app.ConfigCheck{File: "c.json", Problems: []config.Problem{
			{Field: "mcpServers.x\x1b]0;PWNED\ay.command", Msg: "want a string"}}},
			`c.json: 1 problem:
  mcpServers.x\x1b]0;PWNED\x07y.command: want a string
`},
		{"one problem, a pool running", app.ConfigCheck{File: "c.json", Problems: []config.Problem{{Msg: "bad"}},
			Running: &app.RunningConfig{PID: 7, RunsFile: true}},
			`c.json: 1 problem:
  bad
The running Switchboard keeps its last good config until this file is fixed.
`},
		// A file the pool does not run changes nothing in it.
		{"one problem, a pool running another file", app.ConfigCheck{File: "other.json", Problems: []config.Problem{{Msg: "bad"}},
			Running: &app.RunningConfig{PID: 7}},
			`other.json: 1 problem:
  bad
`},
		{"valid, no pool", app.ConfigCheck{File: "c.json", Servers: []string{"memory"}, Remote: []string{"linear"},
			Unknown: []string{"mcpServers.slow.idleTimout"}},
			`c.json: valid, 1 server (memory)
  remote (URL) servers, not pooled: linear
  unknown field, kept but not used: mcpServers.slow.idleTimout
No Switchboard is running; nothing to compare with.
`},
		{"diffed", app.ConfigCheck{File: "c.json", Servers: []string{"memory", "new", "slow", "time"},
			Running: &app.RunningConfig{PID: 7, Source: "its running config", Diff: diff, ConfigError: &msg}},
			`c.json: valid, 4 servers (memory, new, slow, time)
Compared with the running Switchboard (pid 7, its running config):
  + new: new server
  - old: removed; takes no new sessions, finishes what is in flight, then stops
  ~ memory: args changed; new child for new requests; the old one finishes what is in flight
  ~ off: disabled changed; its requests are refused, saying why; the old child finishes what is in flight, then stops
  ~ slow: idleTimeout changed; applies at once, the child keeps running
  = unchanged: time
  settings changed: hangThreshold
The running Switchboard reports a config error: the pool's own error
`},
		{"no changes", app.ConfigCheck{File: "c.json", Running: &app.RunningConfig{PID: 7, Source: "its file",
			Diff: config.DiffResult{Unchanged: []string{"a", "b"}}}},
			`c.json: valid, 0 servers
Compared with the running Switchboard (pid 7, its file):
  no changes (2 servers unchanged)
`},
		{"unreadable running config", app.ConfigCheck{File: "c.json", Running: &app.RunningConfig{PID: 7, ReadErr: errors.New("gone")}},
			`c.json: valid, 0 servers
Switchboard is running (pid 7) but its config could not be read: gone
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeConfigCheck(&out, tt.chk); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, out.String()); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestUndoText(t *testing.T) {
	var out bytes.Buffer
	writeUndo(&out, []importer.Undone{
		{File: "a.json", KeptAs: "a.now", Entries: []importer.UndoneEntry{{Where: "mcpServers.x", Backup: "a.bak"}, {Where: "mcpServers.y", Backup: "a.bak", Left: "changed since setup"}}},
		{File: "b.json", Entries: []importer.UndoneEntry{{Where: "servers.z", Backup: "b.bak", Left: "removed since setup"}}},
		{File: "c.json", Entries: []importer.UndoneEntry{
			{Where: "mcpServers.g", Backup: "c.bak", Left: "its backup c.bak is gone", Lost: true},
			{Where: "mcpServers.u", Backup: "c.bak", Left: "its backup c.bak cannot be read: permission denied", Lost: true, Again: true},
		}},
	})
	want := "Kept the current a.json as a.now\nPut back mcpServers.x in a.json from a.bak\n" +
		"Left mcpServers.y in a.json as it is: changed since setup (before setup, it was as in a.bak)\n" +
		"Left servers.z in b.json as it is: removed since setup (before setup, it was as in b.bak)\n" +
		"Not put back: mcpServers.g in c.json still runs through Switchboard: its backup c.bak is gone; edit it by hand\n" +
		"Not put back: mcpServers.u in c.json still runs through Switchboard: its backup c.bak cannot be read: permission denied; " +
		"edit it by hand, or make the backup readable and run setup --undo again\n"
	if d := cmp.Diff(want, out.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s (-want +got):\n%s", path, d)
	}
}
