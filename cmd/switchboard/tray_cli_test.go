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

// TestTrayWithoutAWindowSystemServesHeadless: `switchboard` where DISPLAY
// names an X server that is not there (one left over from a closed SSH
// session) serves its clients headless, as `switchboard serve` does and
// says so, instead of dying in the window toolkit after starting the
// pool; SIGTERM then ends it with 0.
func TestTrayWithoutAWindowSystemServesHeadless(t *testing.T) {
	display := deadDisplay(t)
	home := homeDir(t)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(fakeConfig(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	in := &instance{t: t, home: home, log: &syncBuffer{}, done: make(chan error, 1)}
	in.cmd = exec.Command(sbBin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DISPLAY=") && !strings.HasPrefix(kv, "WAYLAND_DISPLAY=") {
			in.cmd.Env = append(in.cmd.Env, kv)
		}
	}
	in.cmd.Env = append(in.cmd.Env, "DISPLAY="+display, "SWITCHBOARD_HOME="+home)
	in.cmd.Stdout, in.cmd.Stderr = in.log, in.log
	in.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done, err := startPinned(in.cmd)
	if err != nil {
		t.Fatal(err)
	}
	go func() { in.done <- <-done }()
	t.Cleanup(func() {
		_ = in.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("log:\n%s", in.log.String())
		}
	})
	waitFor(t, "the pool to serve", func() bool {
		_, err := in.run("status", "--json")
		return err == nil
	})
	if !strings.Contains(in.log.String(), "the window system cannot be opened") {
		t.Errorf("it does not say why it runs headless:\n%s", in.log.String())
	}
	s := in.connect(t, "fake")
	s.initialize("claude-code")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"headless"}}}`)
	if got := toolText(s.recvID("1")); got != "headless" {
		t.Errorf("echo answered %q", got)
	}
	if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-in.done:
		if err != nil {
			t.Errorf("after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still running 30 s after SIGTERM")
	}
}

// TestClientStartedTrayWithoutAWindowSystemExitsWhenIdle: a client's shim
// sees a DISPLAY and starts the tray, which finds it cannot open it: it
// runs the pool headless and, as the headless pool a client starts, stops
// once no session is left for autostart.idleExit.
func TestClientStartedTrayWithoutAWindowSystemExitsWhenIdle(t *testing.T) {
	home := coldHome(t, `{"idleExit": "1s"}`)
	s := startShim(t, "fake", append(clientEnv(home), "DISPLAY="+deadDisplay(t)))
	s.initialize("only")
	var pool int
	waitFor(t, "the tray the client started", func() bool {
		for _, pid := range processesOf(home, "\x00tray\x00--started-by-client") {
			pool = pid
			return true
		}
		return false
	})
	t.Cleanup(func() { _ = syscall.Kill(pool, syscall.SIGKILL) })
	s.stdin.Close()
	if err := <-s.done; err != nil {
		t.Fatalf("shim exit: %v", err)
	}
	s.done <- nil
	waitFor(t, "the idle pool to stop", func() bool { return !alive(pool) })
	log, err := os.ReadFile(filepath.Join(home, "logs", "pool.log"))
	if err != nil || !strings.Contains(string(log), "the window system cannot be opened") ||
		!strings.Contains(string(log), "no session for the idle time") {
		t.Fatalf("pool.log (%v):\n%s", err, log)
	}
}

// deadDisplay is an X display name no server answers on.
func deadDisplay(t *testing.T) string {
	t.Helper()
	for n := 987; n < 1100; n++ {
		if _, err := os.Stat(fmt.Sprintf("/tmp/.X11-unix/X%d", n)); errors.Is(err, os.ErrNotExist) {
			return fmt.Sprintf(":%d", n)
		}
	}
	t.Fatal("no free X display number between :987 and :1099")
	return ""
}

// processesOf lists the live processes of the switchboard binary serving
// home whose command line contains args (NUL-separated).
func processesOf(home, args string) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		if exe, err := os.Readlink(d + "/exe"); err != nil || exe != sbBin {
			continue
		}
		cmdline, _ := os.ReadFile(d + "/cmdline")
		environ, _ := os.ReadFile(d + "/environ")
		if bytes.Contains(append(cmdline, 0), []byte(args+"\x00")) &&
			bytes.Contains(append([]byte{0}, environ...), []byte("\x00SWITCHBOARD_HOME="+home+"\x00")) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}
