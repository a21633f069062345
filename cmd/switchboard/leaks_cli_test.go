package main

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
	"github.com/switchboard-mcp/switchboard/app/control"
	"github.com/switchboard-mcp/switchboard/app/leaks"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/store"
)

type leakJSON struct {
	PID       int      `json:"pid"`
	Server    string   `json:"server"`
	Command   []string `json:"command"`
	StartedAt string   `json:"startedAt"`
	RSSBytes  uint64   `json:"rssBytes"`
	Reason    string   `json:"reason"`
	Kind      string   `json:"kind"`
	Proven    bool     `json:"proven"`
}

// leaksJSON runs `switchboard leaks --json` in home.
func leaksJSON(t *testing.T, home string) []leakJSON {
	t.Helper()
	cmd := exec.Command(sbBin, "leaks", "--json")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("leaks --json: %v\n%s", err, out)
	}
	var ls []leakJSON
	if err := json.Unmarshal(out, &ls); err != nil || ls == nil {
		t.Fatalf("leaks --json printed %q (%v); want a JSON array", out, err)
	}
	for _, l := range ls {
		if _, err := time.Parse(time.RFC3339, l.StartedAt); err != nil {
			t.Errorf("startedAt %q is not RFC 3339", l.StartedAt)
		}
	}
	return ls
}

func leakOf(ls []leakJSON, pid int) *leakJSON {
	for i := range ls {
		if ls[i].PID == pid {
			return &ls[i]
		}
	}
	return nil
}

// sbIn runs the CLI in home and returns stdout, stderr and the exit code.
func sbIn(home string, args ...string) (string, string, int) {
	cmd := exec.Command(sbBin, args...)
	cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+home)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return out.String(), errb.String(), code
}

// plantDetached leaves a process behind the way a crashed pool's child
// is left: re-parented to init, leading its own process group.
func plantDetached(t *testing.T, pidfile string, args ...string) int {
	t.Helper()
	return plantDetachedEnv(t, "", pidfile, args...)
}

// plantDetachedEnv is plantDetached with environment assignments (sh
// syntax, "A=1 B=2") for the planted process.
func plantDetachedEnv(t *testing.T, env, pidfile string, args ...string) int {
	t.Helper()
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid(1) to plant a detached process")
	}
	script := fmt.Sprintf("%s %s %s %s </dev/null >/dev/null 2>&1 &", env, setsid, fakeBin, strings.Join(args, " "))
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("plant: %v\n%s", err, out)
	}
	pid := readPID(t, pidfile)
	t.Cleanup(func() {
		if alive(pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// plantGrandchild starts a process as a server's child would leave a
// grandchild behind: a shell leads a new session and process group,
// writes its PID to leaderFile, starts the fake server in them with env
// (sh syntax, "A=1 B=2") and exits. It returns the server's PID.
func plantGrandchild(t *testing.T, env, leaderFile, pidfile string, args ...string) int {
	t.Helper()
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid(1) to plant a process group")
	}
	inner := fmt.Sprintf("echo $$ > %s; %s %s %s </dev/null >/dev/null 2>&1 &", leaderFile, env, fakeBin, strings.Join(args, " "))
	// Single quotes: $$ is the inner shell's PID, not the outer one's.
	script := fmt.Sprintf("%s sh -c '%s' </dev/null >/dev/null 2>&1 &", setsid, inner)
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("plant: %v\n%s", err, out)
	}
	pid := readPID(t, pidfile)
	t.Cleanup(func() {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// A pool is SIGKILLed; its child dies with it. A child planted from a
// "previous run" is listed by `switchboard leaks --json` (with no pool and
// through the next pool) and killed by `switchboard kill`; unrelated PIDs
// are refused.
func TestLeaksAcrossRuns(t *testing.T) {
	dir := homeDir(t)
	childFile := filepath.Join(dir, "child.pid")
	orphanFile := filepath.Join(dir, "orphan.pid")
	// "lingering" is configured but never started by the pool: its
	// -startup-delay keeps a copy alive without a client.
	config := fmt.Sprintf(`{"mcpServers":{
		"fake": {"command": %q, "args": ["-pidfile", %q]},
		"lingering": {"command": %q, "args": ["-startup-delay", "1h", "-pidfile", %q]}}}`,
		fakeBin, childFile, fakeBin, orphanFile)
	first := serve(t, noClientStarts(config))
	home := first.home
	s := first.connect(t, "fake")
	s.initialize("c")
	child := readPID(t, childFile)
	db := filepath.Join(home, "history.db")
	waitFor(t, "the child in the history database", func() bool { return recordedChildren(t, db)[child] == "fake" })
	// Its start is recorded on the clock the next run compares with: the
	// OS's start time of the process, not the pool's clock after Start.
	osStart, err := leaks.StartTime(context.Background(), child)
	if err != nil {
		t.Fatal(err)
	}
	if got := recordedStart(t, db, child); !got.Equal(osStart) {
		t.Errorf("recorded process start %s; the OS says %s (off by %s)", got.Format(time.RFC3339Nano),
			osStart.Format(time.RFC3339Nano), got.Sub(osStart))
	}

	// SIGKILL the pool: on Linux the child dies with it (Pdeathsig).
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err = <-first.done
	first.done <- err
	killedAt := time.Now()
	// A liveness wait: a child that outlived its pool is a leak, however
	// soon after the kill it would have gone.
	waitFor(t, "the child to die with the pool", func() bool { return !alive(child) })
	t.Logf("child gone %s after the pool's SIGKILL", time.Since(killedAt))

	// A child of a previous run that did survive, recorded by that run.
	plantedFile := filepath.Join(dir, "planted.pid")
	planted := plantDetached(t, plantedFile, "-startup-delay", "1h", "-pidfile", plantedFile)
	started, err := leaks.StartTime(context.Background(), planted)
	if err != nil {
		t.Fatal(err)
	}
	// One that carries the marker of this home's run that has ended, in
	// the process group and session of a child that run started and saw
	// exit (a grandchild left behind): proven.
	markedFile := filepath.Join(dir, "marked.pid")
	leaderFile := filepath.Join(dir, "leader.pid")
	leaderStart := time.Now().Add(-time.Second) // before it, on the OS's clock
	marked := plantGrandchild(t, leaks.RunEnv+"=1@0@"+home+" SWITCHBOARD_SERVER=lingering", leaderFile, markedFile,
		"-startup-delay", "1h", "-pidfile", markedFile)
	leader := readPID(t, leaderFile)
	previous, err := store.Open(db, nil) // this test process is another run
	if err != nil {
		t.Fatal(err)
	}
	previous.Record(pool.Event{Kind: pool.EventBackendStarted, Server: "fake", PID: planted, ProcessStart: started, Command: []string{fakeBin}})
	previous.Record(pool.Event{Kind: pool.EventBackendStarted, Server: "lingering", PID: leader, ProcessStart: leaderStart, Command: []string{"sh"}})
	previous.Record(pool.Event{Kind: pool.EventBackendExited, Server: "lingering", PID: leader})
	if err := previous.Close(); err != nil {
		t.Fatal(err)
	}

	// No pool running: the CLI looks by itself.
	ls := leaksJSON(t, home)
	if l := leakOf(ls, planted); l == nil || l.Server != "fake" || l.Kind != "recorded" || l.RSSBytes == 0 ||
		!strings.HasPrefix(l.Reason, fmt.Sprintf("recorded child of an earlier run (pid %d started at ", planted)) {
		t.Fatalf("planted child %d, no pool: %+v", planted, ls)
	}
	if leakOf(ls, child) != nil {
		t.Errorf("the dead child %d is reported", child)
	}

	// The next run sees it too, and never its own child.
	second := serveHome(t, home)
	s2 := second.connect(t, "fake")
	s2.initialize("c")
	own := readPID(t, childFile)
	// An orphan of some other proxy that runs a configured server: a
	// suspect, since nothing proves it is Switchboard's.
	orphan := plantDetached(t, orphanFile, "-startup-delay", "1h", "-pidfile", orphanFile)
	ls = leaksJSON(t, home)
	if leakOf(ls, planted) == nil || leakOf(ls, own) != nil {
		t.Fatalf("with a pool: planted %d, own child %d: %+v", planted, own, ls)
	}
	if l := leakOf(ls, orphan); l == nil || l.Server != "lingering" || l.Kind != "orphan" || l.Proven ||
		l.Reason != "matches configured server lingering and its parent is init (PID 1); it carries no Switchboard run marker, so it may be another program's: listed, never killed" {
		t.Errorf("orphan %d: %+v", orphan, ls)
	}
	if l := leakOf(ls, marked); l == nil || l.Server != "lingering" || l.Kind != "marked" || !l.Proven {
		t.Errorf("marked orphan %d: %+v", marked, ls)
	}
	if _, stderr, code := sbIn(home, "kill", strconv.Itoa(orphan)); code == 0 || !strings.Contains(stderr, "carries no Switchboard run marker") {
		t.Errorf("kill of the unmarked orphan: exit %d, stderr %q", code, stderr)
	}
	if out, _, _ := sbIn(home, "leaks"); !strings.Contains(out, strconv.Itoa(planted)) || !strings.Contains(out, "lingering") {
		t.Errorf("leaks table:\n%s", out)
	}

	// Refusals: the CLI's own shell, this test, the pool's parent.
	shell := exec.Command("sh", "-c", `"$0" kill $$`, sbBin)
	shell.Env = append(os.Environ(), "SWITCHBOARD_HOME="+home)
	out, err := shell.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), "refusing to kill PID ") ||
		!strings.Contains(string(out), "it is not a known MCP backend (not started by Switchboard and does not match a configured server)") {
		t.Errorf("kill of its own shell: %v %q", err, out)
	}
	for _, pid := range []int{os.Getpid(), 1} {
		_, stderr, code := sbIn(home, "kill", strconv.Itoa(pid))
		want := fmt.Sprintf("switchboard: refusing to kill PID %d: it is not a known MCP backend (not started by Switchboard and does not match a configured server)\n", pid)
		if code == 0 || stderr != want {
			t.Errorf("kill %d: exit %d, stderr %q", pid, code, stderr)
		}
	}

	// Kill the planted child: exit 0, gone.
	stdout, stderr, code := sbIn(home, "kill", strconv.Itoa(planted))
	if code != 0 || stdout != fmt.Sprintf("killed PID %d (fake)\n", planted) {
		t.Fatalf("kill %d: exit %d, stdout %q, stderr %q", planted, code, stdout, stderr)
	}
	waitFor(t, "the planted child to be gone", func() bool { return !alive(planted) })
	// A listed leak that has exited since (killed twice, or it ended on
	// its own): nothing to kill, which is what was asked for.
	stdout, stderr, code = sbIn(home, "kill", strconv.Itoa(planted))
	if code != 0 || stdout != fmt.Sprintf("PID %d is not running: nothing to kill\n", planted) || stderr != "" {
		t.Errorf("kill of an exited leak %d: exit %d, stdout %q, stderr %q", planted, code, stdout, stderr)
	}

	// The marked orphan is killed by PID; the unmarked one and the pool's
	// own child live on. (Not `kill --all-leaked`: it kills every proven
	// leak of this home, this user's other tests' included.
	// TestKillAllLeaked in app shows what it picks, TestReportKills what
	// it prints, TestLeaksStayInTheirHome what it leaves to other homes.)
	stdout, stderr, code = sbIn(home, "kill", strconv.Itoa(marked))
	if code != 0 || stdout != fmt.Sprintf("killed PID %d (lingering)\n", marked) {
		t.Fatalf("kill %d: exit %d, stdout %q, stderr %q", marked, code, stdout, stderr)
	}
	waitFor(t, "the marked orphan to be gone", func() bool { return !alive(marked) })
	if !alive(own) || !alive(orphan) {
		t.Errorf("killing the marked orphan killed the pool's own child (alive %v) or the suspect (alive %v)", alive(own), alive(orphan))
	}
	ls = leaksJSON(t, home)
	if leakOf(ls, planted) != nil || leakOf(ls, marked) != nil || leakOf(ls, own) != nil || leakOf(ls, orphan) == nil {
		t.Errorf("leaks after the kills: %+v", ls)
	}
	// Its owner ends the suspect.
	_ = syscall.Kill(-orphan, syscall.SIGKILL)
	waitFor(t, "the orphan to be gone", func() bool { return !alive(orphan) })
	// The pool's own child is an MCP backend too: killed through the
	// pool (the way to end a hung one), which replaces it, as the line
	// says and the README documents.
	stdout, stderr, code = sbIn(home, "kill", strconv.Itoa(own))
	if code != 0 || stdout != fmt.Sprintf("killed PID %d (fake): a running child of this pool: it ends as in a crash, and the pool starts a new one\n", own) {
		t.Errorf("kill own child: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	waitFor(t, "the own child to be gone", func() bool { return !alive(own) })
	waitFor(t, "the pool to start a new child", func() bool {
		for _, b := range second.status().Backends {
			if b.Server == "fake" && b.PID > 0 && b.PID != own && b.State == "ready" {
				return true
			}
		}
		return false
	})
	if _, stderr, code := sbIn(home, "kill"); code == 0 || !strings.Contains(stderr, "either a PID or --all-leaked") {
		t.Errorf("kill without arguments: exit %d %q", code, stderr)
	}
}

// TestLeaksInAnEarlierVersionsHistory: an earlier version's pool crashed,
// leaving a child it recorded in its history database (schema version
// 7), and this build is installed; before any pool of it runs, `leaks`
// and `kill` without a pool read that child from the old schema, leaving
// the schema to the next pool to upgrade. A history that cannot be read
// at all fails them, saying why, rather than reporting no leaks.
func TestLeaksInAnEarlierVersionsHistory(t *testing.T) {
	home := homeDir(t)
	db := filepath.Join(home, "history.db")
	plantedFile := filepath.Join(home, "planted.pid")
	planted := plantDetached(t, plantedFile, "-startup-delay", "1h", "-pidfile", plantedFile)
	started, err := leaks.StartTime(context.Background(), planted)
	if err != nil {
		t.Fatal(err)
	}
	previous, err := store.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	previous.Record(pool.Event{Kind: pool.EventBackendStarted, Server: "fake", PID: planted, ProcessStart: started, Command: []string{fakeBin}})
	if err := previous.Close(); err != nil {
		t.Fatal(err)
	}
	// Version 7 is version 8 without runs.alive.
	conn, err := sql.Open("sqlite3", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(`ALTER TABLE runs DROP COLUMN alive; PRAGMA user_version = 7`); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	if l := leakOf(leaksJSON(t, home), planted); l == nil || l.Server != "fake" || l.Kind != "recorded" || !l.Proven {
		t.Fatalf("the earlier version's child %d: %+v", planted, l)
	}
	stdout, stderr, code := sbIn(home, "kill", "--all-leaked")
	if code != 0 || stdout != fmt.Sprintf("killed PID %d (fake)\n", planted) {
		t.Fatalf("kill --all-leaked: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	waitFor(t, "the planted child to be gone", func() bool { return !alive(planted) })
	conn, err = sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := conn.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 7 {
		t.Errorf("schema version %d (%v) after the CLI read it; want 7, as it was", v, err)
	}
	conn.Close()

	if err := os.WriteFile(db, []byte(strings.Repeat("not a database ", 300)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"leaks"}, {"kill", "--all-leaked"}} {
		stdout, stderr, code := sbIn(home, args...)
		if code == 0 || strings.Contains(stdout, "no leaked backends") || !strings.Contains(stderr, db) {
			t.Errorf("%v with an unreadable history: exit %d, stdout %q, stderr %q; want a failure naming %s", args, code, stdout, stderr, db)
		}
	}
}

// TestLeakedGrandchildFoundByMarker: a grandchild that ignores stdin EOF
// (the fake server's `sleep 1000`), whose command line matches no
// configured server, survives a SIGKILL of the pool; the run marker it
// inherited proves where it came from, so `leaks` lists it and `kill`
// ends it.
func TestLeakedGrandchildFoundByMarker(t *testing.T) {
	dir := homeDir(t)
	gpFile := filepath.Join(dir, "grandchild.pid")
	in := serve(t, noClientStarts(fakeConfig(t, "-grandchild", "-grandchild-pidfile", gpFile)))
	s := in.connect(t, "fake")
	s.initialize("c")
	gp := readPID(t, gpFile)
	t.Cleanup(func() { _ = syscall.Kill(gp, syscall.SIGKILL) })
	if l := leakOf(leaksJSON(t, in.home), gp); l != nil {
		t.Fatalf("the live run's grandchild %d is reported: %+v", gp, l)
	}
	childRecorded(t, in.home, gp)
	goAway(t, in, true)
	if !alive(gp) {
		t.Skip("the grandchild died with the pool; nothing leaked to find")
	}
	l := leakOf(leaksJSON(t, in.home), gp)
	if l == nil || l.Kind != "marked" || l.Server != "fake" || !strings.Contains(l.Reason, "SWITCHBOARD_RUN=") ||
		!strings.Contains(l.Reason, "that has ended") {
		t.Fatalf("grandchild %d after the pool's SIGKILL: %+v", gp, l)
	}
	if out, errOut, code := sbIn(in.home, "kill", strconv.Itoa(gp)); code != 0 {
		t.Fatalf("kill %d: exit %d: %s %s", gp, code, out, errOut)
	}
	waitFor(t, "the leaked grandchild to die", func() bool { return !alive(gp) })
}

// TestLeaksStayInTheirHome: two homes on one machine (two users'
// Switchboards, or test suites side by side) each claim only their own
// leftovers. Home B's pool is SIGKILLed and leaves a grandchild behind;
// home A, with no pool and then with one, neither lists it nor kills it
// (not by PID, not with --all-leaked), while B lists it and kills it. On
// the first edition A listed it as a proven leak of server fake, which A
// does not even configure, and `kill --all-leaked` in A killed it.
func TestLeaksStayInTheirHome(t *testing.T) {
	dirB := homeDir(t)
	gpFile := filepath.Join(dirB, "grandchild.pid")
	b := serve(t, noClientStarts(fakeConfig(t, "-grandchild", "-grandchild-pidfile", gpFile)))
	s := b.connect(t, "fake")
	s.initialize("c")
	gp := readPID(t, gpFile)
	t.Cleanup(func() { _ = syscall.Kill(gp, syscall.SIGKILL) })
	childRecorded(t, b.home, gp)
	goAway(t, b, true)
	if !alive(gp) {
		t.Skip("the grandchild died with the pool; nothing leaked to find")
	}

	// Home A configures a server of its own, none called fake.
	a := homeDir(t)
	config := fmt.Sprintf(`{"mcpServers":{"other":{"command":%q,"args":["-startup-delay","1h"]}}}`, fakeBin)
	if err := os.WriteFile(filepath.Join(a, "config.json"), []byte(noClientStarts(config)), 0o600); err != nil {
		t.Fatal(err)
	}
	notA := func(how string) {
		t.Helper()
		if l := leakOf(leaksJSON(t, a), gp); l != nil {
			t.Fatalf("%s: home A lists home B's grandchild %d: %+v", how, gp, *l)
		}
		_, stderr, code := sbIn(a, "kill", strconv.Itoa(gp))
		want := fmt.Sprintf("switchboard: refusing to kill PID %d: it belongs to another Switchboard home (%s); "+
			"only that home's Switchboard kills it (SWITCHBOARD_HOME=%s switchboard kill %d)\n", gp, b.home, b.home, gp)
		if code == 0 || stderr != want {
			t.Errorf("%s: kill %d in home A: exit %d, stderr %q\nwant %q", how, gp, code, stderr, want)
		}
		stdout, stderr, code := sbIn(a, "kill", "--all-leaked")
		if code != 0 || strings.Contains(stdout+stderr, strconv.Itoa(gp)) || !alive(gp) {
			t.Fatalf("%s: kill --all-leaked in home A: exit %d, stdout %q, stderr %q; home B's grandchild alive %v", how, code, stdout, stderr, alive(gp))
		}
	}
	notA("no pool in home A")
	serveHome(t, a)
	notA("a pool in home A")

	// Home B still finds its own, and kills it.
	l := leakOf(leaksJSON(t, b.home), gp)
	if l == nil || l.Kind != "marked" || !l.Proven || l.Server != "fake" {
		t.Fatalf("home B's grandchild %d in home B: %+v", gp, l)
	}
	if stdout, stderr, code := sbIn(b.home, "kill", "--all-leaked"); code != 0 || !strings.Contains(stdout, fmt.Sprintf("killed PID %d (fake)\n", gp)) {
		t.Fatalf("kill --all-leaked in home B: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	waitFor(t, "home B's grandchild to die", func() bool { return !alive(gp) })
}

// TestDetachedHelperOfALiveChild: a server's child detaches a helper on
// purpose (mcp-remote opens the user's browser for OAuth; a build tool
// starts its daemon): re-parented to init, it carries the run's marker.
// While that server's child runs, `leaks` lists the helper as a suspect
// and `kill` refuses it; once the child has exited it is still a suspect,
// `inherited`: it left the child's process group and session with
// setsid, as a program that inherited the marker would be.
func TestDetachedHelperOfALiveChild(t *testing.T) {
	dir := homeDir(t)
	helperFile := filepath.Join(dir, "helper.pid")
	childFile := filepath.Join(dir, "child.pid")
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid(1) to detach a helper")
	}
	// A double fork, and a session of its own: stopping the server does
	// not end it, as it does not end a browser.
	script := fmt.Sprintf("(%s sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > %s); exec %s -pidfile %s", setsid, helperFile, fakeBin, childFile)
	config := fmt.Sprintf(`{"mcpServers":{"oauth":{"command":"sh","args":["-c",%q]}}}`, script)
	in := serve(t, noClientStarts(config))
	s := in.connect(t, "oauth")
	s.initialize("c")
	child := readPID(t, childFile)
	helper := readPID(t, helperFile)
	t.Cleanup(func() { _ = syscall.Kill(helper, syscall.SIGKILL) })
	// Its parent, the subshell (a child of the server's child), exits.
	waitFor(t, "the helper to be re-parented", func() bool { p := ppid(helper); return p != 0 && ppid(p) != child })

	l := leakOf(leaksJSON(t, in.home), helper)
	if l == nil || l.Kind != "detached" || l.Proven || l.Server != "oauth" ||
		!strings.Contains(l.Reason, fmt.Sprintf("server oauth still has a live child (PID %d)", child)) {
		t.Fatalf("helper %d of a live child: %+v", helper, l)
	}
	if _, stderr, code := sbIn(in.home, "kill", strconv.Itoa(helper)); code == 0 || !strings.Contains(stderr, "still has a live child") {
		t.Errorf("kill of the helper of a live child: exit %d, stderr %q", code, stderr)
	}
	if !alive(helper) {
		t.Fatal("the refused helper died")
	}

	// The child ends: nothing vouches for the helper any more.
	if _, err := in.run("stop", "oauth"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the child to exit", func() bool { return !alive(child) })
	// It left its child's process group and session: nothing proves it is
	// not a program that merely inherited the marker.
	l = leakOf(leaksJSON(t, in.home), helper)
	if l == nil || l.Kind != "inherited" || l.Proven || !strings.Contains(l.Reason, "left behind by server oauth after its child exited") {
		t.Fatalf("helper %d after its server's child exited: %+v", helper, l)
	}
	if _, stderr, code := sbIn(in.home, "kill", strconv.Itoa(helper)); code == 0 || !strings.Contains(stderr, "merely inherited the marker") {
		t.Errorf("kill of the helper that left its child's group: exit %d, stderr %q", code, stderr)
	}
	if !alive(helper) {
		t.Fatal("the refused helper died")
	}
}

// childRecorded waits until the history database of home records the
// child whose process group gp, its grandchild, is in: the pool writes
// its history in batches, and a pool killed before it wrote a child's
// start leaves that child's grandchildren unproven (inherited).
func childRecorded(t *testing.T, home string, gp int) {
	t.Helper()
	child, err := syscall.Getpgid(gp)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(home, "history.db")
	waitFor(t, "the child in the history database", func() bool { return recordedChildren(t, db)[child] != "" })
}

// ppid is pid's parent, or 0 if it cannot be read.
func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// recordedStart is the process start time the history database at db
// has recorded for pid.
func recordedStart(t *testing.T, db string, pid int) time.Time {
	t.Helper()
	conn, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var us int64
	if err := conn.QueryRow(`SELECT process_start FROM backends WHERE pid = ?`, pid).Scan(&us); err != nil {
		t.Fatalf("process_start of PID %d: %v", pid, err)
	}
	return time.UnixMicro(us)
}

// recordedChildren lists the children the history database at db has
// recorded (pid -> server), read as any SQLite client would.
func recordedChildren(t *testing.T, db string) map[int]string {
	t.Helper()
	conn, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT pid, server FROM backends`)
	if err != nil {
		return nil // not created yet
	}
	defer rows.Close()
	out := map[int]string{}
	for rows.Next() {
		var pid int
		var server string
		if rows.Scan(&pid, &server) == nil {
			out[pid] = server
		}
	}
	return out
}

// TestReportKills: what `kill` prints for the results the pool (or the
// CLI itself) returns: killed PIDs and PIDs no longer running on stdout,
// suspects left alone and failures on stderr; the exit is non-zero only
// for a failure.
func TestReportKills(t *testing.T) {
	cases := []struct {
		name           string
		res            []control.KillResult
		all            bool
		stdout, stderr string
		err            string
	}{
		{name: "all, none", all: true, stdout: "no leaked backends\n"},
		{name: "all", all: true, res: []control.KillResult{
			{PID: 10, Server: "memory", Killed: true},
			{PID: 11, Server: "lingering", Skipped: true, Note: "no Switchboard run marker: may be another program's, so it is left alone"},
			{PID: 12, Server: "oauth", Skipped: true, Note: "a live child of server oauth may have started it on purpose: it is left alone while that child runs"},
			{PID: 13, NotRunning: true},
		},
			stdout: "killed PID 10 (memory)\nPID 13 is not running: nothing to kill\n",
			stderr: "switchboard: not killing PID 11 (lingering): no Switchboard run marker: may be another program's, so it is left alone\n" +
				"switchboard: not killing PID 12 (oauth): a live child of server oauth may have started it on purpose: it is left alone while that child runs\n"},
		{name: "all, one refused", all: true, res: []control.KillResult{
			{PID: 10, Server: "memory", Killed: true},
			{PID: 11, Refused: true, Error: "refusing to kill PID 11: the PID now belongs to another process"},
		},
			stdout: "killed PID 10 (memory)\n", stderr: "switchboard: refusing to kill PID 11: the PID now belongs to another process\n",
			err: "1 of 2 leaked backends were not killed"},
		{name: "one not running", res: []control.KillResult{{PID: 13, NotRunning: true}}, stdout: "PID 13 is not running: nothing to kill\n"},
		{name: "one refused", res: []control.KillResult{{PID: 14, Refused: true, Error: "refusing to kill PID 14: no"}},
			err: "refusing to kill PID 14: no"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut strings.Builder
			err := reportKills(&out, &errOut, c.res, c.all)
			if out.String() != c.stdout || errOut.String() != c.stderr || fmt.Sprint(err) != cmp.Or(c.err, "<nil>") {
				t.Errorf("stdout %q\nstderr %q\nerr %v\nwant %q, %q, %s", out.String(), errOut.String(), err, c.stdout, c.stderr, cmp.Or(c.err, "<nil>"))
			}
			if c.err != "" && c.name == "one refused" && !errors.Is(err, leaks.ErrRefused) {
				t.Errorf("a refusal is not ErrRefused: %v", err)
			}
		})
	}
}
