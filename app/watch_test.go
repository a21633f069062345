package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/npx"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/mcptest"
)

// testDir holds what the package's tests build once (the fake server).
var testDir string

// fakeBin builds the fake MCP server the first time a test needs it.
var fakeBin = sync.OnceValues(func() (string, error) { return mcptest.Build(testDir) })

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sbapp")
	if err != nil {
		panic(err)
	}
	testDir = dir
	// The cleanup replaces goleak's own os.Exit: without it a leak is
	// printed and the package still passes.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}),
		// fyne's process-wide event queue, started once by its first app
		// (the tray test's test app); it has no way to stop.
		goleak.IgnoreTopFunction("fyne.io/fyne/v2/internal/async.(*UnboundedChan[...]).processing"))
}

// --- the watcher alone ---

type report struct {
	f   *config.File
	err error
	at  time.Time
}

// watch starts WatchConfig on path and stops it when the test ends.
func watch(t *testing.T, path string, debounce time.Duration, also func(*config.File, error)) <-chan report {
	t.Helper()
	ch := make(chan report, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done, err := WatchConfig(ctx, path, debounce, func(f *config.File, err error) {
		if also != nil {
			also(f, err)
		}
		ch <- report{f, err, time.Now()}
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("the watcher goroutine did not exit")
		}
	})
	return ch
}

// next waits for the next report, failing the test after within.
func next(t *testing.T, ch <-chan report, within time.Duration) report {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		t.Fatalf("no config report within %v", within)
		return report{}
	}
}

// quiet checks that no report arrives for d.
func quiet(t *testing.T, ch <-chan report, d time.Duration) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("unexpected report: %+v", r)
	case <-time.After(d):
	}
}

func serversConfig(names ...string) []byte {
	var b strings.Builder
	b.WriteString(`{"mcpServers": {`)
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: {\"command\": \"x\"}", n)
	}
	b.WriteString("}}\n")
	return []byte(b.String())
}

func names(f *config.File) []string {
	var out []string
	for n := range f.Servers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// edits are the ways editors and tools change a file.
var edits = []struct {
	name  string
	write func(path string, data []byte) error
}{
	{"write in place", func(path string, data []byte) error {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}},
	{"atomic rename", func(path string, data []byte) error {
		tmp := path + ".tmp~"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	}},
	{"delete then create", func(path string, data []byte) error {
		if err := os.Remove(path); err != nil {
			return err
		}
		return os.WriteFile(path, data, 0o600)
	}},
}

func TestWatchConfigEdits(t *testing.T) {
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(path, serversConfig("a"), 0o600); err != nil {
				t.Fatal(err)
			}
			ch := watch(t, path, 100*time.Millisecond, nil)
			for i, want := range [][]string{{"a", "b"}, {"b"}, {"b", "c"}} {
				start := time.Now()
				if err := e.write(path, serversConfig(want...)); err != nil {
					t.Fatal(err)
				}
				r := next(t, ch, time.Second)
				if r.err != nil {
					t.Fatalf("edit %d: %v", i, r.err)
				}
				if got := names(r.f); !slices.Equal(got, want) {
					t.Fatalf("edit %d: servers %v, want %v", i, got, want)
				}
				t.Logf("edit %d reported after %v", i, r.at.Sub(start).Round(time.Millisecond))
			}
			quiet(t, ch, 300*time.Millisecond)
		})
	}
}

// TestWatchConfigBurst: many writes in a row give one report, of the
// last content, once the burst has been quiet for the debounce.
func TestWatchConfigBurst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(path, serversConfig("a"), 0o600)
	const debounce = 100 * time.Millisecond
	ch := watch(t, path, debounce, nil)
	start := time.Now()
	var last time.Time
	for i := range 20 {
		// The last write's events come after it begins, not after it
		// returns: the debounce runs from then.
		last = time.Now()
		if err := os.WriteFile(path, serversConfig(fmt.Sprintf("s%02d", i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := next(t, ch, time.Second)
	if r.err != nil || !slices.Equal(names(r.f), []string{"s19"}) {
		t.Fatalf("report: %v %v", r.err, r.f)
	}
	if r.at.Sub(last) < debounce {
		t.Errorf("reported %v after the last write, before the %v debounce", r.at.Sub(last), debounce)
	}
	t.Logf("20 writes in %v, one report %v after the last", last.Sub(start).Round(time.Microsecond), r.at.Sub(last).Round(time.Millisecond))
	quiet(t, ch, 3*debounce)
}

// TestWatchConfigEmptyIsReadAgain: an editor that truncates the file and
// writes it a while later leaves it empty in between. An empty file is
// read again one debounce later before it is reported, so the truncation
// alone reports nothing; a file left empty is then reported as such.
func TestWatchConfigEmptyIsReadAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(path, serversConfig("a"), 0o600)
	const debounce = 100 * time.Millisecond
	ch := watch(t, path, debounce, nil)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	quiet(t, ch, debounce*3/2)
	if err := os.WriteFile(path, serversConfig("b"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := next(t, ch, 5*time.Second); r.err != nil || !slices.Equal(names(r.f), []string{"b"}) {
		t.Fatalf("after the truncate-then-write: %v %v, want b", r.err, r.f)
	}
	if err := os.WriteFile(path, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := next(t, ch, 5*time.Second); r.err == nil || !strings.Contains(r.err.Error(), "the file is empty") {
		t.Fatalf("a file left empty: %v %v, want \"the file is empty\"", r.err, r.f)
	}
}

// TestWatchConfigBroken: a broken file, an invalid file and a missing
// file are reported as errors; fixing the file reports it good again.
func TestWatchConfigBroken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(path, serversConfig("a"), 0o600)
	ch := watch(t, path, 50*time.Millisecond, nil)
	steps := []struct {
		name    string
		do      func() error
		wantErr string
		want    []string
	}{
		{"half-written", func() error { return os.WriteFile(path, []byte(`{"mcpServers": {"a": {"comm`), 0o600) },
			path + `: line 1, column 23: string never closes`, nil},
		{"semantically invalid", func() error {
			return os.WriteFile(path, []byte(`{"mcpServers": {"a": {"command": "x", "idleTimeout": "10 minutes"}}}`), 0o600)
		}, path + `: mcpServers.a.idleTimeout: "10 minutes" is not a duration (try "10m")`, nil},
		{"fixed", func() error { return os.WriteFile(path, serversConfig("a", "b"), 0o600) }, "", []string{"a", "b"}},
		{"deleted", func() error { return os.Remove(path) }, path + ": the config file is gone (keeping the last good config until it is back)", nil},
		{"back as before", func() error { return os.WriteFile(path, serversConfig("a", "b"), 0o600) }, "", []string{"a", "b"}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		r := next(t, ch, time.Second)
		switch {
		case s.wantErr != "" && (r.err == nil || r.err.Error() != s.wantErr):
			t.Fatalf("%s: error %v, want %s", s.name, r.err, s.wantErr)
		case s.wantErr == "" && r.err != nil:
			t.Fatalf("%s: %v", s.name, r.err)
		case s.wantErr == "" && !slices.Equal(names(r.f), s.want):
			t.Fatalf("%s: servers %v, want %v", s.name, names(r.f), s.want)
		}
	}
	// Saving without changes reports nothing.
	os.WriteFile(path, serversConfig("a", "b"), 0o600)
	quiet(t, ch, 200*time.Millisecond)
}

// TestWatchConfigFilters: other files in the directory are not the
// config.
func TestWatchConfigFilters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	os.WriteFile(path, serversConfig("a"), 0o600)
	ch := watch(t, path, 50*time.Millisecond, nil)
	os.WriteFile(filepath.Join(dir, "history.db"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(dir, "config.json.bak"), []byte("x"), 0o600)
	os.Chmod(path, 0o640)
	quiet(t, ch, 250*time.Millisecond)
	os.WriteFile(path, serversConfig("z"), 0o600)
	if r := next(t, ch, time.Second); r.err != nil || !slices.Equal(names(r.f), []string{"z"}) {
		t.Fatalf("report: %v %v", r.err, r.f)
	}
}

// TestWatchConfigSymlink: a config that is a symlink into a dotfiles
// directory reloads when the target is edited.
func TestWatchConfigSymlink(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "dotfiles"), 0o700)
	os.MkdirAll(filepath.Join(root, "sb"), 0o700)
	target := filepath.Join(root, "dotfiles", "switchboard.json")
	os.WriteFile(target, serversConfig("a"), 0o600)
	path := filepath.Join(root, "sb", "config.json")
	if err := os.Symlink(target, path); err != nil {
		t.Skip("no symlinks:", err)
	}
	ch := watch(t, path, 50*time.Millisecond, nil)
	os.WriteFile(target, serversConfig("b"), 0o600)
	if r := next(t, ch, time.Second); r.err != nil || !slices.Equal(names(r.f), []string{"b"}) {
		t.Fatalf("report: %v %v", r.err, r.f)
	}
	// Written through the link by config.WriteFile: the link stays.
	if err := config.WriteFile(path, serversConfig("c"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := next(t, ch, time.Second); r.err != nil || !slices.Equal(names(r.f), []string{"c"}) {
		t.Fatalf("report: %v %v", r.err, r.f)
	}
}

// TestWatchConfigHardLink: a config that is a hard link to a file in
// another directory (a dotfiles checkout linked into the config's
// directory) reloads when the file is edited through the other name,
// which changes it without an event in the config's directory; also once
// the config was replaced by another file, linked again elsewhere, and
// once it was renamed away and back. Before the file itself was watched,
// the edit went unseen and the pool kept the old config.
func TestWatchConfigHardLink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("ReadDirectoryChangesW reports a change in the directory of the name the file was written through")
	}
	root := t.TempDir()
	for _, d := range []string{"dotfiles", "sb"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	other := filepath.Join(root, "dotfiles", "switchboard.json")
	if err := os.WriteFile(other, serversConfig("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "sb", "config.json")
	if err := os.Link(other, path); err != nil {
		t.Skip("no hard links:", err)
	}
	ch := watch(t, path, 50*time.Millisecond, nil)
	expect := func(step string, want ...string) {
		t.Helper()
		if r := next(t, ch, 2*time.Second); r.err != nil || !slices.Equal(names(r.f), want) {
			t.Fatalf("%s: %v %v, want servers %v", step, r.err, r.f, want)
		}
	}
	write := func(p string, servers ...string) {
		t.Helper()
		if err := edits[0].write(p, serversConfig(servers...)); err != nil {
			t.Fatal(err)
		}
	}
	// An edit through the config's own name, seen by every edition, so
	// that the ones below come after the watch's first look at the file.
	write(path, "a", "z")
	expect("edited through the config's name", "a", "z")
	write(other, "b")
	expect("edited through the other link", "b")

	// An editor in the config's directory puts another file in its
	// place; that one is then linked from elsewhere and edited there.
	if err := edits[1].write(path, serversConfig("c")); err != nil {
		t.Fatal(err)
	}
	expect("replaced", "c")
	again := filepath.Join(root, "dotfiles", "again.json")
	if err := os.Link(path, again); err != nil {
		t.Fatal(err)
	}
	write(again, "d")
	expect("edited through a link to the file put in its place", "d")
	// The file it replaced is not the config any more.
	write(other, "x")
	quiet(t, ch, 200*time.Millisecond)

	// Renamed away and back: the same file, edited through its other link.
	if err := os.Rename(path, path+".away"); err != nil {
		t.Fatal(err)
	}
	if r := next(t, ch, 2*time.Second); r.err == nil || !strings.Contains(r.err.Error(), "gone") {
		t.Fatalf("renamed away: %v %v, want the file reported gone", r.err, r.f)
	}
	if err := os.Rename(path+".away", path); err != nil {
		t.Fatal(err)
	}
	expect("renamed back", "d")
	write(again, "e")
	expect("edited through the other link after the rename back", "e")

	// The same at once, within a debounce: no reload in between sees the
	// file gone, and the watch fsnotify dropped at the rename must not be
	// taken for one still there. An edit through the config's name is
	// seen by the directory's watch; the next, through the other link,
	// only by a watch on the file.
	if err := os.Rename(path, path+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".away", path); err != nil {
		t.Fatal(err)
	}
	write(path, "f")
	deadline := time.After(2 * time.Second)
	for seen := false; !seen; {
		select {
		case r := <-ch:
			// A slow machine may have reloaded in between: the file gone,
			// then back as it was.
			seen = r.err == nil && slices.Equal(names(r.f), []string{"f"})
		case <-deadline:
			t.Fatal("edited through the config's name after a quick rename away and back: no report of servers [f] within 2s")
		}
	}
	write(again, "g")
	expect("edited through the other link after a quick rename away and back", "g")
}

// TestWatchConfigMissingDir: a config in a directory that does not exist
// yet (two levels of it) is reported missing, then read once the
// directories and the file are made. On the first edition WatchConfig
// failed: hot reload was off for good.
func TestWatchConfigMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope", "switchboard")
	path := filepath.Join(dir, "config.json")
	ch := watch(t, path, 50*time.Millisecond, nil)
	if r := next(t, ch, 2*time.Second); r.err == nil || !strings.Contains(r.err.Error(), "gone") {
		t.Fatalf("first report: %v %v, want the file reported missing", r.err, r.f)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := config.WriteFile(path, serversConfig("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := next(t, ch, 2*time.Second); r.err != nil || !slices.Equal(names(r.f), []string{"a"}) {
		t.Fatalf("after making the directory and the file: %v %v, want servers [a]", r.err, r.f)
	}
}

// --- the watcher driving a real pool ---

// rpc is one client session through the pool's stdio front door on a
// real Unix socket, speaking newline-delimited JSON-RPC.
type rpc struct {
	t      *testing.T
	conn   net.Conn
	in     chan map[string]json.RawMessage
	stash  map[string]map[string]json.RawMessage
	nextID int
	done   chan struct{}
}

func dialSession(t *testing.T, sock, server string) *rpc {
	t.Helper()
	return dialSessionWith(t, sock, server, "{}")
}

// dialSessionWith is dialSession with a client that declares caps (the
// capabilities of its initialize).
func dialSessionWith(t *testing.T, sock, server, caps string) *rpc {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "{\"server\":%q}\n", server)
	br := bufio.NewReader(conn)
	line, err := br.ReadBytes('\n')
	if err != nil {
		t.Fatalf("hello %s: %v", server, err)
	}
	var w pool.Welcome
	if err := json.Unmarshal(line, &w); err != nil || w.Error != "" || w.Session == "" {
		t.Fatalf("hello %s: %s", server, line)
	}
	c := &rpc{t: t, conn: conn, in: make(chan map[string]json.RawMessage, 64), stash: map[string]map[string]json.RawMessage{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer close(c.in)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(line, &m) == nil {
				c.in <- m
			}
		}
	}()
	t.Cleanup(c.close)
	c.result(c.send("initialize", `{"protocolVersion":"2025-06-18","capabilities":`+caps+`,"clientInfo":{"name":"watch_test","version":"1"}}`), 10*time.Second)
	fmt.Fprintln(conn, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

func (c *rpc) close() {
	c.conn.Close()
	for range c.in {
	}
	<-c.done
}

// send writes a request and returns its id.
func (c *rpc) send(method, params string) string {
	c.nextID++
	id := fmt.Sprint(c.nextID)
	if _, err := fmt.Fprintf(c.conn, `{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`+"\n", id, method, params); err != nil {
		c.t.Fatal(err)
	}
	return id
}

// result waits for the response to id and returns its result, failing
// on an error response.
func (c *rpc) result(id string, within time.Duration) json.RawMessage {
	c.t.Helper()
	deadline := time.After(within)
	for {
		if m, ok := c.stash[id]; ok {
			delete(c.stash, id)
			if e, ok := m["error"]; ok {
				c.t.Fatalf("request %s failed: %s", id, e)
			}
			return m["result"]
		}
		select {
		case m, ok := <-c.in:
			if !ok {
				c.t.Fatalf("session closed while waiting for %s", id)
			}
			if rid, ok := m["id"]; ok && m["method"] == nil {
				c.stash[string(rid)] = m
			}
		case <-deadline:
			c.t.Fatalf("no response to %s within %v", id, within)
		}
	}
}

// pid asks the session's child for its process id.
func (c *rpc) pid() string {
	c.t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(c.result(c.send("tools/call", `{"name":"pid","arguments":{}}`), 10*time.Second), &r); err != nil || len(r.Content) == 0 {
		c.t.Fatalf("pid: %v", err)
	}
	return r.Content[0].Text
}

// syncBuffer collects the instance's log lines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// reloadRig is an Instance with a real pool serving a real socket,
// reloading its config through WatchConfig.
type reloadRig struct {
	inst    *Instance
	path    string
	sock    string
	reports <-chan report
	log     *syncBuffer
}

func fakeConfig(t *testing.T, servers map[string][]string) []byte {
	t.Helper()
	bin, err := fakeBin()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	for name, args := range servers {
		m[name] = map[string]any{"command": bin, "args": args}
	}
	b, _ := json.MarshalIndent(map[string]any{"mcpServers": m}, "", "  ")
	return b
}

func newReloadRig(t *testing.T, initial []byte) *reloadRig {
	t.Helper()
	return newReloadRigWith(t, func(dir string) string {
		path := filepath.Join(dir, "config.json")
		if err := os.WriteFile(path, initial, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	})
}

// newReloadRigWith is newReloadRig with the config that write puts in
// the rig's directory, returning its path.
func newReloadRigWith(t *testing.T, write func(dir string) string) *reloadRig {
	t.Helper()
	dir, err := os.MkdirTemp("", "sb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := write(dir)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	p := pool.New(&pool.Options{Logger: log})
	if _, err := applyConfig(p, npx.Resolver{}, nil, cfg); err != nil {
		t.Fatal(err)
	}
	sock := mcptest.Serve(t, p, dir)
	inst := &Instance{Pool: p, log: log, configPath: path, cfg: cfg,
		history: openHistory(filepath.Join(dir, "history.db"), &config.History{}, log)}
	t.Cleanup(func() { inst.history.close() })
	rig := &reloadRig{inst: inst, path: path, sock: sock, log: logs}
	rig.reports = watch(t, path, DefaultDebounce, inst.reloadConfig)
	return rig
}

func backendPIDs(p *pool.Pool, server string) []int {
	var out []int
	for _, b := range p.Snapshot().Backends {
		if b.Server == server && b.PID > 0 {
			out = append(out, b.PID)
		}
	}
	return out
}

// TestHotReloadPool changes one of two servers while a call is in
// flight on it, by each of the ways editors write: the change applies
// within a second, the unchanged server keeps its child, the changed one
// gets a new child, and the call in flight on the old child still gets
// its answer.
func TestHotReloadPool(t *testing.T) {
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			rig := newReloadRig(t, fakeConfig(t, map[string][]string{"a": {"-stderr", "a"}, "b": {"-stderr", "b1"}}))
			a, b := dialSession(t, rig.sock, "a"), dialSession(t, rig.sock, "b")
			pidA, pidB := a.pid(), b.pid()

			// A call in flight on b's child, written to it.
			slow := b.send("tools/call", `{"name":"sleep","arguments":{"ms":500}}`)
			eventually(t, 5*time.Second, "the sleep call reaches b's child", func() bool {
				return slices.ContainsFunc(rig.inst.Pool.Snapshot().InFlight, func(r pool.RequestInfo) bool {
					return r.Server == "b" && r.Method == "tools/call" && r.WrittenToChild
				})
			})

			start := time.Now()
			if err := e.write(rig.path, fakeConfig(t, map[string][]string{"a": {"-stderr", "a"}, "b": {"-stderr", "b2"}})); err != nil {
				t.Fatal(err)
			}
			r := next(t, rig.reports, time.Second)
			applied := time.Since(start)
			if r.err != nil {
				t.Fatal(r.err)
			}
			t.Logf("reload applied %v after the edit", applied.Round(time.Millisecond))
			if err := rig.inst.ConfigError(); err != nil {
				t.Fatalf("config error after a good reload: %v", err)
			}
			if !strings.Contains(rig.log.String(), "changes=\"changed: b (args; new child); unchanged: 1\"") {
				t.Errorf("no reload log line:\n%s", rig.log.String())
			}

			// The call in flight on the old child is answered.
			var res struct {
				IsError bool `json:"isError"`
			}
			if err := json.Unmarshal(b.result(slow, 5*time.Second), &res); err != nil || res.IsError {
				t.Fatalf("sleep on the old child: %v %+v", err, res)
			}
			// The unchanged server kept its child; the changed one has a
			// new child for new requests, in the same session.
			if got := a.pid(); got != pidA {
				t.Errorf("a's child changed: %s -> %s", pidA, got)
			}
			newB := b.pid()
			if newB == pidB {
				t.Errorf("b still runs its old child %s", pidB)
			}
			if b2 := dialSession(t, rig.sock, "b"); b2.pid() != newB {
				t.Errorf("a new session of b reached another child")
			}
			// The old child drains and stops.
			eventually(t, 10*time.Second, "b's old child stops", func() bool {
				return !slices.Contains(rig.inst.Pool.ChildPIDs(), atoi(pidB))
			})
			if got := backendPIDs(rig.inst.Pool, "a"); !slices.Equal(got, []int{atoi(pidA)}) {
				t.Errorf("a's backends: %v", got)
			}
		})
	}
}

// eventually polls cond until it holds, failing the test after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", within, what)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// TestHotReloadKeepsLastGood: a broken and an invalid file leave the
// pool serving its last good config, with the error in status, until a
// fixed file arrives.
func TestHotReloadKeepsLastGood(t *testing.T) {
	good := fakeConfig(t, map[string][]string{"a": {"-stderr", "a"}, "b": {"-stderr", "b"}})
	rig := newReloadRig(t, good)
	a := dialSession(t, rig.sock, "a")
	pidA := a.pid()
	for _, bad := range []struct {
		name, content, want string
	}{
		{"syntax", `{"mcpServers": {"a": {"command": `, "line 1, column 34: unexpected end of the file"},
		{"semantics", strings.Replace(string(good), `"args"`, `"idleTimeout": "10 minutes", "args"`, 1), `mcpServers.a.idleTimeout: "10 minutes" is not a duration (try "10m")`},
	} {
		if err := os.WriteFile(rig.path, []byte(bad.content), 0o600); err != nil {
			t.Fatal(err)
		}
		r := next(t, rig.reports, time.Second)
		if r.err == nil || !strings.Contains(r.err.Error(), bad.want) {
			t.Fatalf("%s: report error %v, want %q", bad.name, r.err, bad.want)
		}
		st := rig.inst.Status()
		if st.ConfigError == nil || !strings.Contains(*st.ConfigError, bad.want) {
			t.Fatalf("%s: status configError = %v", bad.name, st.ConfigError)
		}
		if got := rig.inst.Pool.Servers(); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("%s: servers %v", bad.name, got)
		}
		if got := a.pid(); got != pidA {
			t.Fatalf("%s: a's child changed: %s -> %s", bad.name, pidA, got)
		}
	}
	// Fixed, with a new server: applied, error cleared, a untouched.
	fixed := fakeConfig(t, map[string][]string{"a": {"-stderr", "a"}, "b": {"-stderr", "b"}, "c": nil})
	if err := os.WriteFile(rig.path, fixed, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := next(t, rig.reports, time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	if st := rig.inst.Status(); st.ConfigError != nil {
		t.Fatalf("configError after the fix: %s", *st.ConfigError)
	}
	if got := rig.inst.Pool.Servers(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("servers after the fix: %v", got)
	}
	if got := a.pid(); got != pidA {
		t.Fatalf("a's child changed: %s -> %s", pidA, got)
	}
	dialSession(t, rig.sock, "c").pid()
	if !strings.Contains(rig.log.String(), `changes="added: c; unchanged: 2"`) {
		t.Errorf("no reload log line:\n%s", rig.log.String())
	}
	// The dashboard's waterfall marks every reload, failed ones too.
	var got []string
	for _, r := range rig.inst.reloads.list() {
		got = append(got, fmt.Sprintf("%d %q %v", r.Seq, r.Changes, r.Err != ""))
	}
	want := []string{`1 "" true`, `2 "" true`, `3 "added: c; unchanged: 2" false`}
	if !slices.Equal(got, want) {
		t.Errorf("reloads = %q, want %q", got, want)
	}
	// So does the waterfall over a past window, from the history.
	c := &trayController{inst: rig.inst}
	waitHistory(t, "the reloads in a window", func() bool {
		w, err := c.Window(context.Background(), time.Now().Add(-time.Minute), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for i, r := range w.Reloads {
			got = append(got, fmt.Sprintf("%d %q %v", i+1, r.Changes, r.Err != ""))
		}
		return slices.Equal(got, want)
	})
}

// TestWatchConfigDirRecreated: the config's directory is deleted (the
// last good config is kept, the file reported gone) and created again,
// two levels deep, with a new file: the watch picks it up.
func TestWatchConfigDirRecreated(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "switchboard")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, serversConfig("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	ch := watch(t, path, 50*time.Millisecond, nil)
	if err := os.RemoveAll(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	if r := next(t, ch, 2*time.Second); r.err == nil || !strings.Contains(r.err.Error(), "gone") {
		t.Fatalf("after deleting the directory: %v %v, want the file reported gone", r.err, r.f)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, serversConfig("b"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := next(t, ch, 2*time.Second)
	if r.err != nil || !slices.Equal(names(r.f), []string{"b"}) {
		t.Fatalf("after re-creating the directory: %v %v, want servers [b]", r.err, r.f)
	}
	// And it stays watched: a later edit is seen too.
	if err := os.WriteFile(path, serversConfig("c"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := next(t, ch, 2*time.Second); r.err != nil || !slices.Equal(names(r.f), []string{"c"}) {
		t.Fatalf("edit after re-creation: %v %v", r.err, r.f)
	}
}

// TestHotReloadSaysWhatThePoolDoes: the reload's log line says what the
// pool does. An env value rewritten from ${VAR} to what it expands to
// changes nothing (the pool keeps the child); a server disabled has its
// requests refused, not sent to a new child, while the call in flight on
// its child gets its answer. On the first edition the line compared the
// text: "a (env.T; new child)" with the child kept, and "(disabled; new
// child)".
func TestHotReloadSaysWhatThePoolDoes(t *testing.T) {
	t.Setenv("SB_TEST_T", "v1")
	bin, err := fakeBin()
	if err != nil {
		t.Fatal(err)
	}
	conf := func(v, extra string) []byte {
		return fmt.Appendf(nil, `{"mcpServers": {"a": {"command": %q, "env": {"T": %q}%s}}}`, bin, v, extra)
	}
	rig := newReloadRig(t, conf("${SB_TEST_T}", ""))
	a := dialSession(t, rig.sock, "a")
	pid := a.pid()
	if err := os.WriteFile(rig.path, conf("v1", ""), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := next(t, rig.reports, 2*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	if !strings.Contains(rig.log.String(), `changes="unchanged: 1"`) {
		t.Errorf("the reload of a value rewritten as it expands is not logged as no change:\n%s", rig.log.String())
	}
	if got := a.pid(); got != pid {
		t.Errorf("a's child changed: %s -> %s", pid, got)
	}

	slow := a.send("tools/call", `{"name":"sleep","arguments":{"ms":300}}`)
	eventually(t, 5*time.Second, "the sleep call reaches a's child", func() bool {
		return slices.ContainsFunc(rig.inst.Pool.Snapshot().InFlight, func(r pool.RequestInfo) bool {
			return r.Server == "a" && r.Method == "tools/call" && r.WrittenToChild
		})
	})
	if err := os.WriteFile(rig.path, conf("v1", `, "disabled": true`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := next(t, rig.reports, 2*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	if want := `changes="changed: a (disabled; requests refused, in-flight ones finish); unchanged: 0"`; !strings.Contains(rig.log.String(), want) {
		t.Errorf("no %s in the log:\n%s", want, rig.log.String())
	}
	a.result(slow, 5*time.Second)
	if got := refusal(t, rig.sock, "a"); !strings.Contains(got, "disabled") {
		t.Errorf("a new session of a is refused with %q, want it disabled", got)
	}
}

// TestHotReloadLinkInTheMiddle: the config is a link to a link to the
// file (config.json -> chain/mid/link.json -> real/r1.json), and the
// middle link is repointed atomically (a new link renamed over it), as
// `ln -sfn` to a temporary name and a rename do: the file it now leads
// to is applied. On the first edition only the directories of the config
// path and of the file were watched: nothing was reloaded, and the pool
// ran the first file for good.
func TestHotReloadLinkInTheMiddle(t *testing.T) {
	var link string
	rig := newReloadRigWith(t, func(dir string) string {
		for _, d := range []string{"chain/mid", "real"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		for name, arg := range map[string]string{"r1.json": "c1", "r2.json": "c2"} {
			if err := os.WriteFile(filepath.Join(dir, "real", name), fakeConfig(t, map[string][]string{"a": {"-stderr", arg}}), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		link = filepath.Join(dir, "chain", "mid", "link.json")
		path := filepath.Join(dir, "config.json")
		if err := os.Symlink(filepath.Join("..", "..", "real", "r1.json"), link); err != nil {
			t.Skip("no symlinks:", err)
		}
		if err := os.Symlink(link, path); err != nil {
			t.Fatal(err)
		}
		return path
	})
	// An edit of the file, seen by every edition, so that the repointing
	// below comes after the watch's first look at the file.
	r1 := filepath.Join(filepath.Dir(rig.path), "real", "r1.json")
	if err := os.WriteFile(r1, fakeConfig(t, map[string][]string{"a": {"-stderr", "c1b"}}), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := next(t, rig.reports, 2*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	a := dialSession(t, rig.sock, "a")
	pid := a.pid()
	tmp := link + ".tmp"
	if err := os.Symlink(filepath.Join("..", "..", "real", "r2.json"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
	if r := next(t, rig.reports, 2*time.Second); r.err != nil || !slices.Equal(r.f.Servers["a"].Args, []string{"-stderr", "c2"}) {
		t.Fatalf("after repointing the middle link: %v %+v, want the second file", r.err, r.f)
	}
	if got := a.pid(); got == pid {
		t.Errorf("a still runs the child of the first file, %s", pid)
	}
}
