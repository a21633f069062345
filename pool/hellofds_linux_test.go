package pool_test

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestHelloDescriptorsAreBounded: a hello may come with the descriptors a
// shim that attaches sends (its client's stdin and stdout, and its
// ledger), and no more. On the first edition the pool took every
// descriptor each message of a hello passed, for the hello's 10 s: one
// connection that sent 20,000 one-byte messages, each passing the same
// pipe four times, took every descriptor the pool had, and neither a
// client's connection nor a child's restart got one. Now the hello is
// refused at the first descriptor past the bound, with the reason, and
// every descriptor it passed is closed at once; so is one that passes
// more than the pool's buffer for them takes in one message.
func TestHelloDescriptorsAreBounded(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	fd := int(r.Fd())
	for _, tc := range []struct {
		name     string
		messages int
		fds      []int
	}{
		{"four per message, many messages", 2000, []int{fd, fd, fd, fd}},
		{"one per message", 2000, []int{fd}},
		{"eight in one message", 1, []int{fd, fd, fd, fd, fd, fd, fd, fd}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := openDescriptors(t)
			conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: tp.sock, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			for range tc.messages {
				if _, _, err := conn.WriteMsgUnix([]byte{' '}, syscall.UnixRights(tc.fds...), nil); err != nil {
					break // refused and closed: the rest is not read
				}
			}
			held := openDescriptors(t) - before
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			line, err := bufio.NewReader(conn).ReadBytes('\n')
			var welcome pool.Welcome
			if err != nil || json.Unmarshal(line, &welcome) != nil || !strings.Contains(welcome.Error, "descriptors") {
				t.Errorf("a hello with too many descriptors: want a Welcome saying why, got %q, %v (descriptors held: %d)", line, err, held)
			}
			if held > 16 {
				t.Errorf("the pool held %d more descriptors once the messages were sent", held)
			}
			conn.Close()
			eventually(t, "the descriptors closed", func() bool { return openDescriptors(t) <= before+2 })
		})
	}
	c := tp.dial(t, "srv")
	c.initialize("after", "")
	c.call("1", "echo", `{"text":"still"}`)
	if m, _ := c.recvID("1"); m.text() != "still" {
		t.Fatalf("a session after the refusals: %.200s", m.raw)
	}
}

// openDescriptors counts this process's open descriptors: the pool's and
// the test's.
func openDescriptors(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
