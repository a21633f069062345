//go:build unix

package pool

import (
	"bufio"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// A session that waits to be idle before it ends (a client that closed
// its input; a session handed back to its shim when the pool stops) is
// not idle while the answer to its last request is on its way: between
// the request's end (no longer in flight) and its answer (written or
// queued). Else it ends in that gap, and the answer is lost. The attack
// is the schedule: the hook holds the gap open and watches whether the
// wait returns in it.
func TestSessionIsNotIdleWhileAnAnswerIsOnItsWay(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait func(s *session)
	}{
		{"the client closed its input", func(s *session) { s.closeWhenIdle(errInputClosed) }},
		{"the session goes back to its shim", func(s *session) { s.waitIdle(time.Now().Add(time.Minute)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newEndingRig(t)
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			poolEnd, clientEnd := fileConn(t, fds[0], "pool end"), fileConn(t, fds[1], "client end")
			r.s.closeConn = func(*session) { poolEnd.Close() }
			r.s.startOutput(poolEnd.(deadlineWriter))
			pe := r.add(3, "3", stWritten, true)

			waited := make(chan struct{})
			go func() {
				defer close(waited)
				tc.wait(r.s)
			}()
			waitUntil(t, "the session to wait for its request", func() bool {
				r.s.mu.Lock()
				defer r.s.mu.Unlock()
				return r.s.quiet != nil
			})

			// The wait must not return in the gap: the hook waits for
			// it to, until a deadline.
			inGap := false
			testHookAnswering = func(*session) {
				select {
				case <-waited:
					inGap = true
				case <-time.After(300 * time.Millisecond):
				}
			}
			t.Cleanup(func() { testHookAnswering = nil })

			answer, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`))
			if !r.b.finish(pe, answered(&answer)) {
				t.Fatal("the answer did not end the request")
			}
			<-waited
			if inGap {
				t.Error("the session was idle while the answer to its last request was on its way")
			}
			_ = clientEnd.SetReadDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReader(clientEnd).ReadString('\n')
			if err != nil || !strings.Contains(line, `"id":3`) {
				t.Fatalf("the client read %q, %v; want the answer to its request 3", line, err)
			}
		})
	}
}

func fileConn(t *testing.T, fd int, name string) net.Conn {
	t.Helper()
	f := os.NewFile(uintptr(fd), name)
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The ledger an attached session shares with its shim lists a request
// until its answer is written to the client, not only until the pool
// has the answer: a pool that dies with the answer queued, or written in
// part, leaves the request owed, and the next pool answers it. The
// attack is a client that does not read: its answer waits in the pool.
func TestLedgerHoldsARequestUntilItsAnswerIsWritten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		conns  func(t *testing.T) (poolEnd, clientEnd net.Conn)
		answer string
	}{
		// A synchronous pipe: the pool cannot write without blocking, so
		// the answer is queued, and its write waits for the client.
		{"queued", func(*testing.T) (net.Conn, net.Conn) { return net.Pipe() }, "a short answer"},
		// A socket with a small buffer: the pool writes what fits at
		// once, and the rest waits for the client.
		{"cut short", smallSocketPair, strings.Repeat("a long answer ", 1<<14)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newEndingRig(t)
			led := &ledger{mem: make([]byte, wire.LedgerSize), drop: func() {}}
			r.s.ledger = led
			listed := func() []wire.Lost {
				led.mu.Lock()
				defer led.mu.Unlock()
				return wire.ReadLedger(led.mem)
			}
			poolEnd, clientEnd := tc.conns(t)
			t.Cleanup(func() { poolEnd.Close(); clientEnd.Close() })
			r.s.startOutput(poolEnd.(deadlineWriter))
			pe := r.add(3, "3", stWritten, true)
			if got := listed(); len(got) != 1 || got[0].ID != "3" {
				t.Fatalf("the ledger lists %v, want request 3", got)
			}

			answer, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"` + tc.answer + `"}]}}`))
			if !r.b.finish(pe, answered(&answer)) {
				t.Fatal("the answer did not end the request")
			}
			if got := listed(); len(got) != 1 || got[0].ID != "3" {
				t.Fatalf("with its answer unread, the ledger lists %v, want request 3 still", got)
			}

			_ = clientEnd.SetReadDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReaderSize(clientEnd, 1<<20).ReadString('\n')
			if err != nil || !strings.Contains(line, `"id":3`) || !strings.Contains(line, tc.answer) {
				t.Fatalf("the client read %d bytes, %v; want the answer to its request 3", len(line), err)
			}
			waitUntil(t, "the ledger to release request 3", func() bool { return len(listed()) == 0 })
		})
	}
}

// smallSocketPair is a connected pair of Unix sockets whose pool end
// takes a few KiB before a write would block.
func smallSocketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
			t.Fatal(err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4096); err != nil {
			t.Fatal(err)
		}
	}
	return fileConn(t, fds[0], "pool end"), fileConn(t, fds[1], "client end")
}
