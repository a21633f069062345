//go:build unix

package pool_test

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An attached client that closes its end of its output, and leaves its
// input open, has gone away: nobody reads what it is sent. Its session
// ends then, its call in flight cancelled at the child (the call sleeps
// for a minute, and nothing is written to the client), and its shim is
// told. Another session of the same child goes on. (The pool looked for
// a reader of the output only when the input ended, and otherwise
// noticed one gone when an answer could not be written.)
func TestAttachedClientWhoseOutputIsGoneIsCancelled(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	a := tp.attach(t, "srv")
	a.initialize()
	other := tp.attach(t, "srv")
	other.initialize()
	if _, err := a.in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000}}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the sleep written to the child", func() bool {
		s := tp.Snapshot()
		return len(s.InFlight) == 1 && s.InFlight[0].WrittenToChild
	})

	a.outFile.Close() // the client's output has no reader now; its input is open
	eventually(t, "its session to end", func() bool { return len(tp.Snapshot().Sessions) == 1 })
	eventually(t, "the sleep cancelled at the child", func() bool {
		return countMethod(childLog(t, logPath), "notifications/cancelled") == 1
	})
	if n := len(tp.Snapshot().InFlight); n != 0 {
		t.Errorf("%d requests in flight after the session ended", n)
	}
	if end := a.farewell(10 * time.Second); end == "" {
		t.Error("the shim was not told its session ended")
	}
	if got := other.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`); !strings.Contains(got, "still here") {
		t.Errorf("the other session's call: %s", got)
	}
	if c := tp.Snapshot().Counters; c.Cancelled != 1 {
		t.Errorf("counters %+v: want the one call cancelled", c)
	}
}

// A client whose output is a socket (as libuv gives a child: one socket
// for stdin and stdout) that shuts it down for reading alone is not seen
// to go (the socket has not hung up), until an answer to it cannot be
// written: then its session ends, and its other call in flight is
// cancelled at the child, not left to run for its minute.
func TestAttachedClientThatStopsReadingASocketIsCancelledAtItsNextAnswer(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	client := os.NewFile(uintptr(fds[0]), "client")
	defer client.Close()
	c, err := net.Dial("unix", tp.sock)
	if err != nil {
		t.Fatal(err)
	}
	conn := c.(*net.UnixConn)
	defer conn.Close()
	if _, _, err := conn.WriteMsgUnix([]byte(`{"server":"srv","attach":true}`+"\n"), syscall.UnixRights(fds[1], fds[1]), nil); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fds[1]) // the pool holds the only other copies
	shim := bufio.NewReader(conn)
	if line, err := shim.ReadBytes('\n'); err != nil || !strings.Contains(string(line), `"attached":true`) {
		t.Fatalf("welcome: %q %v", line, err)
	}
	r := bufio.NewReader(client)
	if _, err := client.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if _, err := client.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000}}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the sleep written to the child", func() bool {
		s := tp.Snapshot()
		return len(s.InFlight) == 1 && s.InFlight[0].WrittenToChild
	})
	if err := syscall.Shutdown(int(client.Fd()), syscall.SHUT_RD); err != nil {
		t.Fatal(err)
	}
	if _, err := client.WriteString(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"unread"}}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the session to end", func() bool { return len(tp.Snapshot().Sessions) == 0 })
	eventually(t, "the sleep cancelled at the child", func() bool {
		return countMethod(childLog(t, logPath), "notifications/cancelled") == 1
	})
}
