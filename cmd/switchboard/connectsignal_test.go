package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestConnectEndsOnSignal: a client that stops its `switchboard connect`
// with SIGTERM or SIGINT, without closing its stdin, or whose terminal
// closes (SIGHUP), sees it end as the small switchboard-connect does
// (killed by the signal), whether it runs in-process
// (SWITCHBOARD_INPROCESS_CONNECT, or no switchboard-connect beside the
// binary, as after `go install`) or as the small program; and the pool's
// session ends with it. On the first edition the in-process
// connect caught both signals for a context it never looked at and went
// on relaying: the relay and its session stayed behind.
func TestConnectEndsOnSignal(t *testing.T) {
	in := serve(t, noClientStarts(fakeConfig(t)))
	small := filepath.Join(filepath.Dir(sbBin), "switchboard-connect")
	for _, tc := range []struct {
		name string
		env  []string
		exe  string
		sig  syscall.Signal
	}{
		{"small/SIGTERM", nil, small, syscall.SIGTERM},
		{"in-process/SIGTERM", []string{"SWITCHBOARD_INPROCESS_CONNECT=1"}, sbBin, syscall.SIGTERM},
		{"in-process/SIGINT", []string{"SWITCHBOARD_INPROCESS_CONNECT=1"}, sbBin, syscall.SIGINT},
		{"small/SIGHUP", nil, small, syscall.SIGHUP},
		{"in-process/SIGHUP", []string{"SWITCHBOARD_INPROCESS_CONNECT=1"}, sbBin, syscall.SIGHUP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startShim(t, "fake", append(os.Environ(), append(tc.env, "SWITCHBOARD_HOME="+in.home)...))
			s.initialize("signalled")
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", s.cmd.Process.Pid)); err != nil || exe != tc.exe {
				t.Fatalf("connect runs %q (%v), want %s", exe, err, tc.exe)
			}
			waitFor(t, "the session in status", func() bool { return len(in.status().Sessions) == 1 })
			if err := s.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-s.done:
				s.done <- err // for the cleanup
			case <-time.After(10 * time.Second):
				t.Fatalf("connect still runs 10 s after %v (its stdin open)", tc.sig)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("connect exit: %v, want killed by %v", err, tc.sig)
			}
			if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != tc.sig {
				t.Fatalf("connect exit: %v, want killed by %v", err, tc.sig)
			}
			waitFor(t, "the session to end", func() bool { return len(in.status().Sessions) == 0 })
		})
	}
}
