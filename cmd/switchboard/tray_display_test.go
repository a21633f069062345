package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/flock"
)

// TestTrayTakesTheHeadlessPoolsPlace: a client that had no display started
// the headless pool; the user then launches the app on the desktop. That
// pool makes way: the app runs the pool with its dashboard open, and the
// client's session resumes with it. On the first edition the app exited 4
// ("runs headless"): launched from a menu, nothing visible happened.
func TestTrayTakesTheHeadlessPoolsPlace(t *testing.T) {
	display := xServer(t)
	home := coldHome(t, `{"idleExit": "10m"}`)
	s := coldShim(t, home)
	s.initialize("before")
	pools := poolsOf(home)
	if len(pools) != 1 {
		t.Fatalf("pools the client started: %v", pools)
	}
	headless := pools[0]

	tray := startTray(t, home, display)
	waitFor(t, "the headless pool to make way", func() bool { return !alive(headless) })
	in := &instance{t: t, home: home}
	waitFor(t, "the app's pool to answer", func() bool {
		out, err := in.run("status", "--json")
		return err == nil && strings.Contains(out, `"pid": `+strconv.Itoa(tray.cmd.Process.Pid)+",")
	})
	waitFor(t, "the app's dashboard window", func() bool { return len(windows(t, display, tray.cmd.Process.Pid, "^Switchboard$")) > 0 })

	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
	if got := toolText(s.recvID("1")); got != "after" {
		t.Errorf("the session's call after the app took over answered %q", got)
	}
	if st := in.status(); len(st.Sessions) != 1 {
		t.Errorf("the app's pool has %d sessions, want the client's one", len(st.Sessions))
	}
	if err := tray.stop(); err != nil {
		t.Errorf("the app after SIGTERM: %v", err)
	}
}

// TestTrayStopsCleanlyOnSIGHUP: the app run from a terminal that then
// closes (SIGHUP) stops as on Quit or SIGTERM: its pool stops its child,
// the app exits 0. On the first edition SIGHUP killed the app outright,
// its pool with it.
func TestTrayStopsCleanlyOnSIGHUP(t *testing.T) {
	display := xServer(t)
	pidfile := filepath.Join(homeDir(t), "child.pid")
	home := homeDir(t)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(noClientStarts(fakeConfig(t, "-pidfile", pidfile))), 0o600); err != nil {
		t.Fatal(err)
	}
	tray := startTray(t, home, display)
	in := &instance{t: t, home: home}
	waitFor(t, "the app's pool to answer", func() bool {
		out, err := in.run("status", "--json")
		return err == nil && strings.Contains(out, `"pid": `+strconv.Itoa(tray.cmd.Process.Pid)+",")
	})
	s := in.connect(t, "fake")
	s.initialize("c")
	child := readPID(t, pidfile)
	if err := tray.stopWith(syscall.SIGHUP); err != nil {
		t.Errorf("the app after SIGHUP: %v", err)
	}
	waitFor(t, "the child to be gone", func() bool { return !alive(child) })
}

// TestTrayOnANewAccount: the app started by a user whose home has no
// cache folder yet (a new account) makes the folder, and says nothing of
// it on its output. On the first edition fyne wrote "Fyne error:
// Failed to create fyne cache space" twice at every such start.
func TestTrayOnANewAccount(t *testing.T) {
	display := xServer(t)
	home := homeDir(t)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(noClientStarts(fakeConfig(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	user := homeDir(t) // the account's home: empty
	env := slices.DeleteFunc(clientEnv(home), func(kv string) bool {
		return strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_CACHE_HOME=")
	})
	tray := startTrayWith(t, append(env, "DISPLAY="+display, "HOME="+user))
	waitFor(t, "the app's dashboard window", func() bool { return len(windows(t, display, tray.cmd.Process.Pid, "^Switchboard$")) > 0 })
	if err := tray.stop(); err != nil {
		t.Errorf("the app after SIGTERM: %v", err)
	}
	if out := tray.log.String(); strings.Contains(out, "cache space") {
		t.Errorf("the app's output on a new account:\n%s", out)
	}
	if fi, err := os.Stat(filepath.Join(user, ".cache")); err != nil || !fi.IsDir() {
		t.Errorf("the account's cache folder: %v", err)
	}
}

// TestTrayShowsWhyTheHeadlessPoolStays: a pool run headless on purpose
// (`switchboard serve`, the systemd unit) keeps running when the user
// launches the app; the app says why, and what to do, in a window (its
// stderr goes nowhere from a menu) and exits 4 once it is closed. On the
// first edition it exited 4 at once, with nothing on screen.
func TestTrayShowsWhyTheHeadlessPoolStays(t *testing.T) {
	display := xServer(t)
	in := serve(t, fakeConfig(t))
	tray := startTray(t, in.home, display)
	waitFor(t, "the app's window saying why", func() bool {
		return len(windows(t, display, tray.cmd.Process.Pid, "^Switchboard is already running$")) > 0
	})
	err := tray.stop()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Errorf("the app's exit: %v, want 4", err)
	}
	for _, want := range []string{"runs headless on purpose", "systemctl --user stop switchboard"} {
		if !strings.Contains(tray.log.String(), want) {
			t.Errorf("its stderr does not say %q:\n%s", want, tray.log.String())
		}
	}
	if st, err := in.run("status", "--json"); err != nil || !strings.Contains(st, `"pid": `+strconv.Itoa(in.cmd.Process.Pid)+",") {
		t.Errorf("the headless pool is not the one running: %v\n%s", err, st)
	}
}

// TestTrayRunsThePoolWithTheClientsEnvironment: the headless pool a
// client started ran with the client's environment (a token exported in
// its terminal, an nvm PATH); the app launched on the desktop, which has
// neither, takes its place. Its pool runs with the client's environment,
// but for the desktop's own display variables: the server whose config
// reads ${CLIENT_TOKEN} starts again and the session resumes, its child
// sees the client's token and PATH and the app's DISPLAY, not the
// client's XAUTHORITY. On the first edition the app's pool ran with the
// desktop's environment: "server not started: CLIENT_TOKEN is not set",
// and the client's connect exited ("server is disabled").
func TestTrayRunsThePoolWithTheClientsEnvironment(t *testing.T) {
	display := xServer(t)
	home := coldHome(t, `{"idleExit": "10m"}`)
	cfg := fmt.Sprintf(`{"mcpServers":{"fake":{"command":%q,"env":{"TOK":"${CLIENT_TOKEN}"}}}, "autostart": {"idleExit": "10m"}}`, fakeBin)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var client []string
	for _, kv := range clientEnv(home) {
		if strings.HasPrefix(kv, "PATH=") {
			kv = "PATH=/client/nvm/bin:" + kv[len("PATH="):]
		}
		if !strings.HasPrefix(kv, "XAUTHORITY=") {
			client = append(client, kv)
		}
	}
	s := startShim(t, "fake", append(client, "CLIENT_TOKEN=secret", "XAUTHORITY=/client/xauthority"))
	s.initialize("before")
	headless := poolsOf(home)[0]

	var desktop []string // the app's: none of the client's variables, and no XAUTHORITY
	for _, kv := range clientEnv(home) {
		if !strings.HasPrefix(kv, "XAUTHORITY=") {
			desktop = append(desktop, kv)
		}
	}
	tray := startTrayWith(t, append(desktop, "DISPLAY="+display))
	waitFor(t, "the headless pool to make way", func() bool { return !alive(headless) })
	in := &instance{t: t, home: home}
	waitFor(t, "the app's pool to answer", func() bool {
		out, err := in.run("status", "--json")
		return err == nil && strings.Contains(out, `"pid": `+strconv.Itoa(tray.cmd.Process.Pid)+",")
	})
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pid","arguments":{}}}`)
	pid, err := strconv.Atoi(toolText(s.recvID("1")))
	if err != nil {
		t.Fatalf("the session's call after the app took over: %v", err)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(string(environ), "\x00")
	for _, want := range []string{"TOK=secret", "CLIENT_TOKEN=secret", "DISPLAY=" + display} {
		if !slices.Contains(env, want) {
			t.Errorf("the app's child lacks %s", want)
		}
	}
	if i := slices.IndexFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=/client/nvm/bin:") }); i < 0 {
		t.Errorf("the app's child does not have the client's PATH")
	}
	if slices.Contains(env, "XAUTHORITY=/client/xauthority") {
		t.Errorf("the app's child has the client's XAUTHORITY, not the desktop's (none)")
	}
	waitFor(t, "the app's dashboard window", func() bool { return len(windows(t, display, tray.cmd.Process.Pid, "^Switchboard$")) > 0 })
	if strings.Contains(tray.log.String(), "secret") {
		t.Errorf("the app's output tells the client's token:\n%s", tray.log.String())
	}
	if err := tray.stop(); err != nil {
		t.Errorf("the app after SIGTERM: %v", err)
	}
}

// TestTrayLeavesAPoolWhoseServerNeedsTheClientsSession: the headless
// pool a client started runs a server whose config reads ${XAUTHORITY},
// which the client had and the desktop the app is launched on has not.
// Making way would leave that server not started: the pool keeps running
// with the session, and the app says why in a window and exits 4 once it
// is closed. On the first edition the pool made way, and the app's pool
// did not start the server.
func TestTrayLeavesAPoolWhoseServerNeedsTheClientsSession(t *testing.T) {
	display := xServer(t)
	home := coldHome(t, `{"idleExit": "10m"}`)
	cfg := fmt.Sprintf(`{"mcpServers":{"fake":{"command":%q,"env":{"X":"${XAUTHORITY}"}}}, "autostart": {"idleExit": "10m"}}`, fakeBin)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var desktop []string
	for _, kv := range clientEnv(home) {
		if !strings.HasPrefix(kv, "XAUTHORITY=") {
			desktop = append(desktop, kv)
		}
	}
	s := startShim(t, "fake", append(desktop, "XAUTHORITY=/client/xauthority"))
	s.initialize("before")
	headless := poolsOf(home)[0]

	tray := startTrayWith(t, append(desktop, "DISPLAY="+display))
	waitFor(t, "the app's window saying why", func() bool {
		return len(windows(t, display, tray.cmd.Process.Pid, "^Switchboard is already running$")) > 0
	})
	err := tray.stop()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Errorf("the app's exit: %v, want 4", err)
	}
	if want := "mcpServers.fake.env.X: environment variable XAUTHORITY is not set"; !strings.Contains(tray.log.String(), want) {
		t.Errorf("its stderr does not say %q:\n%s", want, tray.log.String())
	}
	if !alive(headless) {
		t.Fatal("the headless pool stopped")
	}
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still"}}}`)
	if got := toolText(s.recvID("1")); got != "still" {
		t.Errorf("the session's call answered %q", got)
	}
}

// TestTwoLaunchesAtOnceBesideAHeadlessPool: the user double-clicks the
// app while a headless pool a client started runs. Both launches find it
// headless; the first to hold the start lock takes its place, the other
// then shows that one's dashboard and exits 0. The start lock, held by
// the test until both have asked the pool to make way, makes the race
// sure. On the first edition the second asked the first's tray to make
// way, and showed a window saying a pool (the one gone) ran headless
// on purpose, with how to stop it, and exited 4.
func TestTwoLaunchesAtOnceBesideAHeadlessPool(t *testing.T) {
	display := xServer(t)
	home := coldHome(t, `{"idleExit": "10m"}`)
	s := coldShim(t, home)
	s.initialize("before")
	headless := poolsOf(home)[0]
	start, err := flock.TryLock(filepath.Join(home, "run", "start.lock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { start.Unlock() })

	a, b := startTray(t, home, display), startTray(t, home, display)
	waitFor(t, "both launches to ask the headless pool to make way", func() bool {
		return strings.Contains(a.log.String(), "asking it to make way") && strings.Contains(b.log.String(), "asking it to make way")
	})
	start.Unlock()
	waitFor(t, "the headless pool to make way", func() bool { return !alive(headless) })
	in := &instance{t: t, home: home}
	var winner, loser *trayApp
	waitFor(t, "one launch's pool to answer", func() bool {
		st, err := in.run("status", "--json")
		switch {
		case err != nil:
			return false
		case strings.Contains(st, `"pid": `+strconv.Itoa(a.cmd.Process.Pid)+","):
			winner, loser = a, b
		case strings.Contains(st, `"pid": `+strconv.Itoa(b.cmd.Process.Pid)+","):
			winner, loser = b, a
		}
		return winner != nil
	})
	if ok, err := loser.exited(30 * time.Second); !ok || err != nil {
		t.Errorf("the second launch: exited %v (%v), want 0", ok, err)
	}
	if want := fmt.Sprintf("already running (pid %d); it is showing its dashboard", winner.cmd.Process.Pid); !strings.Contains(loser.log.String(), want) {
		t.Errorf("the second launch does not say %q:\n%s", want, loser.log.String())
	}
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
	if got := toolText(s.recvID("1")); got != "after" {
		t.Errorf("the session's call after the app took over answered %q", got)
	}
	if err := winner.stop(); err != nil {
		t.Errorf("the app after SIGTERM: %v", err)
	}
}

// trayApp is a `switchboard` (tray app) process on a display.
type trayApp struct {
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan error
}

// startTray launches the app on display for home, as from the
// applications menu; it is killed when the test ends.
func startTray(t *testing.T, home, display string) *trayApp {
	t.Helper()
	return startTrayWith(t, append(clientEnv(home), "DISPLAY="+display))
}

// startTrayWith is startTray with the environment env.
func startTrayWith(t *testing.T, env []string) *trayApp {
	t.Helper()
	a := &trayApp{log: &syncBuffer{}, done: make(chan error, 1)}
	a.cmd = exec.Command(sbBin)
	a.cmd.Env = env
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done, err := startPinned(a.cmd)
	if err != nil {
		t.Fatal(err)
	}
	go func() { a.done <- <-done }()
	t.Cleanup(func() {
		_ = a.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("the app's output:\n%s", a.log.String())
		}
	})
	return a
}

// exited is the app's exit, once it has exited by itself within d.
func (a *trayApp) exited(d time.Duration) (ok bool, err error) {
	select {
	case err := <-a.done:
		a.done <- err
		return true, err
	case <-time.After(d):
		return false, nil
	}
}

// stop sends the app SIGTERM and returns its exit.
func (a *trayApp) stop() error { return a.stopWith(syscall.SIGTERM) }

// stopWith sends the app sig and returns its exit.
func (a *trayApp) stopWith(sig syscall.Signal) error {
	if err := a.cmd.Process.Signal(sig); err != nil {
		return err
	}
	select {
	case err := <-a.done:
		a.done <- err
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("still running 30 s after %v", sig)
	}
}

// startPinned starts cmd on an OS thread that stays locked to the
// goroutine waiting for it: Pdeathsig is sent when the thread that
// started the process ends (not the test process), and the runtime ends
// a thread whose locked goroutine returns. done has cmd's exit.
func startPinned(cmd *exec.Cmd) (done <-chan error, err error) {
	started, exited := make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	return exited, <-started
}

// xServer starts an X server of the test's own (Xvfb) and returns its
// display name. Without Xvfb and xdotool the test is skipped.
func xServer(t *testing.T) string {
	t.Helper()
	xvfb, err := exec.LookPath("Xvfb")
	if err != nil {
		t.Skip("needs Xvfb")
	}
	if _, err := exec.LookPath("xdotool"); err != nil {
		t.Skip("needs xdotool")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// -displayfd: it picks a free display and writes its number once it
	// accepts clients. -noreset: an X server resets when its last client
	// leaves, closing the connections still being set up, so the app's
	// could fail ("X11: Failed to open display") when a polling xdotool
	// left at that moment.
	cmd := exec.Command(xvfb, "-displayfd", "3", "-screen", "0", "1280x800x24", "-nolisten", "tcp", "-noreset")
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done, err := startPinned(cmd)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case err := <-done:
			if !t.Failed() {
				t.Errorf("the X server ended before the test did: %v", err)
			}
			return
		default:
		}
		_ = cmd.Process.Kill()
		<-done
	})
	_ = r.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("Xvfb did not say its display: %v", err)
	}
	return ":" + strings.TrimSpace(line)
}

// windows lists the windows of process pid on display whose name matches
// the regular expression name.
func windows(t *testing.T, display string, pid int, name string) []string {
	t.Helper()
	cmd := exec.Command("xdotool", "search", "--all", "--pid", strconv.Itoa(pid), "--name", name)
	cmd.Env = append(os.Environ(), "DISPLAY="+display)
	out, _ := cmd.Output() // exit 1: none
	return strings.Fields(string(out))
}
