//go:build unix

package pool_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// stuckShim starts a pool whose shim writes time out after timeout and
// attaches a session to it whose shim reads nothing after the pool's
// welcome, and has the session queue 3,000 State lines for it (log
// levels, each answered at once) while the pool's writer waits
// (pool.PauseShimLines): far more than the connection's buffer takes.
// It returns the pool and the session's client, the writer let go.
func stuckShim(t *testing.T, timeout time.Duration) (*testPool, *attached) {
	t.Helper()
	t.Cleanup(pool.SetShimWriteTimeout(timeout))
	resume, restore := pool.PauseShimLines()
	t.Cleanup(restore)
	tp := newTestPool(t, nil, fake("srv"))
	t.Cleanup(resume)
	a := tp.attach(t, "srv")
	a.initialize()
	levels := []string{"debug", "info"}
	for i := range 3000 {
		got := a.roundTrip(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"logging/setLevel","params":{"level":%q}}`, 10+i, levels[i%2]))
		if !strings.Contains(got, `"result"`) {
			t.Fatalf("setLevel %d: %q", i, got)
		}
	}
	resume()
	return tp, a
}

const reinitialize = `{"jsonrpc":"2.0","id":"again","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"2"}}}`

// TestAStuckShimEvictsItsSession: an attached session whose shim stops
// reading its connection is evicted once a line waits shimWriteTimeout,
// as one whose client stops reading is, and a re-initialize (whose State
// line must reach the shim before its answer) waits no longer than that
// write. Another session is not affected. Before, the session's writer
// gave each queued line its own timeout, and the re-initialize waited for
// all of them: 5 s a line. The shim, back, is told its session ended;
// another process that resumes the session first, claiming the shim's
// PID, is not, and does not take the notice from it (it did: the notice
// was the hello's PID's).
func TestAStuckShimEvictsItsSession(t *testing.T) {
	const timeout = 500 * time.Millisecond
	const shimPID, otherPID = 4242, 4343
	peers := setPeers(t, shimPID)
	tp, a := stuckShim(t, timeout)
	sid := tp.Snapshot().Sessions[0].ID

	start := time.Now()
	_, _ = a.in.WriteString(reinitialize + "\n") // fails if the session ended already
	_ = a.outFile.SetReadDeadline(time.Now().Add(10 * time.Second))
	if rest, err := io.ReadAll(a.out); err != nil {
		a.conn.Close() // let the pool's writes fail at once, for its Close
		t.Fatalf("the client's output did not end, its re-initialize unanswered or answered: %q, %v", rest, err)
	}
	// The write under way when the buffer filled, then the session's close.
	if d := time.Since(start); d > 2*timeout+2*time.Second {
		t.Errorf("the session ended %v after its re-initialize, want about %v", d, timeout)
	}
	if n := tp.Snapshot().Counters.Evicted; n != 1 {
		t.Errorf("%d sessions evicted, want 1", n)
	}
	// The shim's connection ends: a cut line, maybe, and no Farewell.
	_ = a.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if rest, err := io.ReadAll(a.shim); err != nil || strings.Contains(string(rest), `"end"`) {
		t.Errorf("the shim's connection: %v, a Farewell in it: %t", err, strings.Contains(string(rest), `"end"`))
	}

	// Another process, claiming the session and its shim's PID (the
	// hello's, none), is not told it ended.
	peers.set(otherPID)
	if line, w := resumeWelcome(t, tp.sock, sid); w.Ended {
		t.Errorf("another process's resume of the session was welcomed with %q, want no word of its end", line)
	}
	// Its shim, back to resume the session, is told it ended.
	peers.set(shimPID)
	if line, w := resumeWelcome(t, tp.sock, sid); !w.Ended {
		t.Errorf("the shim's resume was welcomed with %q, want the session's end", line)
	}

	b := tp.attach(t, "srv")
	b.initialize()
	if got := b.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`); !strings.Contains(got, `"x"`) {
		t.Fatalf("another session's call: %q", got)
	}
}

// resumeWelcome is the pool's Welcome to an attached shim's resume of
// session sid, as a line and read; the connection closes as the test
// ends.
func resumeWelcome(t *testing.T, sock, sid string) ([]byte, pool.Welcome) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	hello, _ := json.Marshal(pool.Hello{Server: "srv", Attach: true, Resume: &wire.Resume{Session: sid}})
	if _, err := c.Write(append(hello, '\n')); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	var w pool.Welcome
	if err != nil || json.Unmarshal(line, &w) != nil {
		t.Fatalf("the welcome of a resume: %q, %v", line, err)
	}
	return line, w
}

// TestCloseWithAStuckShim: a pool that stops waits for one write at most
// to an attached session's shim that stopped reading, with the session's
// reader waiting to send a re-initialize's State line or not. Before, the
// stop waited for every line queued for it, 5 s each.
func TestCloseWithAStuckShim(t *testing.T) {
	for _, reinit := range []bool{false, true} {
		t.Run(fmt.Sprint("reinit=", reinit), func(t *testing.T) {
			// Long enough for the stop to come while a write waits.
			const timeout = 2 * time.Second
			tp, a := stuckShim(t, timeout)
			if reinit {
				if _, err := a.in.WriteString(reinitialize + "\n"); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				tp.Close()
			}()
			select {
			case <-closed:
			case <-time.After(timeout + 5*time.Second):
				a.conn.Close() // the pool's writes fail at once now
				<-closed
				t.Fatalf("Pool.Close took %v and more, with the shim's connection closed then; want about %v at most", time.Since(start), timeout)
			}
			t.Logf("Pool.Close took %v", time.Since(start))
		})
	}
}
