//go:build unix

package pool_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// attached is a session whose client's pipes the pool holds, as a
// `switchboard connect` on Unix makes it: the test writes the client's
// input and reads its output; conn is the shim's connection.
type attached struct {
	t       testing.TB
	conn    *net.UnixConn
	shim    *bufio.Reader // conn, read past the welcome
	in      *os.File      // the client's input, written here
	out     *bufio.Reader
	outFile *os.File // what out reads: the client's output
}

// close ends the session as a client that exits does: its pipes and its
// shim's connection close.
func (a *attached) close() {
	a.conn.Close()
	a.in.Close()
	a.outFile.Close()
}

// farewell reads the shim's connection, as a shim waits on it after its
// client's input ended, past the State lines to the pool's Farewell, and
// returns its End.
func (a *attached) farewell(within time.Duration) string { return a.goodbye(within).End }

func (tp *testPool) attach(t testing.TB, server string) *attached {
	t.Helper()
	return tp.attachLedger(t, server, nil)
}

// attachLedger is attach with the shim's ledger in file, sent as the
// shim sends it, when file is not nil.
func (tp *testPool) attachLedger(t testing.TB, server string, file *os.File) *attached {
	t.Helper()
	hello := fmt.Sprintf(`{"server":%q,"attach":true,"ledger":%t}`, server, file != nil)
	var extra []int
	if file != nil {
		extra = append(extra, int(file.Fd()))
	}
	return tp.attachHello(t, []byte(hello), extra, nil)
}

// attachHello attaches a session as a shim does: hello, with the client's
// new pipes (and extra descriptors) beside it, then pending; it waits for
// the pool's welcome.
func (tp *testPool) attachHello(t testing.TB, hello []byte, extra []int, pending []byte) *attached {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", tp.sock)
	if err != nil {
		t.Fatal(err)
	}
	conn := c.(*net.UnixConn)
	fds := append([]int{int(inR.Fd()), int(outW.Fd())}, extra...)
	if _, _, err := conn.WriteMsgUnix(append(hello, '\n'), syscall.UnixRights(fds...), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(pending); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close() // the pool holds the only other copies
	shim := bufio.NewReader(conn)
	line, err := shim.ReadBytes('\n')
	var w pool.Welcome
	if err != nil || json.Unmarshal(line, &w) != nil || !w.Attached {
		t.Fatalf("welcome: %q %v", line, err)
	}
	a := &attached{t: t, conn: conn, shim: shim, in: inW, out: bufio.NewReader(outR), outFile: outR}
	t.Cleanup(a.close)
	return a
}

// roundTrip sends line and returns the next line the client reads.
func (a *attached) roundTrip(line string) string {
	a.t.Helper()
	if _, err := a.in.WriteString(line + "\n"); err != nil {
		a.t.Fatal(err)
	}
	got, err := a.out.ReadString('\n')
	if err != nil {
		a.t.Fatalf("read %q: %v", got, err)
	}
	return got
}

func (a *attached) initialize() {
	a.t.Helper()
	a.roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}`)
}

// initRootsAsked initializes a as a client that declares roots, sends its
// initialized with lines after it in one write (so the reader holds them
// at once, well before the pool's roots/list can time out), and returns
// that roots/list, left for the test to answer (or not).
func (a *attached) initRootsAsked(t *testing.T, lines ...string) msg {
	t.Helper()
	a.roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"a","version":"1"}}}`)
	a.send(strings.Join(append([]string{`{"jsonrpc":"2.0","method":"notifications/initialized"}`}, lines...), "\n"))
	ask := a.next(t)
	_ = a.outFile.SetReadDeadline(time.Time{}) // next's deadline was for this read alone
	if ask.Method != "roots/list" {
		t.Fatalf("want the pool's roots/list, got %s", ask.raw)
	}
	return ask
}

// TestIdleAttachedSessionsCostOneGoroutineEach: an attached session that
// is idle costs the pool its reader alone: answers are written by the
// goroutine that has them, and one poller watches every shim.
func TestIdleAttachedSessionsCostOneGoroutineEach(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	first := tp.attach(t, "srv") // the child, its loops and the poller
	first.initialize()
	before := runtime.NumGoroutine()
	const n = 50
	for range n {
		a := tp.attach(t, "srv")
		a.initialize()
		if got := a.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`); !json.Valid([]byte(got)) {
			t.Fatalf("answer: %q", got)
		}
	}
	var added int
	eventually(t, "idle sessions to settle at one goroutine each", func() bool {
		added = runtime.NumGoroutine() - before
		return added <= n
	})
	t.Logf("%d idle attached sessions: %d goroutines more", n, added)
}

// TestShimHangupClosesOnlyItsSession: the shims of half of 40 attached
// sessions exit; exactly their sessions end (their clients read EOF),
// and the others still answer, however descriptors are reused.
func TestShimHangupClosesOnlyItsSession(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	const n = 40
	all := make([]*attached, n)
	for i := range all {
		all[i] = tp.attach(t, "srv")
		all[i].initialize()
	}
	for i := 0; i < n; i += 2 {
		all[i].conn.Close()
	}
	eventually(t, "the hung-up sessions to end", func() bool { return len(tp.Snapshot().Sessions) == n/2 })
	// New sessions may get the closed connections' descriptor numbers.
	for range 4 {
		tp.attach(t, "srv").initialize()
	}
	for i, a := range all {
		if i%2 == 0 {
			if line, err := a.out.ReadString('\n'); err == nil {
				t.Errorf("session %d: read %q after its shim exited", i, line)
			}
			continue
		}
		got := a.roundTrip(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"s%d"}}}`, i))
		if want := fmt.Sprintf(`"text":"s%d"`, i); !strings.Contains(got, want) {
			t.Errorf("session %d: %s", i, got)
		}
	}
	if got := len(tp.Snapshot().Sessions); got != n/2+4 {
		t.Errorf("%d sessions, want %d", got, n/2+4)
	}
}

// TestHelloToAStoppingPoolSaysItStops: a shim that connected just before
// the pool began to stop, and whose hello comes after, is told the pool
// is stopping (Welcome.Stopping), so that it finds the next pool (an
// upgrade's new program) instead of failing its client. (A connection
// the pool accepts once it stops is answered before its hello and
// closed: the hello's write may then fail, and the Welcome is read.)
func TestHelloToAStoppingPoolSaysItStops(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	conn, err := net.Dial("unix", tp.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A connection still in the listener's backlog when the pool stops is
	// reset, not answered (the shim retries either way). A session dialled
	// after it and welcomed proves the accept loop, which takes
	// connections in order, has taken this one.
	tp.dial(t, "srv")
	closed := make(chan error, 1)
	go func() { closed <- tp.Close() }() // it waits for this connection's hello
	eventually(t, "the pool to stop accepting", func() bool {
		c, err := net.Dial("unix", tp.sock)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	_, _ = conn.Write([]byte(`{"server":"srv"}` + "\n"))
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	var w pool.Welcome
	if err != nil || json.Unmarshal(line, &w) != nil || !w.Stopping || w.Error == "" || w.Session != "" {
		t.Fatalf("welcome from a stopping pool: %q, %v; want an error with stopping set", line, err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}
