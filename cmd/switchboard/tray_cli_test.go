package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	display := ""
	for n := 987; n < 1100; n++ {
		if _, err := os.Stat(fmt.Sprintf("/tmp/.X11-unix/X%d", n)); errors.Is(err, os.ErrNotExist) {
			display = fmt.Sprintf(":%d", n)
			break
		}
	}
	if display == "" {
		t.Fatal("no free X display number between :987 and :1099")
	}
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
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { in.done <- in.cmd.Wait() }()
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
