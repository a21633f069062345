//go:build unix

package leaks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/mcptest"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// fakeBin is the fake MCP server, built once.
var fakeBin string

// thisHome is the Switchboard home the tests find and kill leaks for.
var thisHome string

// spawnEnv makes the test binary a spawner: it starts the JSON argv in
// the variable in a process group of its own, prints the PID and exits,
// so that the process is re-parented to init like a child of a pool that
// died.
const spawnEnv = "LEAKS_TEST_SPAWN"

func TestMain(m *testing.M) {
	if argv := os.Getenv(spawnEnv); argv != "" {
		os.Exit(spawn(argv))
	}
	dir, err := os.MkdirTemp("", "leakstest")
	if err != nil {
		panic(err)
	}
	thisHome = filepath.Join(dir, "home")
	if err := os.Mkdir(thisHome, 0o700); err != nil {
		panic(err)
	}
	if fakeBin, err = mcptest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

func spawn(argvJSON string) int {
	var argv []string
	if err := json.Unmarshal([]byte(argvJSON), &argv); err != nil || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "spawn: bad argv", err)
		return 2
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "spawn:", err)
		return 2
	}
	fmt.Println(cmd.Process.Pid)
	return 0
}

// planted is a process that outlived its parent, as a backend of a
// crashed pool does. It is killed in t.Cleanup if still running.
type planted struct {
	pid   int
	start time.Time
}

// plantLeader starts argv as the leader of its own process group, with
// init as its parent.
func plantLeader(t *testing.T, argv ...string) planted {
	t.Helper()
	b, _ := json.Marshal(argv)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// GORACE: the race runtime otherwise lingers 1 s at exit.
	cmd.Env = append(os.Environ(), spawnEnv+"="+string(b), "GORACE=atexit_sleep_ms=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("spawn %v: %v", argv, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("spawn printed %q", out)
	}
	return track(t, pid)
}

// plantOrphan starts a shell command line that leaves a process behind
// and writes its PID to pidfile; the process stays in the test's process
// group (a shell without job control) and is re-parented when sh exits.
func plantOrphan(t *testing.T, script, pidfile string) planted {
	t.Helper()
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
	var pid int
	waitFor(t, 5*time.Second, "the pidfile "+pidfile, func() bool {
		b, err := os.ReadFile(pidfile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return track(t, pid)
}

func track(t *testing.T, pid int) planted {
	t.Helper()
	p, err := lookup(context.Background(), pid)
	if err != nil {
		t.Fatalf("planted PID %d: %v", pid, err)
	}
	pl := planted{pid: pid, start: p.start}
	t.Cleanup(func() {
		if !pl.alive() {
			return
		}
		if pgid(pid) == pid {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		} else {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		waitFor(t, 5*time.Second, "planted PID "+strconv.Itoa(pid)+" to exit", func() bool { return !pl.alive() })
	})
	return pl
}

// alive reports whether the planted process still runs (same start time,
// not a zombie).
func (p planted) alive() bool {
	return still(context.Background(), &proc{pid: p.pid, start: p.start})
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
	}
}

// parentIsReaper skips the test when orphans here are not re-parented to
// init or a known subreaper (Find would rightly not call them leaked).
func parentIsReaper(t *testing.T, pid int) {
	t.Helper()
	ctx := context.Background()
	tab, err := scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := tab.procs[pid]
	if p == nil {
		t.Fatalf("PID %d is gone", pid)
	}
	if !tab.reaperParent(ctx, p) {
		t.Skipf("the orphan PID %d was re-parented to %s, not to init or a known subreaper %v: orphan matching cannot be shown here",
			pid, tab.parentName(ctx, p), reapers)
	}
}

func findLeak(ls []Leak, pid int) *Leak {
	for i := range ls {
		if ls[i].PID == pid {
			return &ls[i]
		}
	}
	return nil
}

// source is a fixed list of recorded children.
type source []ChildRecord

func (s source) ChildrenOfEarlierRuns(context.Context) ([]ChildRecord, error) { return s, nil }

func TestRecordedChildOfEarlierRunIsLeakedAndKilledWithItsGroup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	gpFile := filepath.Join(dir, "grandchild.pid")
	argv := []string{fakeBin, "-startup-delay", "1h", "-grandchild", "-grandchild-pidfile", gpFile}
	child := plantLeader(t, argv...)
	var grandchild planted
	waitFor(t, 5*time.Second, "the grandchild's pidfile", func() bool {
		b, err := os.ReadFile(gpFile)
		if err != nil {
			return false
		}
		pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
		if err != nil {
			return false
		}
		grandchild = track(t, pid)
		return true
	})

	// The previous run recorded the child and crashed without recording
	// its exit.
	started, err := StartTime(ctx, child.pid)
	if err != nil {
		t.Fatal(err)
	}
	this := records{{PID: child.pid, Server: "memory", Command: argv, StartedAt: started, Run: "previous"}}

	start := time.Now()
	ls, err := Find(ctx, thisHome, this, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Find over all processes took %s", time.Since(start))
	l := findLeak(ls, child.pid)
	if l == nil {
		t.Fatalf("planted child %d not reported; leaks: %+v", child.pid, ls)
	}
	want := fmt.Sprintf("recorded child of an earlier run (pid %d started at %s) is still running",
		child.pid, child.start.Format(time.RFC3339))
	if l.Reason != want || l.Server != "memory" || l.Kind != KindRecorded {
		t.Errorf("leak = %+v\nwant reason %q, server memory, kind recorded", *l, want)
	}
	if l.RSSBytes == 0 {
		t.Error("rssBytes = 0")
	}
	if !slices.Equal(l.Command, argv) {
		t.Errorf("command = %q, want %q", l.Command, argv)
	}
	if l.PGID != child.pid || !slices.Contains(l.Descendants, grandchild.pid) {
		t.Errorf("pgid %d descendants %v; want pgid %d and grandchild %d among the descendants", l.PGID, l.Descendants, child.pid, grandchild.pid)
	}
	if findLeak(ls, grandchild.pid) != nil {
		t.Errorf("the grandchild is reported on its own; it dies with its group")
	}

	start = time.Now()
	if err := Kill(ctx, thisHome, child.pid, ls); err != nil {
		t.Fatal(err)
	}
	t.Logf("Kill (SIGTERM honoured) took %s", time.Since(start))
	waitFor(t, 5*time.Second, "the child and the grandchild to exit", func() bool { return !child.alive() && !grandchild.alive() })

	ls, err = Find(ctx, thisHome, this, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if findLeak(ls, child.pid) != nil {
		t.Errorf("killed child still reported: %+v", ls)
	}
}

// A leaked leader's descendant that left its process group (a helper that
// called setsid, as detached browsers do) dies with it too: the group's
// signal does not reach it, so it is signalled itself. On the first
// edition Kill signalled only the group, waited for the helper in vain and
// failed, the helper still running.
func TestKillReachesDescendantsThatLeftTheGroup(t *testing.T) {
	old := TermGrace
	TermGrace = 200 * time.Millisecond
	t.Cleanup(func() { TermGrace = old })
	ctx := context.Background()
	leader, helper, argv := plantDetaching(t, "")
	src := source{{PID: leader.pid, Server: "detaching", Command: argv, StartedAt: leader.start, Run: "earlier"}}
	ls, err := Find(ctx, thisHome, src, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := findLeak(ls, leader.pid); l == nil || !slices.Contains(l.Descendants, helper.pid) {
		t.Fatalf("leaks %+v: want PID %d with descendant %d", ls, leader.pid, helper.pid)
	}
	if err := Kill(ctx, thisHome, leader.pid, ls); err != nil {
		t.Fatal(err)
	}
	if leader.alive() || helper.alive() {
		t.Errorf("after Kill: leader alive %v, helper alive %v", leader.alive(), helper.alive())
	}
}

func TestKillEscalatesToSIGKILL(t *testing.T) {
	old := TermGrace
	TermGrace = 200 * time.Millisecond
	t.Cleanup(func() { TermGrace = old })
	ctx := context.Background()
	argv := []string{fakeBin, "-startup-delay", "1h", "-ignore-sigterm"}
	child := plantLeader(t, argv...)
	src := source{{PID: child.pid, Server: "stubborn", Command: argv, StartedAt: child.start, Run: "earlier"}}
	ls, err := Find(ctx, thisHome, src, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := Kill(ctx, thisHome, child.pid, ls); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < TermGrace {
		t.Errorf("Kill returned after %s, before the SIGTERM grace %s: did SIGTERM kill a process that ignores it?", took, TermGrace)
	}
	if child.alive() {
		t.Error("still alive after Kill returned nil")
	}
}

func TestPIDReuseIsNotALeak(t *testing.T) {
	ctx := context.Background()
	argv := []string{fakeBin, "-startup-delay", "1h"}
	child := plantLeader(t, argv...)
	for _, shift := range []time.Duration{-time.Hour, -2 * StartTolerance, 2 * StartTolerance} {
		src := source{{PID: child.pid, Server: "memory", Command: argv, StartedAt: child.start.Add(shift), Run: "earlier"}}
		ls, err := Find(ctx, thisHome, src, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l := findLeak(ls, child.pid); l != nil {
			t.Errorf("start time off by %s: reported %+v", shift, *l)
		}
	}

	// Between Find and Kill the PID was reused: Kill re-checks.
	stale := []Leak{{PID: child.pid, Server: "memory", StartedAt: child.start.Add(-time.Hour), Kind: KindRecorded, Proven: true}}
	err := Kill(ctx, thisHome, child.pid, stale)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "now belongs to another process") {
		t.Errorf("Kill of a reused PID: %v", err)
	}
	if !child.alive() {
		t.Error("the process behind the reused PID was killed")
	}
}

func TestKillRefusesWhatItCannotProve(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sleep := exec.Command("sleep", "1000")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = sleep.Wait(); close(done) }()
	t.Cleanup(func() { _ = sleep.Process.Kill(); <-done })
	orphanSleep := plantOrphan(t, "sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "+filepath.Join(dir, "sleep.pid"), filepath.Join(dir, "sleep.pid"))

	configured := []pool.ServerConfig{
		{Name: "fake", Command: fakeBin, Args: []string{"-startup-delay", "1h"}},
		{Name: "memory", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}},
	}
	ls, err := Find(ctx, thisHome, nil, configured, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pid  int
	}{
		{"the test's parent", os.Getppid()},
		{"the test itself", os.Getpid()},
		{"a sleep the test started", sleep.Process.Pid},
		{"an orphaned sleep (parent init, matches nothing)", orphanSleep.pid},
		{"init", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Kill(ctx, thisHome, c.pid, ls)
			want := fmt.Sprintf("refusing to kill PID %d: it is not a known MCP backend (not started by Switchboard and does not match a configured server)", c.pid)
			if !errors.Is(err, ErrRefused) || err.Error() != want {
				t.Errorf("Kill(%d) = %v\nwant %q", c.pid, err, want)
			}
		})
	}
	// A PID no process has is not running, whoever had it: not a refusal.
	if err := Kill(ctx, thisHome, 1<<30, ls); !errors.Is(err, ErrNotRunning) || errors.Is(err, ErrRefused) {
		t.Errorf("Kill of a PID no process has: %v", err)
	}
	select {
	case <-done:
		t.Error("the refused sleep died")
	default:
	}
	if !orphanSleep.alive() {
		t.Error("the refused orphaned sleep died")
	}
}

func TestOrphanMatchingAConfiguredServerIsLeaked(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "fake.pid")
	args := []string{"-startup-delay", "1h", "-pidfile", pidfile}
	// sh without job control: the background process stays in the
	// test's own process group, so Kill must not signal the group.
	orphan := plantOrphan(t, fakeBin+" "+strings.Join(args, " ")+" </dev/null >/dev/null 2>&1 &", pidfile)
	parentIsReaper(t, orphan.pid)
	if g := pgid(orphan.pid); g == orphan.pid || g != pgid(os.Getpid()) {
		t.Fatalf("orphan's group %d; want the test's group %d", g, pgid(os.Getpid()))
	}

	configured := []pool.ServerConfig{
		{Name: "memory", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}},
		{Name: "fake", Command: fakeBin, Args: args},
	}
	ls, err := Find(ctx, thisHome, nil, configured, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := findLeak(ls, orphan.pid)
	if l == nil {
		t.Fatalf("orphan %d not reported; leaks: %+v", orphan.pid, ls)
	}
	if !strings.HasPrefix(l.Reason, "matches configured server fake and its parent is ") || l.Server != "fake" || l.Kind != KindOrphan ||
		l.Proven || l.RSSBytes == 0 {
		t.Errorf("leak = %+v", *l)
	}
	t.Logf("reason: %s", l.Reason)

	// The running pool's own children are never leaks.
	own, err := Find(ctx, thisHome, nil, configured, []int{orphan.pid})
	if err != nil {
		t.Fatal(err)
	}
	if findLeak(own, orphan.pid) != nil {
		t.Error("a PID in own was reported")
	}
	// Nor is a matching process that is not an orphan (ours, here).
	mine := exec.Command(fakeBin, args...)
	if err := mine.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mine.Process.Kill(); _ = mine.Wait() })
	ls, err = Find(ctx, thisHome, nil, configured, nil)
	if err != nil {
		t.Fatal(err)
	}
	if findLeak(ls, mine.Process.Pid) != nil {
		t.Error("a matching process whose parent is alive (this test) was reported")
	}

	// Without a run marker it is a suspect: any program of this user may
	// run the same command line. Listed, never killed.
	if err := Kill(ctx, thisHome, orphan.pid, ls); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "carries no Switchboard run marker") {
		t.Fatalf("Kill of an unmarked orphan: %v", err)
	}
	if !orphan.alive() {
		t.Fatal("the refused orphan died")
	}
}

// A process that carries the run marker of an ended Switchboard run, in
// the process group of a child that run started, is a proven leak,
// whatever its command line matches: the marker's server names it, and
// Kill ends it. It leads no group here, so only the
// process and its descendants are signalled, never the group (that would
// kill this test).
func TestMarkedOrphanIsProvenAndKilled(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "fake.pid")
	args := []string{"-startup-delay", "1h", "-pidfile", pidfile}
	// PID 1 never started at the Unix epoch: the run has ended.
	env := RunEnv + "=1@0@" + thisHome + " " + pool.ServerEnv + "=memory"
	orphan := plantOrphan(t, env+" "+fakeBin+" "+strings.Join(args, " ")+" </dev/null >/dev/null 2>&1 &", pidfile)
	parentIsReaper(t, orphan.pid)
	configured := []pool.ServerConfig{{Name: "fake", Command: fakeBin, Args: args}} // the command line says "fake"
	ls, err := Find(ctx, thisHome, groupsOf(orphan), configured, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := findLeak(ls, orphan.pid)
	if l == nil || l.Kind != KindMarked || !l.Proven || l.Server != "memory" {
		t.Fatalf("marked orphan %d: %+v", orphan.pid, ls)
	}
	if err := Kill(ctx, thisHome, orphan.pid, ls); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the orphan to exit", func() bool { return !orphan.alive() })
}

func TestFindOnEmptyInputsIsEmptyNotNil(t *testing.T) {
	ls, err := Find(context.Background(), thisHome, source{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ls)
	if string(b) != "[]" {
		t.Errorf("JSON = %s, want []", b)
	}
}

func TestLeakJSON(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	ls := []Leak{{PID: 4242, Server: "memory", Command: []string{"npm", "exec", "@modelcontextprotocol/server-memory"},
		StartedAt: at, RSSBytes: 52428800, Kind: KindRecorded, Proven: true, PPID: 1, PGID: 4242, Descendants: []int{4250},
		Reason: "recorded child of an earlier run (pid 4242 started at 2026-03-01T12:30:00Z) is still running"}}
	got, err := json.MarshalIndent(ls, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "leaks.golden.json")
	if *update {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(got)+"\n" {
		t.Errorf("JSON changed (run with -update if intended):\n%s\nwant:\n%s", got, want)
	}
}

func TestRunMarker(t *testing.T) {
	m, err := RunMarker(context.Background(), thisHome)
	if err != nil {
		t.Fatal(err)
	}
	mk, ok := parseMarker(m)
	if !ok || mk.pid != os.Getpid() || time.Since(mk.start) < 0 || time.Since(mk.start) > time.Hour || mk.home != thisHome {
		t.Fatalf("RunMarker() = %q: %+v, ok %v", m, mk, ok)
	}
	for _, bad := range []string{"", "12", "x@1", "12@x", "-1@5", "0@5", "12@5@", "12@x@/h"} {
		if _, ok := parseMarker(bad); ok {
			t.Errorf("parseMarker(%q) accepted", bad)
		}
	}
	// An earlier version's marker has no home; a home may hold an @.
	if mk, ok := parseMarker("7@99"); !ok || mk.pid != 7 || mk.home != "" {
		t.Errorf("parseMarker(7@99) = %+v, %v", mk, ok)
	}
	if mk, ok := parseMarker("7@99@/home/a@b/x"); !ok || mk.pid != 7 || mk.start.UnixMilli() != 99 || mk.home != "/home/a@b/x" {
		t.Errorf("parseMarker(7@99@/home/a@b/x) = %+v, %v", mk, ok)
	}
	run, server := markerOf([]string{"HOME=/x", RunEnv + "=7@99", "SWITCHBOARD_SERVER=memory"})
	if run != "7@99" || server != "memory" {
		t.Errorf("markerOf = %q, %q", run, server)
	}
}

// records is a Source of fixed children of earlier runs.
type records []ChildRecord

func (r records) ChildrenOfEarlierRuns(context.Context) ([]ChildRecord, error) { return r, nil }

// startMarked starts `sleep 1000` as the test's own child with env added,
// as the pool starts a server; it is killed and reaped in t.Cleanup.
func startMarked(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "1000")
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	return cmd
}

// A live child of this run may detach a helper on purpose (mcp-remote
// opens the user's browser for an OAuth flow, a build tool starts its
// daemon): it carries this run's marker and its parent is init. While its
// server still has a live child it is a suspect, which Kill refuses; once
// no child of that server runs, it is a proven leak (in the process group
// of a child the run started). On the first edition
// it was a proven leak "left behind by server oauth after its child
// exited" while that child ran, and Kill killed it.
func TestDetachedHelperOfALiveChildIsASuspect(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	marker, err := RunMarker(ctx, thisHome)
	if err != nil {
		t.Fatal(err)
	}
	child := startMarked(t, RunEnv+"="+marker, pool.ServerEnv+"=oauth")
	other := startMarked(t, RunEnv+"="+marker, pool.ServerEnv+"=memory")
	pidfile := filepath.Join(dir, "helper.pid")
	env := RunEnv + "=" + marker + " " + pool.ServerEnv + "=oauth"
	helper := plantOrphan(t, env+" sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "+pidfile, pidfile)
	parentIsReaper(t, helper.pid)

	own := []int{child.Process.Pid, other.Process.Pid}
	ls, err := Find(ctx, thisHome, nil, nil, own)
	if err != nil {
		t.Fatal(err)
	}
	l := findLeak(ls, helper.pid)
	if l == nil || l.Kind != KindDetached || l.Proven || l.Server != "oauth" ||
		!strings.Contains(l.Reason, fmt.Sprintf("server oauth still has a live child (PID %d)", child.Process.Pid)) {
		t.Fatalf("helper %d of a live child: %+v", helper.pid, ls)
	}
	t.Logf("reason: %s", l.Reason)
	if err := Kill(ctx, thisHome, helper.pid, ls); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "still has a live child") {
		t.Fatalf("Kill of the helper of a live child: %v", err)
	}
	if !helper.alive() {
		t.Fatal("the refused helper died")
	}

	// A live child of another server does not vouch for it: once oauth's
	// child has exited, the current rules apply.
	_ = child.Process.Kill()
	ls, err = Find(ctx, thisHome, groupsOf(helper), nil, own[1:])
	if err != nil {
		t.Fatal(err)
	}
	l = findLeak(ls, helper.pid)
	if l == nil || l.Kind != KindMarked || !l.Proven || !strings.Contains(l.Reason, "left behind by server oauth after its child exited") {
		t.Fatalf("helper %d after its server's child exited: %+v", helper.pid, ls)
	}
}

// A run that has exited and not yet been reaped (a zombie: its parent has
// not waited for it) has ended. On the first edition it counted as alive,
// so a grandchild it left behind was not reported until the zombie was
// reaped.
func TestZombieRunHasEnded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	run := exec.Command("sleep", "1000")
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			_ = run.Process.Kill()
			_ = run.Wait()
		}
	})
	rp, err := lookup(ctx, run.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	marker := itoa(rp.pid) + "@" + strconv.FormatInt(rp.start.UnixMilli(), 10) + "@" + thisHome
	pidfile := filepath.Join(dir, "grandchild.pid")
	env := RunEnv + "=" + marker + " " + pool.ServerEnv + "=memory"
	gc := plantOrphan(t, env+" sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "+pidfile, pidfile)

	ls, err := Find(ctx, thisHome, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := findLeak(ls, gc.pid); l != nil {
		t.Fatalf("the grandchild of a live run is reported: %+v", *l)
	}
	// The run is SIGKILLed; nobody waits for it yet.
	if err := run.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the run to be a zombie", func() bool { return rp.exited(ctx) })
	ls, err = Find(ctx, thisHome, groupsOf(gc), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := findLeak(ls, gc.pid); l == nil || l.Kind != KindMarked || !l.Proven || !strings.Contains(l.Reason, "that has ended") {
		t.Fatalf("grandchild %d of a zombie run: %+v", gc.pid, ls)
	}
	_ = run.Wait()
	reaped = true
}

// A leak that has exited is not running, whether the Find that Kill
// takes as its proof listed it after the exit or before it (`kill
// --all-leaked` kills the leaks of one Find): Kill says so
// (ErrNotRunning), which is not a refusal, and nothing was killed. On the
// first edition the first was refused as "not a known MCP backend", as a
// PID that was never ours, and the second returned nil, so that the CLI
// said "killed PID N".
func TestKillOfALeakThatHasExited(t *testing.T) {
	for _, tc := range []struct {
		name        string
		listedAfter bool // the proof is a Find made after the exit
	}{
		{"listed after it exited", true},
		{"listed before it exited", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			argv := []string{fakeBin, "-startup-delay", "1h"}
			child := plantLeader(t, argv...)
			src := source{{PID: child.pid, Server: "memory", Command: argv, StartedAt: child.start, Run: "earlier"}}
			ls, err := Find(ctx, thisHome, src, nil, nil)
			if err != nil || findLeak(ls, child.pid) == nil {
				t.Fatalf("planted child %d: %+v %v", child.pid, ls, err)
			}
			// It exits (its owner ended it) before the user's kill.
			_ = syscall.Kill(-child.pid, syscall.SIGKILL)
			waitFor(t, 5*time.Second, "the child to exit", func() bool { return !child.alive() })
			if tc.listedAfter {
				if ls, err = Find(ctx, thisHome, src, nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			err = Kill(ctx, thisHome, child.pid, ls)
			if !errors.Is(err, ErrNotRunning) || errors.Is(err, ErrRefused) || err.Error() != fmt.Sprintf("PID %d is not running", child.pid) {
				t.Errorf("Kill of an exited leak = %v, want ErrNotRunning", err)
			}
		})
	}
}

// Several Switchboard homes run on one machine (two users' pools, test
// suites side by side); each claims only its own leftovers. A process
// carrying another home's marker is never listed, whether that home's run
// has ended or only looks ended (its marker's start time off, as after a
// clock step or from another PID namespace, while the run and its child
// tree live on), and Kill refuses it, naming its home; that home finds
// it and kills it. A marker of an earlier version names no home: a
// suspect when this home configures its server, else not listed. This
// home reached through a symlink is still this home. On the first
// edition every one of them was a proven leak of whichever home looked,
// and Kill killed it.
func TestAnotherHomesProcessesAreNotThisHomes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	link := filepath.Join(dir, "link")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(thisHome, link); err != nil {
		t.Fatal(err)
	}
	plant := func(name, marker, server string) planted {
		pidfile := filepath.Join(dir, name+".pid")
		env := RunEnv + "=" + marker + " " + pool.ServerEnv + "=" + server
		return plantOrphan(t, env+" sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "+pidfile, pidfile)
	}
	ended := plant("ended", "1@0@"+other, "gc") // PID 1 never started at the Unix epoch
	legacy := plant("legacy", "1@0", "gc")
	legacyElsewhere := plant("legacy-elsewhere", "1@0", "elsewhere")
	viaLink := plant("link", "1@0@"+link, "gc")
	parentIsReaper(t, ended.pid)
	// The other home's live run (the shell, re-parented to init) and its
	// child, whose marker has the run's PID with a start time that does
	// not match.
	livePID := filepath.Join(dir, "live.pid")
	run := plantLeader(t, "sh", "-c", RunEnv+"=$$@0@"+other+" "+pool.ServerEnv+"=gc sleep 1000 & echo $! > "+livePID+"; wait")
	var live planted
	waitFor(t, 5*time.Second, "the live run's child", func() bool {
		b, err := os.ReadFile(livePID)
		if err != nil {
			return false
		}
		pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
		if err == nil {
			live = track(t, pid)
		}
		return err == nil
	})

	// This home has a server gc too, whose command line is none of these.
	configured := []pool.ServerConfig{{Name: "gc", Command: "gc-server"}}
	ls, err := Find(ctx, thisHome, groupsOf(viaLink), configured, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []planted{ended, live, legacyElsewhere} {
		if l := findLeak(ls, p.pid); l != nil {
			t.Errorf("another home's PID %d is listed: %+v", p.pid, *l)
		}
	}
	if l := findLeak(ls, legacy.pid); l == nil || l.Kind != KindLegacy || l.Proven || l.Server != "gc" {
		t.Errorf("the earlier version's marked PID %d: %+v", legacy.pid, l)
	}
	if l := findLeak(ls, viaLink.pid); l == nil || l.Kind != KindMarked || !l.Proven {
		t.Errorf("PID %d, marked with this home through a symlink: %+v", viaLink.pid, l)
	}
	for _, p := range []planted{ended, live} {
		err := Kill(ctx, thisHome, p.pid, ls)
		want := fmt.Sprintf("refusing to kill PID %d: it belongs to another Switchboard home (%s); only that home's Switchboard kills it (SWITCHBOARD_HOME=%s switchboard kill %d)",
			p.pid, other, other, p.pid)
		if !errors.Is(err, ErrRefused) || err.Error() != want {
			t.Errorf("Kill of another home's PID %d: %v\nwant %q", p.pid, err, want)
		}
	}
	if err := Kill(ctx, thisHome, legacy.pid, ls); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "may be another home's") {
		t.Errorf("Kill of the earlier version's marked PID: %v", err)
	}
	if !ended.alive() || !live.alive() || !legacy.alive() || !run.alive() {
		t.Fatalf("a refused process died: ended %v, live %v, its run %v, legacy %v", ended.alive(), live.alive(), run.alive(), legacy.alive())
	}

	// The other home finds its ended run's leftover and kills it; never
	// this home's.
	theirs, err := Find(ctx, other, groupsOf(ended), configured, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := findLeak(theirs, ended.pid); l == nil || l.Kind != KindMarked || !l.Proven || l.Server != "gc" {
		t.Fatalf("the other home's ended PID %d, as the other home looks: %+v", ended.pid, l)
	}
	if l := findLeak(theirs, viaLink.pid); l != nil {
		t.Errorf("this home's PID %d is listed by the other home: %+v", viaLink.pid, *l)
	}
	if err := Kill(ctx, other, ended.pid, theirs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the other home's leftover to exit", func() bool { return !ended.alive() })
}

// A process that exits and is reaped between the process table's read
// and the look at its state is gone, not running: leaks listed such a
// process as a live leak (its RSS 0), a moment after it was killed.
func TestGoneProcessHasExited(t *testing.T) {
	cmd := exec.Command("sleep", "100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := lookup(ctx, cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if p.exited(ctx) {
		t.Fatal("a running process reads as exited")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait() // reaped: its /proc entry is gone
	if !p.exited(ctx) {
		t.Error("a process killed and reaped reads as running")
	}
}

// A child that an in-place upgrade carried over to the live run is
// recorded under the run that started it too (that run's record may
// never see it exit): it carries the marker of a live run, so it is in
// use, not leaked, whoever asks (the CLI asks without the pool's list of
// its children when the pool does not answer). On the first edition it
// was a proven recorded leak, and `kill --all-leaked` killed it.
func TestRecordedChildOfALiveRunIsNotALeak(t *testing.T) {
	ctx := context.Background()
	run := startMarked(t) // the live pool
	rp, err := lookup(ctx, run.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	marker := itoa(rp.pid) + "@" + strconv.FormatInt(rp.start.UnixMilli(), 10) + "@" + thisHome
	child := plantLeader(t, "env", RunEnv+"="+marker, pool.ServerEnv+"=memory", "sleep", "1000")
	src := source{{PID: child.pid, Server: "memory", Command: []string{"sleep", "1000"}, StartedAt: child.start, Run: "earlier"}}
	ls, err := Find(ctx, thisHome, src, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := findLeak(ls, child.pid); l != nil {
		t.Fatalf("the carried child %d of a live run is reported: %+v", child.pid, *l)
	}
	// Once that run has ended, the record proves the leak.
	_ = run.Process.Kill()
	waitFor(t, 5*time.Second, "the run to exit", func() bool { return rp.exited(ctx) })
	if ls, err = Find(ctx, thisHome, src, nil, nil); err != nil {
		t.Fatal(err)
	}
	if l := findLeak(ls, child.pid); l == nil || l.Kind != KindRecorded || !l.Proven {
		t.Fatalf("the child %d of an ended run: %+v", child.pid, ls)
	}
}

// A target that may not be signalled (a descendant started through sudo,
// root's) does not save the rest: every other target still gets SIGTERM,
// then SIGKILL, and Kill reports the one left and why. On the first
// edition Kill gave up at the first failed signal, before any SIGKILL,
// and the leak itself, which ignores SIGTERM, survived.
func TestKillGoesOnPastASignalItMayNotSend(t *testing.T) {
	oldTerm, oldKill, oldSend := TermGrace, KillGrace, sendOne
	TermGrace, KillGrace = 200*time.Millisecond, 300*time.Millisecond
	t.Cleanup(func() { TermGrace, KillGrace, sendOne = oldTerm, oldKill, oldSend })
	ctx := context.Background()
	leader, helper, argv := plantDetaching(t, "trap '' TERM; ")
	sendOne = func(pid int, term bool) error {
		if pid == helper.pid {
			return syscall.EPERM // another user's, as if started through sudo
		}
		return oldSend(pid, term)
	}
	src := source{{PID: leader.pid, Server: "sudo", Command: argv, StartedAt: leader.start, Run: "earlier"}}
	ls, err := Find(ctx, thisHome, src, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := findLeak(ls, leader.pid); l == nil || !slices.Contains(l.Descendants, helper.pid) {
		t.Fatalf("leaks %+v: want PID %d with descendant %d", ls, leader.pid, helper.pid)
	}
	err = Kill(ctx, thisHome, leader.pid, ls)
	t.Logf("Kill: %v", err)
	if leader.alive() {
		t.Error("the leak survived a signal that failed for one of its descendants")
	}
	if err == nil || !strings.Contains(err.Error(), itoa(helper.pid)) || !errors.Is(err, syscall.EPERM) {
		t.Errorf("Kill = %v, want an error naming PID %d, still running, and why (EPERM)", err, helper.pid)
	}
	if !helper.alive() {
		t.Error("the helper that could not be signalled is gone: the test's injection did not hold")
	}
}

// history is a ChildSource: the children earlier runs never saw exit,
// and every child the runs started.
type history struct {
	earlier, all []ChildRecord
}

func (h history) ChildrenOfEarlierRuns(context.Context) ([]ChildRecord, error) { return h.earlier, nil }

func (h history) RecordedChildren(context.Context) ([]ChildRecord, error) { return h.all, nil }

// groupsOf is a ChildSource whose records say that a run started, at the
// start of each of ps, a child that led the process group that process
// is in: the evidence a marked process needs to be proven.
func groupsOf(ps ...planted) history {
	var h history
	for _, p := range ps {
		h.all = append(h.all, ChildRecord{PID: pgid(p.pid), Server: "memory", StartedAt: p.start, Run: "earlier"})
	}
	return h
}

// The run marker alone does not prove a process is a backend's: any
// program started from a backend's environment inherits it (a shell that
// ran `systemctl --user import-environment`, an editor a backend
// opened). A marked process is proven only in the process group (or
// session) of a child its run started, as the records hold them; else it
// is a suspect, which Kill refuses and --all-leaked leaves alone. On the
// first edition every marked process of an ended run was proven, and
// killed.
func TestMarkerWithoutAChildsGroupIsASuspect(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	env := RunEnv + "=1@0@" + thisHome + " " + pool.ServerEnv + "=memory" // PID 1 never started at the Unix epoch: the run has ended
	gcFile := filepath.Join(dir, "grandchild.pid")
	// The run's child leads its group, leaves a grandchild in it, and is
	// gone.
	child := plantLeader(t, "sh", "-c", env+" sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "+gcFile+"; exec sleep 1000")
	var gc planted
	waitFor(t, 5*time.Second, "the grandchild's pidfile", func() bool {
		b, err := os.ReadFile(gcFile)
		if err != nil {
			return false
		}
		pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
		if err == nil {
			gc = track(t, pid)
		}
		return err == nil
	})
	_ = syscall.Kill(child.pid, syscall.SIGKILL)
	waitFor(t, 5*time.Second, "the child to exit", func() bool { return !child.alive() })
	// A program that inherited the marker, in a group of its own.
	inFile := filepath.Join(dir, "inherited.pid")
	inherited := plantOrphan(t, "env "+env+" setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "+inFile, inFile)
	waitFor(t, 5*time.Second, "the program to lead a session of its own", func() bool { return pgid(inherited.pid) == inherited.pid })

	src := history{all: []ChildRecord{{PID: child.pid, Server: "memory", Command: []string{"sh"}, StartedAt: child.start, Run: "earlier"}}}
	ls, err := Find(ctx, thisHome, src, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := findLeak(ls, inherited.pid)
	if l == nil || l.Kind != KindInherited || l.Proven {
		t.Fatalf("PID %d, marked outside any child's group: %+v", inherited.pid, ls)
	}
	t.Logf("reason: %s", l.Reason)
	if err := Kill(ctx, thisHome, inherited.pid, ls); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "inherited the marker") {
		t.Errorf("Kill of a process that only carries the marker: %v", err)
	}
	if !inherited.alive() {
		t.Fatal("the refused process died")
	}
	l = findLeak(ls, gc.pid)
	if l == nil || l.Kind != KindMarked || !l.Proven || !strings.Contains(l.Reason, fmt.Sprintf("in the process group of child PID %d", child.pid)) {
		t.Fatalf("grandchild %d in the group of the run's child %d: %+v", gc.pid, child.pid, ls)
	}
	if err := Kill(ctx, thisHome, gc.pid, ls); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the grandchild to exit", func() bool { return !gc.alive() })
}

// plantDetaching starts a leader (a shell running prelude first) that
// starts a helper in a session of its own, as a server's detaching helper
// does, and returns both once the helper leads its session, with the
// leader's argv.
func plantDetaching(t *testing.T, prelude string) (leader, helper planted, argv []string) {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "helper.pid")
	argv = []string{"sh", "-c", prelude + "setsid sleep 1000 & echo $! > " + pidfile + "; wait"}
	leader = plantLeader(t, argv...)
	waitFor(t, 5*time.Second, "the helper's pidfile", func() bool {
		b, err := os.ReadFile(pidfile)
		if err != nil {
			return false
		}
		pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
		if err != nil {
			return false
		}
		helper = track(t, pid)
		return true
	})
	waitFor(t, 5*time.Second, "the helper to lead a session of its own", func() bool { return pgid(helper.pid) == helper.pid })
	return leader, helper, argv
}

// TestKillKeepsItsGraceWhenItsAskerGoesAway: a client that stops waiting
// for a kill (Ctrl-C, a closed control connection) does not cut the
// leak's SIGTERM grace short: the leak, which cleans up on SIGTERM,
// still gets to. On the first edition the cancelled wait sent SIGKILL at
// once, and the clean-up never ran.
func TestKillKeepsItsGraceWhenItsAskerGoesAway(t *testing.T) {
	cleaned := filepath.Join(t.TempDir(), "cleaned")
	argv := []string{"sh", "-c", "trap 'sleep 0.3; echo yes > " + cleaned + "; exit 0' TERM; while :; do sleep 0.05; done"}
	leader := plantLeader(t, argv...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := source{{PID: leader.pid, Server: "memory", Command: argv, StartedAt: leader.start, Run: "earlier"}}
	ls, err := Find(ctx, thisHome, src, nil, nil)
	if err != nil || findLeak(ls, leader.pid) == nil {
		t.Fatalf("planted leader %d: %+v %v", leader.pid, ls, err)
	}
	oldGroup, oldOne := sendGroup, sendOne
	t.Cleanup(func() { sendGroup, sendOne = oldGroup, oldOne })
	// The asker goes away as soon as SIGTERM is sent.
	thenGoAway := func(send func(int, bool) error) func(int, bool) error {
		return func(pid int, term bool) error {
			err := send(pid, term)
			if term {
				cancel()
			}
			return err
		}
	}
	sendGroup, sendOne = thenGoAway(oldGroup), thenGoAway(oldOne)
	if err := Kill(ctx, thisHome, leader.pid, ls); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if b, err := os.ReadFile(cleaned); err != nil || strings.TrimSpace(string(b)) != "yes" {
		t.Fatalf("the leak did not get its SIGTERM grace once its asker went away: %q, %v", b, err)
	}
}

// TestGone: a process is provably gone when no process has its PID, or
// the one that has it started at another time; a running one with the
// same start, or with no recorded start, is not.
func TestGone(t *testing.T) {
	ctx := context.Background()
	self := os.Getpid()
	start, err := StartTime(ctx, self)
	if err != nil {
		t.Fatal(err)
	}
	exited := exec.Command("sh", "-c", "exit 0")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		pid   int
		start time.Time
		want  bool
	}{
		{"running", self, start, false},
		{"running, start within the tolerance", self, start.Add(StartTolerance / 2), false},
		{"running, start not recorded", self, time.Time{}, false},
		{"PID reused", self, start.Add(-time.Hour), true},
		{"exited and reaped", exited.Process.Pid, start, true},
		{"exited and reaped, start not recorded", exited.Process.Pid, time.Time{}, true},
	} {
		if got, err := Gone(ctx, tc.pid, tc.start); got != tc.want || err != nil {
			t.Errorf("%s: Gone(%d, %s) = %v, %v; want %v", tc.name, tc.pid, tc.start, got, err, tc.want)
		}
	}
}
