package main

import (
	"bytes"
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
)

// clientEnv is the environment an MCP client gives a shim: the home set
// explicitly, and no display, so a pool it starts is the headless one.
func clientEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "DISPLAY", "WAYLAND_DISPLAY", "SWITCHBOARD_HOME", "SWITCHBOARD_INPROCESS_CONNECT", "SWITCHBOARD_NO_ATTACH":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "SWITCHBOARD_HOME="+home)
}

// coldHome is a home with the fake server configured and no pool running;
// every pool a client starts there is stopped when the test ends.
func coldHome(t *testing.T, autostart string) string {
	t.Helper()
	home := homeDir(t)
	cfg := fmt.Sprintf(`{"mcpServers":{"fake":{"command":%q}}, "autostart": %s}`, fakeBin, autostart)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range poolsOf(home) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		waitFor(t, "the pools a client started to stop", func() bool { return len(poolsOf(home)) == 0 })
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(home, "logs", "pool.log")); err == nil {
				t.Logf("pool.log:\n%s", log)
			}
		}
	})
	return home
}

// coldShim is `switchboard connect fake` started the way a client starts
// it, with no pool running (or not yet).
func coldShim(t *testing.T, home string) *shim {
	t.Helper()
	return startShim(t, "fake", clientEnv(home))
}

// killTheOnlyPool SIGKILLs the one pool serving home, waits for it to
// die, and returns the pools there were (that one).
func killTheOnlyPool(t *testing.T, home string) []int {
	t.Helper()
	pools := poolsOf(home)
	if len(pools) != 1 {
		t.Fatalf("pools: %v", pools)
	}
	if err := syscall.Kill(pools[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed pool to die", func() bool { return !alive(pools[0]) })
	return pools
}

// poolsOf lists the live `switchboard serve` processes serving home (not
// zombies: a killed orphan stays one on machines whose init does not reap).
func poolsOf(home string) []int { return processesOf(home, "\x00serve") }

// sessionOf is the session id field of /proc/PID/stat.
func sessionOf(pid int) int {
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 4 {
		return 0
	}
	sid, _ := strconv.Atoi(f[3])
	return sid
}

// Sixteen clients start at once with no pool: exactly one pool starts, in
// a session of its own (a client's group kill does not reach it), and all
// sixteen are served by one child.
func TestSixteenColdClientsStartOnePool(t *testing.T) {
	home := coldHome(t, `{"idleExit": "1m"}`)
	shims := make([]*shim, 16)
	for i := range shims {
		shims[i] = coldShim(t, home)
	}
	children := map[string]bool{}
	for i, s := range shims {
		s.initialize(fmt.Sprintf("client-%d", i))
		s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pid","arguments":{}}}`)
		children[toolText(s.recvID("1"))] = true
	}
	pools := poolsOf(home)
	if len(pools) != 1 {
		t.Fatalf("%d pools serve the home, want 1: %v", len(pools), pools)
	}
	if len(children) != 1 {
		t.Fatalf("the clients reached %d children: %v", len(children), children)
	}
	if sid := sessionOf(pools[0]); sid != pools[0] {
		t.Errorf("the pool (pid %d) runs in session %d, not one of its own", pools[0], sid)
	}
	cmd := exec.Command(sbBin, "status", "--json")
	cmd.Env = clientEnv(home)
	out, err := cmd.Output()
	if err != nil || strings.Count(string(out), `"transport": "stdio"`)+strings.Count(string(out), `"transport":"stdio"`) != 16 {
		t.Fatalf("status: %v\n%s", err, out)
	}
	// The clients leave; the pool they started stays for the next ones.
	for _, s := range shims {
		s.stdin.Close()
		if err := <-s.done; err != nil {
			t.Fatalf("shim exit: %v (%s)", err, s.errb.String())
		}
		s.done <- nil
	}
	if got := poolsOf(home); len(got) != 1 || got[0] != pools[0] {
		t.Fatalf("after the clients left: pools %v, want [%d]", got, pools[0])
	}
}

// A pool killed with SIGKILL leaves its socket file behind; the next
// client replaces it at once instead of waiting on it.
func TestClientReplacesAKilledPool(t *testing.T) {
	home := coldHome(t, `{"idleExit": "1m"}`)
	first := coldShim(t, home)
	first.initialize("first")
	pools := killTheOnlyPool(t, home)
	if _, err := os.Stat(filepath.Join(home, "run", "pool.sock")); err != nil {
		t.Fatalf("the killed pool left no socket file to recover from: %v", err)
	}
	start := time.Now()
	second := coldShim(t, home)
	second.initialize("second")
	second.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	if got := toolText(second.recvID("1")); got != "hi" {
		t.Fatalf("echo through the new pool: %q", got)
	}
	t.Logf("a client replaced a SIGKILLed pool and got its answer in %s", time.Since(start).Round(time.Millisecond))
	if now := poolsOf(home); len(now) != 1 || now[0] == pools[0] {
		t.Fatalf("pools after recovery: %v (killed: %d)", now, pools[0])
	}
}

// A pool a client started stops by itself once no session is left for
// autostart.idleExit; a pool started by hand (`serve`) does not.
func TestClientStartedPoolExitsWhenIdle(t *testing.T) {
	home := coldHome(t, `{"idleExit": "1s"}`)
	s := coldShim(t, home)
	s.initialize("only")
	pools := poolsOf(home)
	if len(pools) != 1 {
		t.Fatalf("pools: %v", pools)
	}
	s.stdin.Close()
	if err := <-s.done; err != nil {
		t.Fatalf("shim exit: %v", err)
	}
	s.done <- nil
	waitFor(t, "the idle pool to stop", func() bool { return !alive(pools[0]) })
	log, err := os.ReadFile(filepath.Join(home, "logs", "pool.log"))
	if err != nil || !strings.Contains(string(log), "started by a client") || !strings.Contains(string(log), "no session for the idle time") {
		t.Fatalf("pool.log (%v):\n%s", err, log)
	}
}

// With autostart.fromClients off, a client finding no pool fails with one
// line that says how to start it, and no pool appears.
func TestConnectWithoutAutostart(t *testing.T) {
	home := coldHome(t, `{"fromClients": false}`)
	cmd := exec.Command(sbBin, "connect", "fake")
	cmd.Env = clientEnv(home)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || strings.Count(string(out), "\n") != 1 ||
		!strings.Contains(string(out), "switchboard is not running") || !strings.Contains(string(out), "`switchboard serve`") ||
		!strings.Contains(string(out), "autostart.fromClients") {
		t.Fatalf("err %v, output %q", err, out)
	}
	if pools := poolsOf(home); len(pools) != 0 {
		t.Fatalf("a pool started anyway: %v", pools)
	}
}

// Two pools never serve one home: a second `serve` is refused while the
// first holds the instance lock, with its PID in the message.
func TestSecondServeIsRefused(t *testing.T) {
	in := serve(t, fakeConfig(t))
	cmd := exec.Command(sbBin, "serve")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+in.home)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 || !strings.Contains(string(out), "already running (pid "+strconv.Itoa(in.cmd.Process.Pid)+" ") {
		t.Fatalf("second serve: err %v, output %q", err, out)
	}
}
