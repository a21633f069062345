package pool

import (
	"bufio"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// A client that closed its input gets the answer to its last request
// even when the session is closed for it while that answer is on its
// way: between the request's end (no longer in flight) and its answer
// (written or queued), the session is not idle. The attack is the
// schedule: the session reader waiting for the session to go idle runs
// in that gap, which the hook holds open for as long as it takes.
func TestHalfClosedClientGetsTheAnswerBeingDelivered(t *testing.T) {
	r := newEndingRig(t)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	poolEnd, clientEnd := fileConn(t, fds[0], "pool end"), fileConn(t, fds[1], "client end")
	ended := make(chan struct{}) // the transport was closed, after the last answers were written
	r.s.closeConn = func(*session) {
		poolEnd.Close()
		close(ended)
	}
	r.s.startOutput(poolEnd.(deadlineWriter))
	pe := r.add(3, "3", stWritten, true)

	// What halfClose does once the client's input ends.
	idle := make(chan struct{})
	go func() {
		defer close(idle)
		r.s.closeWhenIdle(errInputClosed)
	}()
	waitUntil(t, "the session to wait for its request", func() bool {
		r.s.mu.Lock()
		defer r.s.mu.Unlock()
		return r.s.quiet != nil
	})

	// Between the request's end and its answer, wait for the session to
	// end its transport: it must not, so the wait ends at its deadline.
	testHookAnswering = func(*session) {
		select {
		case <-ended:
		case <-time.After(300 * time.Millisecond):
		}
	}
	t.Cleanup(func() { testHookAnswering = nil })

	answer, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`))
	if !r.b.finish(pe, answered(&answer)) {
		t.Fatal("the answer did not end the request")
	}
	<-idle

	_ = clientEnd.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(clientEnd).ReadString('\n')
	if err != nil || !strings.Contains(line, `"id":3`) {
		t.Fatalf("the client read %q, %v; want the answer to its request 3", line, err)
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
