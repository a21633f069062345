package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

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
	diff := config.DiffResult{Added: []string{"new"}, Removed: []string{"old"},
		Changed:  []config.Change{{Name: "memory", Fields: []string{"args"}, Restarts: true}, {Name: "slow", Fields: []string{"idleTimeout"}}},
		Settings: []string{"hangThreshold"}}
	tests := []struct {
		name    string
		running int // 0: no pool; 1: pool serving /v1/config; 2: older pool without it
		file    string
		want    ConfigCheck // File "$FILE" is the edited file, "$HOME" the home
		wantErr bool
	}{
		{name: "invalid", file: `{"mcpServers": {"memory": {"command": "npx", "idleTimeout": "10 minutes", "env": {"K": "${SB_TEST_UNSET}"}}}, "history": {"retainDays": -3}}`,
			want: ConfigCheck{File: "$FILE", Problems: []config.Problem{
				{Field: "mcpServers.memory.idleTimeout", Msg: `"10 minutes" is not a duration (try "10m")`},
				{Field: "history.retainDays", Msg: "-3 is negative"}}},
			wantErr: true},
		// An unset variable keeps its server from starting, not the file
		// from loading: a warning about that server.
		{name: "unset variable", file: `{"mcpServers": {"memory": {"command": "npx"}, "gh": {"command": "npx", "env": {"K": "${SB_TEST_UNSET}"}}}}`,
			want: ConfigCheck{File: "$FILE", EnvChecked: true, Servers: []string{"gh", "memory"}, NotStarted: []config.Problem{
				{Field: "mcpServers.gh.env.K", Msg: "environment variable SB_TEST_UNSET is not set; the server is not started"}}}},
		// A cwd that does not exist keeps its server from starting: a
		// warning, since the directory may be made before it starts.
		{name: "missing cwd", file: `{"mcpServers": {"memory": {"command": "npx", "cwd": "/nonexistent-sb-dir/x"}, "off": {"command": "npx", "cwd": "/nonexistent-sb-dir/y", "disabled": true}}}`,
			want: ConfigCheck{File: "$FILE", Servers: []string{"memory", "off"}, Warnings: []config.Problem{
				{Field: "mcpServers.memory.cwd", Msg: "directory /nonexistent-sb-dir/x does not exist; the server cannot start until it does"}}}},
		{name: "invalid with a pool running", running: 1, file: `{"mcpServers": {"m": }}`,
			want: ConfigCheck{File: "$FILE", Problems: []config.Problem{{Msg: "line 1, column 22: unexpected '}'"}},
				Running: &RunningConfig{PID: -1}},
			wantErr: true},
		{name: "valid, no pool", file: edited, want: ConfigCheck{File: "$FILE", Servers: []string{"memory", "new", "slow"},
			Remote: []string{"linear"}, Unknown: []string{"mcpServers.slow.idleTimout"}}},
		{name: "valid, diffed against the running config", running: 1, file: edited,
			want: ConfigCheck{File: "$FILE", Servers: []string{"memory", "new", "slow"}, Remote: []string{"linear"},
				Unknown: []string{"mcpServers.slow.idleTimout"},
				Running: &RunningConfig{PID: -1, Source: "its running config from $HOME/config.json", Diff: diff}}},
		{name: "older pool: diffed against its file", running: 2, file: edited,
			want: ConfigCheck{File: "$FILE", Servers: []string{"memory", "new", "slow"}, Remote: []string{"linear"},
				Unknown: []string{"mcpServers.slow.idleTimout"},
				Running: &RunningConfig{PID: -1, Source: "its config file $HOME/config.json as it is on disk now", Diff: diff}}},
		{name: "default file is the running one", running: 1,
			want: ConfigCheck{File: "$HOME/config.json", Servers: []string{"memory", "old", "slow"},
				Running: &RunningConfig{PID: -1, Source: "its running config from $HOME/config.json", RunsFile: true,
					Diff: config.DiffResult{Unchanged: []string{"memory", "old", "slow"}}}}},
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
			got, err := CheckConfig(context.Background(), file)
			if tt.wantErr != errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error = %v, want ErrInvalidConfig: %v", err, tt.wantErr)
			}
			if !tt.wantErr && err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.File = strings.NewReplacer("$FILE", file, "$HOME", home).Replace(want.File)
			if want.Running != nil {
				r := *want.Running
				r.PID = os.Getpid()
				r.Source = strings.ReplaceAll(r.Source, "$HOME", home)
				want.Running = &r
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("check (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckConfigMissing(t *testing.T) {
	sbHome(t)
	_, err := CheckConfig(context.Background(), "")
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
	res, err := Import(context.Background(), ImportOptions{From: "claude-desktop", File: client})
	if err != nil {
		t.Fatal(err)
	}
	if res.Config != paths.Config || !slices.Equal(res.Added, []string{"time"}) {
		t.Errorf("import: config %s, added %v", res.Config, res.Added)
	}
	f, err := config.Load(paths.Config)
	if err != nil {
		t.Fatal(err)
	}
	if s := f.Servers["time"]; s.Command != "uvx" {
		t.Errorf("imported entry = %+v", s)
	}
	if _, err := Import(context.Background(), ImportOptions{From: "zed"}); err == nil {
		t.Error("--from zed was accepted")
	}
}

// A pool runs here with another config than the one this environment
// places (started with --config, say). import --rewrite-client would pin
// this environment into the client's entries, which, once that pool
// stops, start a pool of the other config, without the servers: it
// refuses as setup does, naming both configs, and writes nothing.
func TestImportRewriteRefusesAnotherPoolsConfig(t *testing.T) {
	paths := sbHome(t)
	other := paths
	other.Config = filepath.Join(filepath.Dir(paths.Config), "other.json")
	fakeRunning(t, other, `{"mcpServers": {}}`, true)
	client := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	orig := `{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}`
	if err := os.WriteFile(client, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Import(context.Background(), ImportOptions{From: "claude-desktop", File: client, RewriteClient: true})
	if err == nil || !strings.Contains(err.Error(), other.Config) || !strings.Contains(err.Error(), paths.Config) ||
		!strings.Contains(err.Error(), "run import --rewrite-client with") {
		t.Fatalf("import --rewrite-client: %v", err)
	}
	if data, _ := os.ReadFile(client); string(data) != orig {
		t.Errorf("the client file was rewritten:\n%s", data)
	}
	if data, _ := os.ReadFile(other.Config); string(data) != `{"mcpServers": {}}` {
		t.Errorf("the running pool's config was written:\n%s", data)
	}
}

// import --rewrite-client --config OTHER would add the servers to OTHER
// but pin this environment, whose pool reads another config, into the
// client's entries: they would reach a pool without the servers. It
// refuses, naming both configs, and writes nothing.
func TestImportRewriteRefusesAnotherConfig(t *testing.T) {
	paths := sbHome(t)
	other := filepath.Join(t.TempDir(), "other.json")
	client := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	orig := `{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}`
	if err := os.WriteFile(client, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Import(context.Background(), ImportOptions{From: "claude-desktop", File: client, Config: other, RewriteClient: true})
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), paths.Config) ||
		!strings.Contains(err.Error(), "without --rewrite-client") {
		t.Fatalf("import --rewrite-client --config %s: %v", other, err)
	}
	if data, _ := os.ReadFile(client); string(data) != orig {
		t.Errorf("the client file was rewritten:\n%s", data)
	}
	if _, err := os.Stat(other); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s was written (%v)", other, err)
	}
}

// TestConnectShim: setup points Windows clients at switchboard-connect.exe
// beside the binary when it is there; elsewhere `switchboard connect`
// becomes the shim by itself.
func TestConnectShim(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "switchboard.exe")
	lone := filepath.Join(t.TempDir(), "switchboard.exe")
	for _, f := range []string{exe, lone, filepath.Join(dir, "switchboard-connect.exe")} {
		if err := os.WriteFile(f, []byte("MZ"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ goos, exe, want string }{
		{"windows", exe, filepath.Join(dir, "switchboard-connect.exe")},
		{"windows", lone, ""},
		{"linux", exe, ""},
		{"darwin", exe, ""},
	} {
		if got := connectShim(tc.goos, tc.exe); got != tc.want {
			t.Errorf("connectShim(%s, %s) = %q, want %q", tc.goos, tc.exe, got, tc.want)
		}
	}
}

// TestHTTPOverrideIsNoChange: in a pool started with --http, http.listen
// is the override's, whatever the file says: `config check` of the file
// it runs and its reloads name no http.listen change, as status names no
// restart needed. On the first edition both compared the file's
// http.listen with the override and reported "http.listen" every time.
func TestHTTPOverrideIsNoChange(t *testing.T) {
	paths := sbHome(t)
	if err := os.WriteFile(paths.Config, configWith(t, map[string][]string{"a": nil},
		map[string]any{"http": map[string]any{"listen": "127.0.0.1:1"}}), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, logs := startIn(t, Options{HTTPListen: "127.0.0.1:0"})
	runInstance(t, inst)
	eventually(t, 5*time.Second, "the control API answers", func() bool {
		_, err := FetchStatus(context.Background())
		return err == nil
	})
	chk, err := CheckConfig(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if chk.Running == nil || chk.Running.ReadErr != nil || !chk.Running.Diff.Empty() {
		t.Fatalf("config check of the running file: %+v, want no changes", chk.Running)
	}
	if err := config.WriteFile(paths.Config, fakeServers(t, "a", "b"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The reload logs its changes after the pool has them: wait for the
	// line, not for the servers.
	want := `changes="added: b; unchanged: 1"`
	eventually(t, 5*time.Second, "the reload's log line "+want, func() bool {
		return strings.Contains(logs.String(), want)
	})
	if !slices.Equal(inst.Pool.Servers(), []string{"a", "b"}) {
		t.Errorf("servers %q after the reload, want a and b", inst.Pool.Servers())
	}
	if st := inst.Status(); len(st.RestartNeeded) != 0 || st.HTTPListen != "127.0.0.1:0" {
		t.Errorf("status restartNeeded %q, httpListen %q; want none, and the override", st.RestartNeeded, st.HTTPListen)
	}
}

// TestDefaultsSpelledOutAreNoChange: a config that writes out settings at
// their default values runs as the one that leaves them out: `config
// check` shows no change, the reload's log line names none, and no
// setting waits for a restart. On the first edition `config check` said
// "~ a: idleTimeout, requestTimeout changed" and the reload listed
// history.retainDays as waiting for a restart, for a removed
// "retainDays": 14.
func TestDefaultsSpelledOutAreNoChange(t *testing.T) {
	paths := sbHome(t)
	bin, err := fakeBin()
	if err != nil {
		t.Fatal(err)
	}
	write := func(servers map[string]any, top map[string]any) {
		t.Helper()
		m := map[string]any{"mcpServers": servers}
		maps.Copy(m, top)
		b, _ := json.MarshalIndent(m, "", "  ")
		if err := config.WriteFile(paths.Config, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]any{"a": map[string]any{"command": bin}}, map[string]any{"history": map[string]any{"retainDays": 14}})
	inst, logs := startIn(t, Options{})
	runInstance(t, inst)
	eventually(t, 5*time.Second, "the control API answers", func() bool {
		_, err := FetchStatus(context.Background())
		return err == nil
	})
	spelled := map[string]any{"command": bin, "idleTimeout": "10m", "requestTimeout": "120s", "restart": map[string]any{"maxRestarts": 5}}
	defaults := map[string]any{"hangThreshold": "30s", "evictSlowClientsAfter": "30s", "maxChildrenPerServer": 32}
	write(map[string]any{"a": spelled}, defaults)
	chk, err := CheckConfig(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if chk.Running == nil || chk.Running.ReadErr != nil || !chk.Running.Diff.Empty() {
		t.Errorf("config check of the defaults written out: %+v, want no changes", chk.Running)
	}
	write(map[string]any{"a": spelled, "b": map[string]any{"command": bin}}, defaults)
	want := `changes="added: b; unchanged: 1"` // logged after the pool has the edit
	eventually(t, 5*time.Second, "the reload's log line "+want, func() bool {
		return strings.Contains(logs.String(), want)
	})
	if st := inst.Status(); len(st.RestartNeeded) != 0 {
		t.Errorf("status restartNeeded %q, want none", st.RestartNeeded)
	}
}

// With no pool running, config check, and status --json's config, name
// the file the next pool would run: the one the last pool ran, recorded
// in the home (a `serve --config FILE` that has stopped), not the
// default file, which that pool would not read.
func TestNoPoolMeansTheRecordedConfig(t *testing.T) {
	paths := sbHome(t)
	other := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(other, []byte(`{"mcpServers": {"b": {"command": "x"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths.ConfigRecordFile(), []byte(other+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	chk, err := CheckConfig(context.Background(), "")
	if err != nil || chk.File != other || !slices.Equal(chk.Servers, []string{"b"}) {
		t.Errorf("config check with no pool: %+v, %v; want %s checked", chk, err, other)
	}
	if got := NoPoolStatus(paths).Config; got != other {
		t.Errorf("status --json with no pool names %s, want %s", got, other)
	}
}

// TestImportDryRunWritesNothing: `import --dry-run`, with or without
// --rewrite-client, into a Switchboard home that does not exist yet
// creates nothing: not the home, nor the run directory for the edit lock,
// nor a backup of the client's file.
func TestImportDryRunWritesNothing(t *testing.T) {
	base, err := os.MkdirTemp("", "sb") // short enough for sockets
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	fresh := []string{filepath.Join(base, "h"), filepath.Join(base, "config"), filepath.Join(base, "state")}
	t.Setenv("SWITCHBOARD_HOME", fresh[0])
	t.Setenv("XDG_CONFIG_HOME", fresh[1])
	t.Setenv("XDG_STATE_HOME", fresh[2])
	clientDir := t.TempDir()
	t.Setenv("HOME", clientDir)
	client := filepath.Join(clientDir, "claude_desktop_config.json")
	orig := `{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}`
	if err := os.WriteFile(client, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, rewrite := range []bool{false, true} {
		res, err := Import(context.Background(), ImportOptions{From: "claude-desktop", File: client, DryRun: true, RewriteClient: rewrite})
		if err != nil {
			t.Fatalf("import --dry-run (rewrite %v): %v", rewrite, err)
		}
		if !slices.Equal(res.Added, []string{"time"}) {
			t.Errorf("import --dry-run (rewrite %v) would add %v", rewrite, res.Added)
		}
		for _, dir := range fresh {
			if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("import --dry-run (rewrite %v) made %s (%v)", rewrite, dir, err)
			}
		}
		if ents, err := os.ReadDir(clientDir); err != nil || len(ents) != 1 {
			t.Errorf("import --dry-run (rewrite %v) wrote next to the client's file: %v, %v", rewrite, ents, err)
		}
		if data, _ := os.ReadFile(client); string(data) != orig {
			t.Errorf("import --dry-run (rewrite %v) rewrote the client's file:\n%s", rewrite, data)
		}
	}
}
