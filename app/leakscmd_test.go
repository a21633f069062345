package app

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/leaks"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
)

func TestServersForMatching(t *testing.T) {
	t.Setenv("SB_TEST_DIR", "/opt/mcp")
	home := t.TempDir() // where the pool starts a server without cwd
	t.Setenv("HOME", home)
	cfg := &config.File{Servers: map[string]config.Server{
		"memory": {Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}},
		"local":  {Command: "${SB_TEST_DIR}/bin/server", Args: []string{"--root", "${SB_TEST_UNSET}", "${SB_TEST_UNSET:-x}"}, Cwd: "${SB_TEST_DIR}", Disabled: true},
		"remote": {URL: "https://example.com/mcp"},
	}}
	want := []pool.ServerConfig{
		{Name: "local", Command: "/opt/mcp/bin/server", Args: []string{"--root", "", "x"}, Cwd: "/opt/mcp"},
		{Name: "memory", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}, Cwd: home},
	}
	if diff := cmp.Diff(want, serversForMatching(cfg)); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
	if serversForMatching(nil) != nil {
		t.Error("nil config")
	}
}

// TestLeakSourceReadsTheHistory: a child that an earlier run recorded only
// in the SQLite history (its children file lost) is still found, through
// the CLI's read-only view of the database.
func TestLeakSourceReadsTheHistory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// Detached, as a child that outlived its run is: not this test's
	// descendant, which leak detection never reports.
	out, err := exec.Command("sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	start, err := leaks.StartTime(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "history.db")
	st, err := store.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Record(pool.Event{Kind: pool.EventBackendStarted, Time: time.Now(), Server: "fake", PID: pid,
		ProcessStart: start, Command: []string{"sleep", "600"}})
	if err := st.Close(); err != nil { // the run ends; the child never exited
		t.Fatal(err)
	}
	src := unionSource{leaks.FileSource(filepath.Join(dir, "children.jsonl")), readOnlyHistory(db)}
	recs, err := src.ChildrenOfEarlierRuns(ctx)
	if err != nil || !slices.ContainsFunc(recs, func(r leaks.ChildRecord) bool { return r.PID == pid && r.Server == "fake" }) {
		t.Fatalf("records %+v, %v: want pid %d of server fake", recs, err, pid)
	}
	found, err := leaks.Find(ctx, dir, src, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(found, func(l leaks.Leak) bool { return l.PID == pid && l.Kind == leaks.KindRecorded }) {
		t.Fatalf("leaks %+v: want the recorded sleeper %d", found, pid)
	}
	// No database at all is no records, not an error.
	if recs, err := readOnlyHistory(filepath.Join(dir, "none.db")).ChildrenOfEarlierRuns(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("missing database: %v %v", recs, err)
	}
}

// plantSleep leaves `sleep 1000` behind with env (sh syntax, "A=1 B=2")
// and init as its parent, as a run leaves a process behind; it is killed
// in t.Cleanup.
func plantSleep(t *testing.T, env string) int {
	t.Helper()
	out, err := exec.Command("sh", "-c", env+" sleep 1000 </dev/null >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// childGroups is a leaks.ChildSource whose records say that a run started
// a child leading process group pgid, at start.
type childGroups struct {
	pgid  int
	start time.Time
}

func (childGroups) ChildrenOfEarlierRuns(context.Context) ([]leaks.ChildRecord, error) {
	return nil, nil
}

func (g childGroups) RecordedChildren(context.Context) ([]leaks.ChildRecord, error) {
	return []leaks.ChildRecord{{PID: g.pgid, Server: "memory", StartedAt: g.start, Run: "earlier"}}, nil
}

// TestKillAllLeaked: `kill --all-leaked` (and the tray's Kill all) kills
// this home's proven leaks and leaves every suspect alone, saying why: an
// orphan without a run marker, a process a live child of this run
// detached (it may be the user's browser, opened for an OAuth flow), one
// an earlier version marked without its home, and one that carries the
// marker of this home's ended run outside the process group of any child
// that run started (a program that inherited it from a backend's
// environment). Another home's leftover
// is not this home's: never listed, never killed. Only this test's
// processes are handed over: Find sees the whole machine.
func TestKillAllLeaked(t *testing.T) {
	ctx := context.Background()
	home, other := t.TempDir(), t.TempDir()
	marker, err := leaks.RunMarker(ctx, home)
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "1000") // the live child of server oauth
	child.Env = append(child.Environ(), leaks.RunEnv+"="+marker, pool.ServerEnv+"=oauth")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	marked := plantSleep(t, leaks.RunEnv+"=1@0@"+home+" "+pool.ServerEnv+"=memory") // this home's run that has ended
	orphan := plantSleep(t, "")
	detached := plantSleep(t, leaks.RunEnv+"="+marker+" "+pool.ServerEnv+"=oauth")
	legacy := plantSleep(t, leaks.RunEnv+"=1@0 "+pool.ServerEnv+"=lingering")
	theirs := plantSleep(t, leaks.RunEnv+"=1@0@"+other+" "+pool.ServerEnv+"=memory")
	inherited := plantSleep(t, leaks.RunEnv+"=1@0@"+home+" "+pool.ServerEnv+"=memory setsid") // in a session of its own
	configured := []pool.ServerConfig{{Name: "lingering", Command: "sleep", Args: []string{"1000"}}}
	// The ended run started a child that led the group marked is in.
	start, err := leaks.StartTime(ctx, marked)
	if err != nil {
		t.Fatal(err)
	}
	src := childGroups{pgid: syscallPgid(t, marked), start: start}

	planted := []int{marked, orphan, detached, legacy, theirs, inherited}
	var mine []leaks.Leak
	eventually(t, 10*time.Second, "five planted processes are listed", func() bool {
		found, err := leaks.Find(ctx, home, src, configured, []int{child.Process.Pid})
		if err != nil {
			t.Fatal(err)
		}
		mine = slices.DeleteFunc(found, func(l leaks.Leak) bool { return !slices.Contains(planted, l.PID) })
		return len(mine) >= 5 // each is listed once its sh has exited
	})
	if slices.ContainsFunc(mine, func(l leaks.Leak) bool { return l.PID == theirs }) {
		t.Errorf("another home's leftover %d is listed: %+v", theirs, mine)
	}
	res := killFound(ctx, home, control.KillRequest{AllLeaked: true}, mine)
	slices.SortFunc(res, func(a, b control.KillResult) int { return a.PID - b.PID })
	want := []control.KillResult{
		{PID: marked, Server: "memory", Killed: true},
		{PID: orphan, Server: "lingering", Skipped: true, Note: "no Switchboard run marker: may be another program's, so it is left alone"},
		{PID: detached, Server: "oauth", Skipped: true, Note: "a live child of server oauth may have started it on purpose: it is left alone while that child runs"},
		{PID: legacy, Server: "lingering", Skipped: true, Note: "an earlier version's run marker, which names no Switchboard home: may be another home's, so it is left alone"},
		{PID: inherited, Server: "memory", Skipped: true, Note: "in the process group or session of no child its run started: may be a program that merely inherited the run marker, so it is left alone"},
	}
	slices.SortFunc(want, func(a, b control.KillResult) int { return a.PID - b.PID })
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	for _, pid := range []int{orphan, detached, legacy, theirs, inherited} {
		if syscall.Kill(pid, 0) != nil {
			t.Errorf("the suspect or other home's %d was killed", pid)
		}
	}
	// Killing it by PID is refused, naming its home.
	res = killFound(ctx, home, control.KillRequest{PID: theirs}, mine)
	if len(res) != 1 || !res[0].Refused || !strings.Contains(res[0].Error, "it belongs to another Switchboard home ("+other+")") {
		t.Errorf("kill %d of another home: %+v", theirs, res)
	}
}

// syscallPgid is pid's process group.
func syscallPgid(t *testing.T, pid int) int {
	t.Helper()
	g, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSweepLogsSuspectsWithoutKillHint: the startup sweep tells the user
// to kill a proven leak, and only that: `kill` refuses a suspect (here an
// earlier version's marker, which names no home), so its line says what
// it is instead.
func TestSweepLogsSuspectsWithoutKillHint(t *testing.T) {
	ctx := context.Background()
	paths := sbHome(t)
	home := leakHome(paths)
	marked := plantSleep(t, leaks.RunEnv+"=1@0@"+home+" "+pool.ServerEnv+"=memory")
	legacy := plantSleep(t, leaks.RunEnv+"=1@0 "+pool.ServerEnv+"=lingering")
	cfg := &config.File{Servers: map[string]config.Server{"lingering": {Command: "sleep", Args: []string{"1000"}}}}
	// The ended run recorded the child (exited since) whose group marked
	// is in: the history proves it.
	start, err := leaks.StartTime(ctx, marked)
	if err != nil {
		t.Fatal(err)
	}
	ended, err := store.Open(paths.History, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := syscallPgid(t, marked)
	ended.Record(pool.Event{Kind: pool.EventBackendStarted, Time: start, Server: "memory", PID: g, ProcessStart: start, Command: []string{"sh"}})
	ended.Record(pool.Event{Kind: pool.EventBackendExited, Time: start, Server: "memory", PID: g})
	if err := ended.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(paths.History, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := &historyState{}
	h.st.Store(st)
	var buf bytes.Buffer
	inst := &Instance{Paths: paths, Pool: pool.New(nil), log: slog.New(slog.NewJSONHandler(&buf, nil)), cfg: cfg, history: h}
	type line struct {
		Msg  string `json:"msg"`
		PID  int    `json:"pid"`
		Kind string `json:"kind"`
	}
	logged := map[int]line{}
	eventually(t, 10*time.Second, "both planted processes are logged", func() bool {
		buf.Reset()
		inst.sweepLeaks(ctx)
		clear(logged)
		for _, b := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			var l line
			if json.Unmarshal(b, &l) == nil && (l.PID == marked || l.PID == legacy) {
				logged[l.PID] = l
			}
		}
		return len(logged) == 2 // each is seen once its sh has exited
	})
	if l := logged[marked]; l.Kind != leaks.KindMarked || !strings.Contains(l.Msg, "switchboard kill PID") {
		t.Errorf("proven leak %d logged as %+v; want the kill hint", marked, l)
	}
	if l := logged[legacy]; l.Kind != leaks.KindLegacy || strings.Contains(l.Msg, "kill it") ||
		!strings.Contains(l.Msg, "never killed by Switchboard") {
		t.Errorf("suspect %d logged as %+v; want no kill hint", legacy, l)
	}
}
