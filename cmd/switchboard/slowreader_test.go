//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A connect that gives up on its session (its pool killed, no pool may be
// started and none came) answers each call in flight itself, however
// many, to a client that reads slowly: its answers are more than the
// client's pipe holds, and it writes them all, whole, before it exits.
// The pool it was attached to had made the client's pipes non-blocking
// (the flag is the pipe's, shared with the connect's own stdin and
// stdout); on the first edition connect's write of its answers met a full
// pipe, failed, and connect exited with 113 of 400 calls answered and the
// last answer cut.
func TestGiveUpAnswersASlowReader(t *testing.T) {
	t.Parallel() // waits userStartWait for nothing; its pool and home are its own
	first := serve(t, noClientStarts(fakeConfig(t)))
	s, stdout := connectOwnPipe(t, first)
	s.initialize("slow-reader")
	const calls = 400
	killWithCallsInFlight(t, first, s, calls)
	// The client reads nothing until connect has filled its pipe.
	waitForWithin(t, userStartWait+30*time.Second, "connect to fill its client's pipe", func() bool {
		return pipeHolds(t, stdout) >= 60<<10
	})
	answered := map[string]bool{}
	for {
		line, err := s.out.ReadString('\n')
		if errors.Is(err, io.EOF) {
			if line != "" {
				t.Errorf("connect's output ends inside a line: %.80q", line)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var r reply
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not an answer: %.200q", line)
		}
		if !strings.Contains(line, `"code":-32003`) || !strings.Contains(line, `"mayHaveExecuted":true`) {
			t.Errorf("answer %s: %.200s", r.ID, line)
		}
		answered[string(r.ID)] = true
	}
	if len(answered) != calls {
		t.Errorf("%d of %d calls answered", len(answered), calls)
	}
	var exit *exec.ExitError
	if err := <-s.done; !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("connect exited: %v, want exit 3 (stderr: %s)", err, s.errb.String())
	}
	s.done <- nil
}

// connectOwnPipe is in.connect with the client's end of connect's stdout
// a pipe of the test's own, which stays open after connect exits (a
// command's StdoutPipe closes as it exits).
func connectOwnPipe(t *testing.T, in *instance) (*shim, *os.File) {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &shim{t: t, errb: &syncBuffer{}, done: make(chan error, 1), out: bufio.NewReaderSize(outR, 1<<20), stdout: outR}
	s.cmd = exec.Command(sbBin, "connect", "fake")
	s.cmd.Env = append(os.Environ(), "SWITCHBOARD_HOME="+in.home)
	s.cmd.Stdout, s.cmd.Stderr = outW, s.errb
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		s.stdin.Close()
		outR.Close()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s, outR
}

// pipeHolds is how many bytes wait in the pipe f reads.
func pipeHolds(t *testing.T, f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), syscall.TIOCINQ) }); err != nil {
		t.Fatal(err)
	}
	return n
}
