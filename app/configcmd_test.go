package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/pool"
)

// sbHome points SWITCHBOARD_HOME at a fresh directory short enough for
// sockets.
func sbHome(t *testing.T) Paths {
	t.Helper()
	dir, err := os.MkdirTemp("", "sb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv("SWITCHBOARD_HOME", dir)
	paths, err := ResolvePaths()
	if err != nil {
		t.Fatal(err)
	}
	if err := paths.EnsureRunDir(); err != nil {
		t.Fatal(err)
	}
	return paths
}

// fakeRunning serves the control API of an instance whose running config
// is running, the way a started Switchboard does.
func fakeRunning(t *testing.T, paths Paths, running string, withConfigEndpoint bool) {
	t.Helper()
	if err := os.WriteFile(paths.Config, []byte(running), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(paths.Config)
	if err != nil {
		t.Fatal(err)
	}
	p := pool.New(nil)
	inst := &Instance{Paths: paths, Pool: p, log: slog.New(slog.DiscardHandler), configPath: paths.Config, cfg: cfg}
	api := control.Handler(inst)
	mux := http.NewServeMux()
	mux.Handle("GET /v1/status", api)
	if withConfigEndpoint {
		mux.Handle("GET /v1/config", api)
	}
	ln, err := net.Listen("unix", paths.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		p.Close()
	})
}

const runningConfig1 = `{"mcpServers": {
	"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
	"old": {"command": "old-mcp"},
	"slow": {"command": "slow-mcp", "idleTimeout": "5m"}
}}`

func TestCheckConfig(t *testing.T) {
	const edited = `{"mcpServers": {
	"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory", "--verbose"]},
	"new": {"command": "new-mcp"},
	"slow": {"command": "slow-mcp", "idleTimeout": "10m", "idleTimout": "typo"},
	"linear": {"url": "https://mcp.linear.app/sse"}
}, "hangThreshold": "1m"}`
	tests := []struct {
		name     string
		running  int // 0: no pool; 1: pool serving /v1/config; 2: older pool without it
		file     string
		want     string
		wantErr  bool
		fileName string
	}{
		{name: "invalid", file: `{"mcpServers": {"memory": {"command": "npx", "idleTimeout": "10 minutes", "env": {"K": "${SB_TEST_UNSET}"}}}, "history": {"retainDays": -3}}`,
			want: `$FILE: 3 problems:
  mcpServers.memory.env.K: environment variable SB_TEST_UNSET is not set
  mcpServers.memory.idleTimeout: "10 minutes" is not a duration (try "10m")
  history.retainDays: -3 is negative
(${VAR} references were checked against this shell's environment; Switchboard expands them from its own.)
`, wantErr: true},
		{name: "invalid with a pool running", running: 1, file: `{"mcpServers": {"m": }}`,
			want: `$FILE: 1 problem:
  line 1, column 22: unexpected '}'
The running Switchboard keeps its last good config until this file is fixed.
`, wantErr: true},
		{name: "valid, no pool", file: edited, want: `$FILE: valid, 3 servers (memory, new, slow)
  remote (URL) servers, not pooled: linear
  unknown field, kept but not used: mcpServers.slow.idleTimout
No Switchboard is running; nothing to compare with.
`},
		{name: "valid, diffed against the running config", running: 1, file: edited, want: `$FILE: valid, 3 servers (memory, new, slow)
  remote (URL) servers, not pooled: linear
  unknown field, kept but not used: mcpServers.slow.idleTimout
Compared with the running Switchboard (pid $PID, its running config from $HOME/config.json):
  + new: new server
  - old: removed; takes no new sessions, finishes what is in flight, then stops
  ~ memory: args changed; new child for new requests; the old one finishes what is in flight
  ~ slow: idleTimeout changed; applies at once, the child keeps running
  settings changed: hangThreshold
`},
		{name: "older pool: diffed against its file", running: 2, file: edited, want: `$FILE: valid, 3 servers (memory, new, slow)
  remote (URL) servers, not pooled: linear
  unknown field, kept but not used: mcpServers.slow.idleTimout
Compared with the running Switchboard (pid $PID, its config file $HOME/config.json as it is on disk now):
  + new: new server
  - old: removed; takes no new sessions, finishes what is in flight, then stops
  ~ memory: args changed; new child for new requests; the old one finishes what is in flight
  ~ slow: idleTimeout changed; applies at once, the child keeps running
  settings changed: hangThreshold
`},
		{name: "default file is the running one", running: 1, want: `$HOME/config.json: valid, 3 servers (memory, old, slow)
Compared with the running Switchboard (pid $PID, its running config from $HOME/config.json):
  no changes (3 servers unchanged)
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := sbHome(t)
			home := filepath.Dir(paths.Config)
			if tt.running > 0 {
				fakeRunning(t, paths, runningConfig1, tt.running == 1)
			}
			file := ""
			if tt.file != "" {
				file = filepath.Join(t.TempDir(), "edited.json")
				os.WriteFile(file, []byte(tt.file), 0o600)
			}
			var out bytes.Buffer
			err := CheckConfig(context.Background(), file, &out)
			if tt.wantErr != errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error = %v, want ErrInvalidConfig: %v", err, tt.wantErr)
			}
			if !tt.wantErr && err != nil {
				t.Fatal(err)
			}
			got := out.String()
			if file != "" {
				got = strings.ReplaceAll(got, file, "$FILE")
			}
			got = strings.ReplaceAll(got, home, "$HOME")
			got = strings.ReplaceAll(got, "pid "+strconv.Itoa(os.Getpid()), "pid $PID")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckConfigMissing(t *testing.T) {
	sbHome(t)
	err := CheckConfig(context.Background(), "", &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no config at ") {
		t.Errorf("error = %v", err)
	}
}

// TestServeConfigRoundTrip: what GET /v1/config serves decodes to the
// running config, unknown fields and all.
func TestServeConfigRoundTrip(t *testing.T) {
	paths := sbHome(t)
	in := `{"mcpServers": {"m": {"command": "x", "envFile": ".env", "restart": {"maxRestarts": 2, "window": "10s"}}}, "http": {"listen": "127.0.0.1:7777"}, "custom": [1, 2]}`
	fakeRunning(t, paths, in, true)
	var got config.File
	c, err := Control()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Config(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	want, _ := config.Decode([]byte(in))
	compact := cmp.Transformer("compact", func(r json.RawMessage) string {
		var b bytes.Buffer
		json.Compact(&b, r)
		return b.String()
	})
	if diff := cmp.Diff(want, &got, compact); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestImportCommand(t *testing.T) {
	paths := sbHome(t)
	client := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	os.WriteFile(client, []byte(`{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}`), 0o644)
	var out bytes.Buffer
	err := Import(context.Background(), ImportOptions{From: "claude-desktop", File: client}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Added 1 server to "+paths.Config+": time.") {
		t.Errorf("output:\n%s", out.String())
	}
	f, err := config.Load(paths.Config)
	if err != nil {
		t.Fatal(err)
	}
	if s := f.Servers["time"]; s.Command != "uvx" {
		t.Errorf("imported entry = %+v", s)
	}
	if err := Import(context.Background(), ImportOptions{From: "zed"}, &out); err == nil {
		t.Error("--from zed was accepted")
	}
}
