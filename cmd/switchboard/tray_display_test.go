package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
	a := &trayApp{log: &syncBuffer{}, done: make(chan error, 1)}
	a.cmd = exec.Command(sbBin)
	a.cmd.Env = append(clientEnv(home), "DISPLAY="+display)
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

// stop sends the app SIGTERM and returns its exit.
func (a *trayApp) stop() error {
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-a.done:
		a.done <- err
		return err
	case <-time.After(30 * time.Second):
		return errors.New("still running 30 s after SIGTERM")
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
	// accepts clients.
	cmd := exec.Command(xvfb, "-displayfd", "3", "-screen", "0", "1280x800x24", "-nolisten", "tcp")
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
