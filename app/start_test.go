package app

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/importer"
	"github.com/switchboard-mcp/switchboard/store"
)

// startIn starts an instance on the home paths (sbHome), with its log
// in logs, and stops it when the test ends unless it runs (runInstance).
func startIn(t *testing.T, opts Options) (*Instance, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	inst, err := Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return inst, logs
}

// runInstance runs inst until the test ends.
func runInstance(t *testing.T, inst *Instance) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- inst.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// fakeServers is a config running the fake server under each name.
func fakeServers(t *testing.T, names ...string) []byte {
	t.Helper()
	m := map[string][]string{}
	for _, n := range names {
		m[n] = nil
	}
	return fakeConfig(t, m)
}

// TestStartWithABrokenConfig: a pool whose config file is broken when it
// starts (a restart, or a client starting it, after a bad edit) starts all
// the same, with no servers, and reports the error as a running pool does
// when its file breaks (status's configError, the tray); the fixed file
// is then applied by hot reload. On the first edition Start failed: the
// pool exited, and every client's connect started another, in a loop.
func TestStartWithABrokenConfig(t *testing.T) {
	paths := sbHome(t)
	if err := os.WriteFile(paths.Config, []byte(`{"mcpServers": {"a": {"command": `), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, logs := startIn(t, Options{})
	const want = "unexpected end of the file"
	if err := inst.ConfigError(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("ConfigError = %v, want %q", err, want)
	}
	if st := inst.Status(); st.ConfigError == nil || !strings.Contains(*st.ConfigError, want) {
		t.Fatalf("status configError = %v", st.ConfigError)
	}
	if got := inst.Pool.Servers(); len(got) != 0 {
		t.Fatalf("servers %v, want none", got)
	}
	if !strings.Contains(logs.String(), "config not applied") {
		t.Errorf("the log does not say so:\n%s", logs.String())
	}
	runInstance(t, inst)
	if err := config.WriteFile(paths.Config, fakeServers(t, "a"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the fixed file applied", func() bool {
		return slices.Equal(inst.Pool.Servers(), []string{"a"}) && inst.ConfigError() == nil
	})
}

// TestUpgradeWithABrokenConfigKeepsTheRunningConfig: the program an
// upgrade starts (or a restart that hands over) with a config file that
// broke meanwhile runs the config the earlier program ran, handed over
// with the children, and reports the file's error. On the first edition
// it exited: the children carried over died with it.
func TestUpgradeWithABrokenConfigKeepsTheRunningConfig(t *testing.T) {
	paths := sbHome(t)
	running := fakeServers(t, "a", "b")
	if err := os.WriteFile(paths.Config, []byte(`{"mcpServers": {"a": {"command": "x", "idleTimeout": "10 minutes"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// What an earlier program (this format) hands over: its running
	// config, no lock descriptor (it lets the lock go as it exits), no
	// children.
	hf, _ := json.Marshal(map[string]any{"format": HandoverFormat, "from": map[string]string{"version": "0.0.1"}, "lockFD": -1, "config": running})
	hpath := filepath.Join(paths.Run, "handover-test.json")
	if err := os.WriteFile(hpath, hf, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(HandoverEnv, hpath)
	inst, _ := startIn(t, Options{})
	if got := inst.Pool.Servers(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("servers %v, want the handed-over a, b", got)
	}
	const want = `mcpServers.a.idleTimeout: "10 minutes" is not a duration`
	if err := inst.ConfigError(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("ConfigError = %v, want %q", err, want)
	}
	if inst.upgraded == nil || inst.upgraded.From.Version != "0.0.1" {
		t.Fatalf("upgraded = %+v", inst.upgraded)
	}
	runInstance(t, inst)
	// Fixed: applied, as any reload.
	if err := config.WriteFile(paths.Config, fakeServers(t, "a"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the fixed file applied", func() bool {
		return slices.Equal(inst.Pool.Servers(), []string{"a"}) && inst.ConfigError() == nil
	})
}

// TestEditBetweenStartAndRunIsApplied: the config the watcher compares
// edits with is the one Start loaded, so an edit saved between Start and
// Run is applied. On the first edition the watcher took the file as it
// was when Run began, and that edit waited for the next one.
func TestEditBetweenStartAndRunIsApplied(t *testing.T) {
	paths := sbHome(t)
	if err := os.WriteFile(paths.Config, fakeServers(t, "a"), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, _ := startIn(t, Options{})
	if got := inst.Pool.Servers(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("servers at start: %v", got)
	}
	if err := config.WriteFile(paths.Config, fakeServers(t, "a", "b"), 0o600); err != nil {
		t.Fatal(err)
	}
	runInstance(t, inst)
	eventually(t, 5*time.Second, "the edit made before Run applied", func() bool {
		return slices.Equal(inst.Pool.Servers(), []string{"a", "b"})
	})
}

// TestStarterConfigIsWrittenWhole: a reader (a client starting, the
// watcher) never sees the starter config half written or empty.
func TestStarterConfigIsWrittenWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "switchboard", "config.json")
	var stop atomic.Bool
	var partial atomic.Value
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			data, err := os.ReadFile(path)
			if err == nil && string(data) != config.Starter {
				partial.Store(fmt.Sprintf("%d of %d bytes", len(data), len(config.Starter)))
			}
		}
	})
	for range 300 {
		if err := writeStarterConfig(path, true); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if p := partial.Load(); p != nil {
		t.Fatalf("a reader saw the starter config partly written: %s", p)
	}
	if err := writeStarterConfig(path, true); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("starter config: %v, %v", fi.Mode(), err)
	}
}

// runFrontDoor runs an instance serving the fake server "a" with its HTTP
// front door on a loopback port, and returns it and the port's address.
func runFrontDoor(t *testing.T) (*Instance, string) {
	t.Helper()
	return runFrontDoorWith(t, fakeServers(t, "a"))
}

// runFrontDoorWith is runFrontDoor with the config cfg.
func runFrontDoorWith(t *testing.T, cfg []byte) (*Instance, string) {
	t.Helper()
	paths := sbHome(t)
	if err := os.WriteFile(paths.Config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	inst, _ := startIn(t, Options{HTTPListen: "127.0.0.1:0"})
	runInstance(t, inst)
	var addr string
	eventually(t, 5*time.Second, "the front door listening", func() bool {
		if st := inst.Status(); st.HTTP != nil {
			addr = st.HTTP.Listen
		}
		return addr != ""
	})
	return inst, addr
}

// TestFrontDoorClosesIdleConnections: a keep-alive connection left idle
// on the HTTP front door (a client without the token, say) is closed
// after the idle timeout, instead of holding a goroutine and a descriptor
// for ever.
func TestFrontDoorClosesIdleConnections(t *testing.T) {
	old := frontDoorIdleTimeout
	frontDoorIdleTimeout = 200 * time.Millisecond
	t.Cleanup(func() { frontDoorIdleTimeout = old })
	inst, addr := runFrontDoor(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	fmt.Fprintf(conn, "POST /mcp/a HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
		addr, inst.currentToken(), len(initialize), initialize)
	br := bufio.NewReader(conn)
	resp := readAnswer(t, conn, br, 10*time.Second, "initialize")
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("initialize: %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("the idle connection: %v, want it closed by the front door", err)
	}
}

// TestFrontDoorBoundsItsConnections: any local process can open
// connections to the front door, and each took one of the pool's file
// descriptors, without bound: a flood of them left none for the stdio
// sessions, new children or the history. Past frontDoorMaxConns a
// connection waits unaccepted until one closes.
func TestFrontDoorBoundsItsConnections(t *testing.T) {
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		t.Skip("needs /proc/self/fd to count descriptors:", err)
	}
	old := frontDoorMaxConns
	frontDoorMaxConns = 8
	t.Cleanup(func() { frontDoorMaxConns = old })
	_, addr := runFrontDoor(t)
	floodIsBounded(t, "the front door", frontDoorMaxConns, func() (net.Conn, error) {
		return net.Dial("tcp", addr) // the kernel completes the handshake, accepted or not
	})
	// Once they are gone, a client is served.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/mcp/a", nil)
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("after the flood ended: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after the flood ended: %d, want 401", resp.StatusCode)
	}
}

// TestFrontDoorRefusesLargeHeaders: the front door reads a request's
// headers before it can check the token, so any local process could make
// it hold up to net/http's default of 1 MB per connection (a flood of 2000
// unfinished ones took 1.1 GB). Headers past frontDoorMaxHeaderBytes are
// refused with 431 instead.
func TestFrontDoorRefusesLargeHeaders(t *testing.T) {
	_, addr := runFrontDoor(t)
	for _, tc := range []struct {
		size int
		want int
	}{
		{size: frontDoorMaxHeaderBytes / 2, want: http.StatusUnauthorized}, // read whole, then refused for want of a token
		{size: 2 * frontDoorMaxHeaderBytes, want: http.StatusRequestHeaderFieldsTooLarge},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /mcp/a HTTP/1.1\r\nHost: %s\r\nX-Pad: %s\r\n\r\n", addr, strings.Repeat("x", tc.size))
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			conn.Close()
			t.Fatalf("a header of %d bytes: %v", tc.size, err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("a header of %d bytes: %d, want %d", tc.size, resp.StatusCode, tc.want)
		}
	}
}

// TestUnsetVariableStopsOnlyItsServer: a pool started at login lacks the
// shell's exports. A server whose ${VAR} is not set then is not started,
// and status and the tray say why; the file is not rejected, so every
// other server runs, at start and on reload. On the first edition the
// whole file was rejected: after a restart no server ran at all.
func TestUnsetVariableStopsOnlyItsServer(t *testing.T) {
	paths := sbHome(t)
	write := func(names ...string) {
		t.Helper()
		servers := map[string][]string{"gh": {"--token", "${SB_TEST_UNSET_TOKEN}"}}
		for _, n := range names {
			servers[n] = nil
		}
		if err := config.WriteFile(paths.Config, fakeConfig(t, servers), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var inst *Instance
	const why = "mcpServers.gh.args[1]: environment variable SB_TEST_UNSET_TOKEN is not set; the server is not started"
	check := func(running ...string) {
		t.Helper()
		if err := inst.ConfigError(); err != nil {
			t.Fatalf("ConfigError = %v, want none", err)
		}
		got := map[string]string{}
		for _, sv := range inst.Status().Servers {
			got[sv.Name] = sv.State + ": " + sv.Error
		}
		want := map[string]string{"gh": "disabled: " + why}
		for _, n := range running {
			want[n] = got[n]
			if strings.HasPrefix(got[n], "disabled") {
				t.Errorf("%s is disabled", n)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("status servers (-want +got):\n%s", diff)
		}
		tray := (&trayController{inst: inst}).Snapshot()
		for _, sv := range tray.Servers {
			if sv.Name == "gh" && sv.Error != why {
				t.Errorf("the tray's gh error = %q, want %q", sv.Error, why)
			}
		}
	}
	write("a")
	var logs *syncBuffer
	inst, logs = startIn(t, Options{})
	check("a")
	if !strings.Contains(logs.String(), "server not started") || strings.Contains(logs.String(), "config not applied") {
		t.Errorf("the log:\n%s", logs.String())
	}
	runInstance(t, inst)
	write("a", "b")
	eventually(t, 5*time.Second, "the new file applied", func() bool {
		return slices.Equal(inst.Pool.Servers(), []string{"a", "b", "gh"})
	})
	check("a", "b")
	// Said once: a reload of a file that still holds it back for the
	// same reason does not say it again (it did, at every reload).
	if n := strings.Count(logs.String(), "server not started"); n != 1 {
		t.Errorf("the log says %d times that gh is not started, want once:\n%s", n, logs.String())
	}
	// A client of it is told why, not that it is disabled: the user did
	// not disable it.
	if got, want := refusal(t, inst.Paths.PoolSocket(), "gh"), `server "gh" is not started: mcpServers.gh.args[1]: environment variable SB_TEST_UNSET_TOKEN is not set`; got != want {
		t.Errorf("a session of gh is refused with %q, want %q", got, want)
	}
}

// refusal is the error of the pool's Welcome to a session of server.
func refusal(t *testing.T, sock, server string) string {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "{\"server\":%q}\n", server)
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		t.Fatalf("hello %s: %v", server, err)
	}
	var w struct{ Error string }
	if err := json.Unmarshal(line, &w); err != nil {
		t.Fatalf("hello %s: %s", server, line)
	}
	return w.Error
}

// TestUnsetVariableOfADottedServer: server names may hold '.'. A dotted
// server with an unset ${VAR} is shown disabled with the reason, and a
// server whose name is its first part, disabled by the user, is shown
// with none. On the first edition the reason was filed under the name up
// to the first '.' of the field path ("mcpServers.my.db.args[1]": "my").
func TestUnsetVariableOfADottedServer(t *testing.T) {
	paths := sbHome(t)
	data := fakeConfig(t, map[string][]string{"my.db": {"--token", "${SB_TEST_UNSET_TOKEN}"}, "my": nil})
	data = []byte(strings.Replace(string(data), `"my": {`, `"my": {"disabled": true, `, 1))
	if err := config.WriteFile(paths.Config, data, 0o600); err != nil {
		t.Fatal(err)
	}
	inst, _ := startIn(t, Options{})
	runInstance(t, inst)
	got := map[string]string{}
	for _, sv := range inst.Status().Servers {
		got[sv.Name] = sv.State + ": " + sv.Error
	}
	want := map[string]string{"my": "disabled: ",
		"my.db": "disabled: mcpServers.my.db.args[1]: environment variable SB_TEST_UNSET_TOKEN is not set; the server is not started"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status servers (-want +got):\n%s", diff)
	}
}

// configWith is fakeConfig's config with the top-level settings of extra.
func configWith(t *testing.T, servers map[string][]string, extra map[string]any) []byte {
	t.Helper()
	m := map[string]any{}
	if err := json.Unmarshal(fakeConfig(t, servers), &m); err != nil {
		t.Fatal(err)
	}
	maps.Copy(m, extra)
	b, _ := json.MarshalIndent(m, "", "  ")
	return b
}

// stopInstance runs inst, once serving, until stop is called, which ends
// the run and waits for it (the history then holds all it was given).
func stopInstance(t *testing.T, inst *Instance) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- inst.Run(ctx) }()
	eventually(t, 5*time.Second, "the control API answers", func() bool {
		_, err := FetchStatus(context.Background())
		return err == nil
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// recordedIDs lists the original ids of the requests the history holds,
// oldest first.
func recordedIDs(t *testing.T) []string {
	t.Helper()
	entries, _, err := History(context.Background(), HistoryQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range slices.Backward(entries) {
		ids = append(ids, e.OriginalID+" "+e.Status)
	}
	return ids
}

// TestBrokenStartRecordsNoHistory: a pool that starts while its file is
// broken, its history section too (here maxRows), with nothing handed
// over, does not know whether the file switches history off: it records
// no request until a config loads, and says so. Once the file is fixed,
// history follows it at once, off or on; the other settings read only at
// start are listed as waiting for a restart, and an upgrade hands over no
// config while none has loaded. On the first edition the pool ran an
// empty config with history on, and kept recording, also after the file
// (with "history": {"disabled": true}) was fixed.
func TestBrokenStartRecordsNoHistory(t *testing.T) {
	paths := sbHome(t)
	broken := `{"history": {"disabled": true, "maxRows": "many"}, "hangThreshold": "30 seconds", "mcpServers": {}}`
	if err := os.WriteFile(paths.Config, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, logs := startIn(t, Options{})
	if inst.ConfigError() == nil {
		t.Fatal("the file should not load")
	}
	if h := inst.Status().History; h.Enabled || h.Error == nil || !strings.Contains(*h.Error, "until the config file loads") {
		t.Errorf("history status %+v, want off until the config file loads", h)
	}
	if !strings.Contains(logs.String(), "no request history") {
		t.Errorf("the log does not say history is off:\n%s", logs.String())
	}
	if hf := inst.handOverConfig(); hf != nil {
		t.Errorf("an upgrade would hand over %s, although no config has loaded", hf)
	}
	stop := stopInstance(t, inst)
	servers := map[string][]string{"a": nil}
	off := configWith(t, servers, map[string]any{"history": map[string]any{"disabled": true}, "http": map[string]any{"listen": "127.0.0.1:0"}})
	if err := config.WriteFile(paths.Config, off, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the fixed file applied", func() bool {
		return inst.ConfigError() == nil && slices.Contains(inst.Pool.Servers(), "a")
	})
	st := inst.Status()
	if st.History.Enabled || st.History.Error != nil {
		t.Errorf("history status %+v, want off as the config says", st.History)
	}
	if want := []string{"http.listen"}; !slices.Equal(st.RestartNeeded, want) {
		t.Errorf("restartNeeded %q, want %q", st.RestartNeeded, want)
	}
	if st.HTTP != nil {
		t.Errorf("the front door listens (%+v) before a restart", st.HTTP)
	}
	if inst.handOverConfig() == nil {
		t.Error("an upgrade would hand over no config, although the fixed one runs")
	}
	c := dialSession(t, inst.Paths.PoolSocket(), "a") // initialize: id 1
	c.pid()                                           // 2
	if err := config.WriteFile(paths.Config, fakeConfig(t, servers), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "history switched on, and the log saying so", func() bool {
		return inst.Status().History.Enabled && strings.Contains(logs.String(), "request history switched on")
	})
	// The file's retention and row cap apply at once
	// (TestHistoryLimitsApplyLive): nothing waits for a restart.
	if st := inst.Status(); len(st.RestartNeeded) != 0 {
		t.Errorf("restartNeeded %q, want none", st.RestartNeeded)
	}
	c.pid() // 3
	c.close()
	stop()
	if got, want := recordedIDs(t), []string{"3 ok"}; !slices.Equal(got, want) {
		t.Errorf("the history holds %q, want %q: only what came once the file switched history on", got, want)
	}
}

// TestHistoryLimitsApplyLive: a reload that sets history.maxRows and
// history.retainDays applies them at once, to a pool that started with a
// broken file (which kept every row, not knowing the file's limits) as
// to one that started with a good file: the history comes down to the
// new cap without a restart, and neither setting waits for one. Until
// then both waited for a restart, and a pool that started with a broken
// file ran its history uncapped until it restarted. A database another
// program held locked at the reload takes them once it opens.
func TestHistoryLimitsApplyLive(t *testing.T) {
	for _, tc := range []struct {
		name, start string
		locked      bool // the database is locked until the reload is applied
	}{
		{"broken start", `{"history": {"maxRows": "many"}, "mcpServers": {}}`, false},
		{"reload", `{"mcpServers": {}}`, false},
		{"reload while the database is locked", `{"mcpServers": {}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths := sbHome(t)
			if err := os.WriteFile(paths.Config, []byte(tc.start), 0o600); err != nil {
				t.Fatal(err)
			}
			release := func() {}
			if tc.locked {
				st, err := store.Open(paths.History, nil) // the history of an earlier run
				if err != nil {
					t.Fatal(err)
				}
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
				release = holdHistoryLocked(t, paths.History)
			}
			inst, _ := startIn(t, Options{})
			stop := stopInstance(t, inst)
			servers := map[string][]string{"a": nil}
			capped := configWith(t, servers, map[string]any{"history": map[string]any{"maxRows": 3, "retainDays": 3}})
			if err := config.WriteFile(paths.Config, capped, 0o600); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "the capped file applied", func() bool {
				return inst.ConfigError() == nil && slices.Contains(inst.Pool.Servers(), "a")
			})
			release()
			eventually(t, 30*time.Second, "history on", func() bool { return inst.Status().History.Enabled })
			if st := inst.Status(); len(st.RestartNeeded) != 0 {
				t.Errorf("restartNeeded %q, want none: the history's limits apply at once", st.RestartNeeded)
			}
			c := dialSession(t, inst.Paths.PoolSocket(), "a") // initialize: id 1
			for range 8 {                                     // 2 to 9
				c.pid()
			}
			want := []string{"7 ok", "8 ok", "9 ok"}
			eventually(t, 5*time.Second, "the history holds the newest 3 requests", func() bool {
				return slices.Equal(recordedIDs(t), want)
			})
			c.close()
			stop()
			if got := recordedIDs(t); !slices.Equal(got, want) {
				t.Errorf("after the stop the history holds %q, want %q", got, want)
			}
		})
	}
}

// TestBrokenStartKeepsTheFilesHistory: a pool that starts while its file
// is broken elsewhere than in its history section records as that
// section says, at once: with history on, from the start and with the
// file's retention (nothing waits for a restart once the file is fixed);
// with history off, off by choice, not for want of a config. Until then
// the pool's history was off for any problem of the file, as if the file
// might switch it off.
func TestBrokenStartKeepsTheFilesHistory(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		paths := sbHome(t)
		broken := `{"history": {"retainDays": 3}, "hangThreshold": "30 seconds", "mcpServers": {}}`
		if err := os.WriteFile(paths.Config, []byte(broken), 0o600); err != nil {
			t.Fatal(err)
		}
		inst, logs := startIn(t, Options{})
		if inst.ConfigError() == nil {
			t.Fatal("the file should not load")
		}
		if h := inst.Status().History; !h.Enabled || h.Error != nil {
			t.Errorf("history status %+v, want on, as the file says", h)
		}
		if l := logs.String(); strings.Contains(l, "no request history") || !strings.Contains(l, "the request history as the file sets it") {
			t.Errorf("the log of a start with the file's history:\n%s", l)
		}
		stop := stopInstance(t, inst)
		servers := map[string][]string{"a": nil}
		fixed := configWith(t, servers, map[string]any{"history": map[string]any{"retainDays": 3}})
		if err := config.WriteFile(paths.Config, fixed, 0o600); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "the fixed file applied", func() bool {
			return inst.ConfigError() == nil && slices.Contains(inst.Pool.Servers(), "a")
		})
		if st := inst.Status(); len(st.RestartNeeded) != 0 {
			t.Errorf("restartNeeded %q, want none: the history runs as the file says", st.RestartNeeded)
		}
		c := dialSession(t, inst.Paths.PoolSocket(), "a") // initialize: id 1
		c.pid()                                           // 2
		c.close()
		stop()
		if got := recordedIDs(t); !slices.Contains(got, "2 ok") {
			t.Errorf("the history holds %q, want the call (2 ok)", got)
		}
	})
	t.Run("off", func(t *testing.T) {
		paths := sbHome(t)
		broken := `{"history": {"disabled": true}, "hangThreshold": "30 seconds", "mcpServers": {}}`
		if err := os.WriteFile(paths.Config, []byte(broken), 0o600); err != nil {
			t.Fatal(err)
		}
		inst, _ := startIn(t, Options{})
		stopInstance(t, inst)
		if h := inst.Status().History; h.Enabled || h.Error != nil {
			t.Errorf("history status %+v, want off by choice, as the file says", h)
		}
	})
}

// TestConfigInADirectoryMadeLater: `serve --config` names a file in a
// directory that does not exist yet. The pool runs with no servers and
// reports the missing file; once the directory and a good file are made,
// the file is applied. On the first edition the watch could not be set up
// and hot reload was off for good: the error and no servers stayed. On the
// next, the watcher called the file gone, "keeping the last good config",
// of a pool that never had one.
func TestConfigInADirectoryMadeLater(t *testing.T) {
	sbHome(t)
	dir := filepath.Join(t.TempDir(), "newdir")
	path := filepath.Join(dir, "config.json")
	inst, logs := startIn(t, Options{ConfigPath: path})
	missing := path + ": the config file does not exist (the pool runs with no servers until it does)"
	if err := inst.ConfigError(); err == nil || !errors.Is(err, os.ErrNotExist) || err.Error() != missing {
		t.Fatalf("ConfigError = %v, want %q", err, missing)
	}
	runInstance(t, inst)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A broken file first: the watcher reports it, and the log says what
	// runs meanwhile.
	if err := config.WriteFile(path, []byte(`{"mcpServers": `), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the watcher to report the broken file", func() bool {
		err := inst.ConfigError()
		return err != nil && strings.Contains(err.Error(), "unexpected end of the file")
	})
	if l := logs.String(); !strings.Contains(l, "config not applied; the pool runs with no servers until the file is fixed") ||
		strings.Contains(l, "last good config") {
		t.Errorf("the log of a pool that never loaded a config:\n%s", l)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the watcher to report the file missing", func() bool {
		err := inst.ConfigError()
		return err != nil && err.Error() == missing
	})
	if err := config.WriteFile(path, fakeServers(t, "a"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the new file applied", func() bool {
		return slices.Equal(inst.Pool.Servers(), []string{"a"}) && inst.ConfigError() == nil
	})
	if st := inst.Status(); st.ConfigWatchError != nil {
		t.Errorf("status configWatchError = %q", *st.ConfigWatchError)
	}
	if strings.Contains(logs.String(), "hot reload is off") {
		t.Errorf("the log says hot reload is off:\n%s", logs.String())
	}
	// Once a config ran, a file that goes keeps it running.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the watcher to report the file gone", func() bool {
		err := inst.ConfigError()
		return err != nil && err.Error() == path+": the config file is gone (keeping the last good config until it is back)"
	})
	if !slices.Equal(inst.Pool.Servers(), []string{"a"}) {
		t.Errorf("servers %v once the file is gone, want [a] kept", inst.Pool.Servers())
	}
}

// TestConfigWatchFailureIsShownAndRetried: a watch that cannot be set up
// (no inotify instance left, say) is shown in status, not only in the
// log, and tried again: once it is set up, an edit made meanwhile is
// applied and status no longer shows it. On the first edition the pool
// logged a warning and never watched the file again.
func TestConfigWatchFailureIsShownAndRetried(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	newWatcher = func() (*fsnotify.Watcher, error) {
		if fail.Load() {
			return nil, syscall.EMFILE // as fsnotify reports inotify_init1's
		}
		return fsnotify.NewWatcher()
	}
	watchRetry = 20 * time.Millisecond
	t.Cleanup(func() { newWatcher, watchRetry = fsnotify.NewWatcher, 30*time.Second })
	paths := sbHome(t)
	if err := os.WriteFile(paths.Config, fakeServers(t, "a"), 0o600); err != nil {
		t.Fatal(err)
	}
	inst, _ := startIn(t, Options{})
	runInstance(t, inst)
	eventually(t, 5*time.Second, "status to show the watch failure", func() bool {
		st := inst.Status()
		return st.ConfigWatchError != nil && strings.Contains(*st.ConfigWatchError, "too many open files")
	})
	if st := inst.Status(); runtime.GOOS == "linux" && !strings.Contains(*st.ConfigWatchError, "fs.inotify.max_user_instances") {
		t.Errorf("status configWatchError = %q, want it to say which limit to raise", *st.ConfigWatchError)
	}
	if err := config.WriteFile(paths.Config, fakeServers(t, "a", "b"), 0o600); err != nil {
		t.Fatal(err)
	}
	fail.Store(false)
	eventually(t, 5*time.Second, "the edit made while unwatched applied", func() bool {
		return slices.Equal(inst.Pool.Servers(), []string{"a", "b"})
	})
	if st := inst.Status(); st.ConfigWatchError != nil {
		t.Errorf("status configWatchError = %q once watched", *st.ConfigWatchError)
	}
}

// TestStarterConfigLeavesAnImportsConfig: a pool's first start writes
// the starter config while `import` into the same fresh home writes the
// imported server: the starter never replaces the config the import
// wrote, whichever comes first.
func TestStarterConfigLeavesAnImportsConfig(t *testing.T) {
	for i := range 300 {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "switchboard", "config.json")
		client := filepath.Join(dir, "mcp.json")
		if err := os.WriteFile(client, []byte(`{"mcpServers": {"mine": {"command": "uvx", "args": ["mine"]}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		var res *importer.Result
		var ierr, serr error
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			res, ierr = importer.Import(importer.Options{Client: importer.Cursor, File: client, Config: cfg,
				Env: importer.Env{Home: dir, Cwd: dir, GOOS: runtime.GOOS, Lookup: os.LookupEnv}})
		})
		wg.Go(func() {
			<-start
			serr = writeStarterConfig(cfg, true)
		})
		close(start)
		wg.Wait()
		if ierr != nil || serr != nil {
			t.Fatalf("run %d: import: %v; starter config: %v", i, ierr, serr)
		}
		if !res.ConfigWritten {
			t.Fatalf("run %d: the import did not write the config", i)
		}
		f, err := config.Load(cfg)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if _, ok := f.Servers["mine"]; !ok {
			t.Fatalf("run %d: the starter config replaced the imported one: %v", i, slices.Sorted(maps.Keys(f.Servers)))
		}
	}
}

// TestStarterConfigThroughADanglingLink: a config that is a symlink into
// a dotfiles directory that does not hold the file yet gets the starter
// config there at first start, and the link stays, so that hot reload
// follows the dotfiles file. A link whose target's directory is missing
// (the dotfiles not cloned yet) is left alone, nothing is made on its far
// side, and the pool starts with no servers and says why; once the
// directory and the file are made, the file is applied. On the first
// edition the starter was renamed over the link.
func TestStarterConfigThroughADanglingLink(t *testing.T) {
	paths := sbHome(t)
	dot := t.TempDir()
	target := filepath.Join(dot, "config.json")
	if err := os.Symlink(target, paths.Config); err != nil {
		t.Skip("no symlinks:", err)
	}
	inst, _ := startIn(t, Options{})
	stopInstance(t, inst)()
	if fi, err := os.Lstat(paths.Config); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the config link was replaced (%v)", err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != config.Starter {
		t.Errorf("the link's target holds %q, %v; want the starter config", b, err)
	}

	missing := filepath.Join(dot, "not-cloned")
	target = filepath.Join(missing, "config.json")
	if err := os.Remove(paths.Config); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, paths.Config); err != nil {
		t.Fatal(err)
	}
	inst, _ = startIn(t, Options{})
	why := paths.Config + " is a symlink to " + target + ", and " + missing + " does not exist"
	if err := inst.ConfigError(); err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("ConfigError = %v, want it to say %q", err, why)
	}
	if got := inst.Pool.Servers(); len(got) != 0 {
		t.Errorf("servers %v, want none", got)
	}
	if fi, err := os.Lstat(paths.Config); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the config link was replaced (%v)", err)
	}
	if _, err := os.Lstat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link's missing directory was made (%v)", err)
	}
	runInstance(t, inst)
	if err := os.Mkdir(missing, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, fakeServers(t, "a"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the dotfiles config applied", func() bool {
		return slices.Equal(inst.Pool.Servers(), []string{"a"}) && inst.ConfigError() == nil
	})
}

// TestStartWithTheConfigDirADanglingLink: a config directory that is a
// symlink to a directory that does not exist (dotfiles not cloned yet)
// does not keep the pool from starting: it runs no servers and says why;
// the HTTP token, kept beside the config, cannot be made meanwhile, and
// `http-token` says why; once the directory is made, its config is
// applied and the token made. On the first edition Start failed
// ("mkdir …: file exists"), and so did every client's start of a pool.
func TestStartWithTheConfigDirADanglingLink(t *testing.T) {
	switch runtime.GOOS {
	case "windows", "darwin", "ios", "plan9":
		t.Skip("the config dir follows XDG_CONFIG_HOME only on other systems")
	}
	root, err := os.MkdirTemp("", "sb") // short: the sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	t.Setenv("SWITCHBOARD_HOME", "")
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(root, "xdg"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(root, "state"))
	dotfiles := filepath.Join(root, "dotfiles")
	link := filepath.Join(root, "xdg", "switchboard")
	if err := os.Mkdir(filepath.Join(root, "xdg"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dotfiles, link); err != nil {
		t.Skip("no symlinks:", err)
	}
	paths, err := ResolvePaths()
	if err != nil {
		t.Fatal(err)
	}
	if paths.Config != filepath.Join(link, "config.json") {
		t.Fatalf("config at %s, want it in %s", paths.Config, link)
	}
	inst, logs := startIn(t, Options{})
	why := link + " is a symlink to " + dotfiles + ", and " + dotfiles + " does not exist"
	if err := inst.ConfigError(); err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("ConfigError = %v, want it to say %q", err, why)
	}
	if got := inst.Pool.Servers(); len(got) != 0 {
		t.Errorf("servers %v, want none", got)
	}
	if !strings.Contains(logs.String(), "HTTP front door refuses every request") {
		t.Errorf("the log does not say the front door is shut:\n%s", logs.String())
	}
	runInstance(t, inst)
	eventually(t, 5*time.Second, "the control API answers", func() bool {
		_, err := FetchStatus(context.Background())
		return err == nil
	})
	if tok, err := HTTPToken(context.Background(), false); err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("http-token = %.8s…, %v; want an error saying %q", tok, err, why)
	}
	if _, err := os.Lstat(dotfiles); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link's missing directory was made (%v)", err)
	}
	if err := os.Mkdir(dotfiles, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dotfiles, "config.json"), fakeServers(t, "a"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the dotfiles config applied", func() bool {
		return slices.Equal(inst.Pool.Servers(), []string{"a"}) && inst.ConfigError() == nil
	})
	tok, err := HTTPToken(context.Background(), false)
	if err != nil || tok == "" || inst.currentToken() != tok {
		t.Fatalf("http-token = %.8s…, %v; the pool takes %.8s…", tok, err, inst.currentToken())
	}
	if held, err := readToken(filepath.Join(dotfiles, "http-token")); held != tok {
		t.Errorf("the token file holds %.8s… (%v), want %.8s…", held, err, tok)
	}
}

// floodIsBounded opens 64 connections with dial and fails the test unless
// the pool (this process) holds at most bound of them, then closes them.
// The test's own ends of the flood are descriptors of this process too;
// a few of the pool's other descriptors may come and go meanwhile (its
// history, its children's pipes): hence a slack of 4 either way.
func floodIsBounded(t *testing.T, what string, bound int, dial func() (net.Conn, error)) {
	t.Helper()
	openFDs := func() int {
		fds, _ := os.ReadDir("/proc/self/fd")
		return len(fds)
	}
	before := openFDs()
	const flood = 64
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range flood {
		c, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	limit := before + flood + bound
	eventually(t, 5*time.Second, "the pool to accept what it may", func() bool { return openFDs() >= limit-4 })
	if n := openFDs(); n > limit+4 {
		t.Fatalf("%d descriptors open after %d connections to %s bounded at %d, from %d: the pool took %d",
			n, flood, what, bound, before, n-before-flood)
	}
}
