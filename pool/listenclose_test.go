//go:build unix

package pool

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A listen the pool ends (its server removed, the pool stopping) is
// answered with its closing result and named in notifications/cancelled;
// those lines reach the client before its transport closes even when
// they could not be written at once: no direct write (a pipe, as on
// Windows), or a backlog (a line the client took only part of). Before,
// close closed the transport straight after queueing them: the client
// got nothing, or a line cut in the middle.
func TestListenClosingLinesAreWrittenBeforeTheTransportCloses(t *testing.T) {
	long := `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("x", 256<<10) + `"}}`
	for _, tc := range []struct {
		name    string
		conns   func(t *testing.T) (poolEnd, clientEnd net.Conn)
		backlog string // delivered before the close; "" for none
		reason  error
	}{
		{"queued, server removed", func(*testing.T) (net.Conn, net.Conn) { return net.Pipe() }, "", errServerRemoved},
		{"queued, pool closing", func(*testing.T) (net.Conn, net.Conn) { return net.Pipe() }, "", errPoolClosing},
		{"behind a line cut short, server removed", smallSocketPair, long, errServerRemoved},
		{"behind a line cut short, pool closing", smallSocketPair, long, errPoolClosing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newEndingRig(t)
			poolEnd, clientEnd := tc.conns(t)
			t.Cleanup(func() { poolEnd.Close(); clientEnd.Close() })
			r.s.closeConn = func(*session) { poolEnd.Close() }
			r.s.startOutput(poolEnd.(deadlineWriter))
			r.s.mu.Lock()
			r.s.listens = map[string]*listener{`"a"`: {id: []byte(`"a"`), s: r.s, b: r.b, acked: true}}
			r.s.mu.Unlock()
			if tc.backlog != "" {
				r.s.deliver([]byte(tc.backlog), notice("notifications/message"))
			}

			r.s.close(tc.reason) // the client reads only after the close

			_ = clientEnd.SetReadDeadline(time.Now().Add(10 * time.Second))
			all, err := io.ReadAll(clientEnd)
			if err != nil {
				t.Fatalf("reading to the end: %v", err)
			}
			lines := strings.SplitAfter(string(all), "\n")
			if last := lines[len(lines)-1]; last != "" {
				t.Errorf("the client's last line is cut short: %d bytes without a newline", len(last))
			}
			lines = lines[:len(lines)-1]
			if tc.backlog != "" {
				if len(lines) == 0 || lines[0] != tc.backlog+"\n" {
					t.Fatalf("the client got %d lines, the first not the whole line before the close", len(lines))
				}
				lines = lines[1:]
			}
			if len(lines) != 2 || !strings.Contains(lines[0], `"id":"a"`) || !strings.Contains(lines[0], `"resultType":"complete"`) ||
				!strings.Contains(lines[1], `"notifications/cancelled"`) || !strings.Contains(lines[1], tc.reason.Error()) {
				t.Fatalf("the client got %q; want the listen's closing result, then notifications/cancelled naming it", lines)
			}
		})
	}
}
