package store

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/mcptest"
)

var fake struct {
	once sync.Once
	path string
	err  error
}

// fakeMCP builds the in-repo fake MCP server once per test binary.
func fakeMCP(tb testing.TB) string {
	tb.Helper()
	fake.once.Do(func() {
		dir, err := os.MkdirTemp("", "store-fakemcp")
		if err != nil {
			fake.err = err
			return
		}
		fake.path, fake.err = mcptest.Build(dir)
	})
	if fake.err != nil {
		tb.Fatal(fake.err)
	}
	return fake.path
}

// servePool runs a pool with one fake server "fake" on a Unix socket and
// returns the socket path.
func servePool(tb testing.TB, opts *pool.Options, flags ...string) (*pool.Pool, string) {
	tb.Helper()
	bin := fakeMCP(tb)
	dir, err := os.MkdirTemp("", "sbs")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) }) // after the pool is closed
	p := pool.New(opts)
	if err := p.Apply([]pool.ServerConfig{{Name: "fake", Command: bin, Args: flags}}); err != nil {
		tb.Fatal(err)
	}
	return p, mcptest.Serve(tb, p, dir)
}

// rpcClient is a minimal legacy MCP client over the stdio front door.
type rpcClient struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialPool(tb testing.TB, sock string) *rpcClient {
	tb.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		tb.Fatal(err)
	}
	c := &rpcClient{conn: conn, r: bufio.NewReader(conn)}
	tb.Cleanup(func() { conn.Close() })
	c.send(tb, `{"server":"fake"}`)
	if w := c.recv(tb); !strings.Contains(w, `"session"`) {
		tb.Fatalf("hello refused: %s", w)
	}
	c.send(tb, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"store-test","version":"1.0"}}}`)
	c.recv(tb)
	c.send(tb, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

func (c *rpcClient) send(tb testing.TB, line string) {
	if _, err := c.conn.Write([]byte(line + "\n")); err != nil {
		tb.Fatal(err)
	}
}

func (c *rpcClient) recv(tb testing.TB) string {
	_ = c.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	line, err := c.r.ReadString('\n')
	if err != nil {
		tb.Fatalf("read from the pool: %v", err)
	}
	return line
}

// TestPoolRecordsHang runs a real pool with a real child and the store as
// its recorder: a call to a tool that sleeps shows up as a hang with its
// session, server, child PID and "written to child"; when the client goes
// away it ends as cancelled; the child and the session are recorded.
func TestPoolRecordsHang(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{CapturePayloads: true})
	p, sock := servePool(t, &pool.Options{Record: s.Record, CapturePayloads: s.CaptureBytes()})
	c := dialPool(t, sock)
	c.send(t, `{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000},"_meta":{"authorization":"Bearer xyz"}}}`)

	ctx := context.Background()
	var hang Request
	waitFor(t, "the sleeping call to be recorded as written", func() bool {
		if err := s.flush(); err != nil {
			t.Fatal(err)
		}
		hs, err := s.Hangs(ctx, 0, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) == 1 && hs[0].WrittenToChild() {
			hang = hs[0]
			return true
		}
		return false
	})
	pids := p.ChildPIDs()
	if len(pids) != 1 || hang.PID != pids[0] || hang.Server != "fake" || hang.Method != "tools/call" ||
		hang.Name != "sleep" || hang.OriginalID != `"call-1"` || hang.Session == "" || hang.Abandoned {
		t.Errorf("hang = %+v, child PIDs %v", hang, pids)
	}
	if !strings.Contains(hang.RequestPayload, `"ms":60000`) || strings.Contains(hang.RequestPayload, "xyz") {
		t.Errorf("captured payload %q: want the arguments, without the credential", hang.RequestPayload)
	}

	// A read-only reader (the CLI) sees the same hang while the pool runs.
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if hs, err := ro.Hangs(ctx, 0, time.Now()); err != nil || len(hs) != 1 || hs[0].PID != hang.PID || hs[0].Abandoned {
		t.Errorf("read-only hangs = %+v, %v", hs, err)
	}

	c.conn.Close() // the client goes away: the call is cancelled
	var tl Timeline
	waitFor(t, "the call to end", func() bool {
		if err := s.flush(); err != nil {
			t.Fatal(err)
		}
		if tl, err = s.Timeline(ctx, hang.Run, hang.PoolID); err != nil {
			t.Fatal(err)
		}
		// The request ends before its session's close is recorded.
		return tl.Request.Status != StatusInFlight && tl.Session != nil && !tl.Session.Disconnected.IsZero()
	})
	if tl.Request.Status != pool.StatusCancelled || tl.Session == nil || tl.Session.Transport == "" ||
		tl.Session.Disconnected.IsZero() || tl.Backend == nil || tl.Backend.PID != hang.PID || len(tl.Backend.Command) == 0 {
		t.Errorf("timeline after the client left: request %+v, session %+v, backend %+v", tl.Request, tl.Session, tl.Backend)
	}
	for _, st := range tl.Steps {
		t.Logf("%s  %s", st.At.Format("15:04:05.000000"), st.What)
	}
	if s.Dropped() != 0 {
		t.Errorf("dropped %d events", s.Dropped())
	}
}

// BenchmarkPoolLatency is the pool's latency for tools/call echo (one
// session, one call in flight) with history recording off and on, in the
// same run: calls alternate between two pools that differ only in their
// recorder. It reports each p50 and p99 and the p99 ratio on/off (target
// at most 1.10).
func BenchmarkPoolLatency(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "history.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	_, offSock := servePool(b, nil)
	_, onSock := servePool(b, &pool.Options{Record: s.Record})
	off, on := dialPool(b, offSock), dialPool(b, onSock)
	call := func(c *rpcClient, id int) time.Duration {
		start := time.Now()
		c.send(b, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, id))
		if line := c.recv(b); !strings.Contains(line, `"result"`) {
			b.Fatalf("echo failed: %s", line)
		}
		return time.Since(start)
	}
	for i := range 200 { // warm up both children
		call(off, i)
		call(on, i)
	}
	var offD, onD []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			offD = append(offD, call(off, i))
			onD = append(onD, call(on, i))
		} else {
			onD = append(onD, call(on, i))
			offD = append(offD, call(off, i))
		}
	}
	b.StopTimer()
	q := func(ds []time.Duration, p float64) float64 {
		slices.Sort(ds)
		return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds())
	}
	b.ReportMetric(q(offD, 0.50), "off-p50-µs")
	b.ReportMetric(q(offD, 0.99), "off-p99-µs")
	b.ReportMetric(q(onD, 0.50), "on-p50-µs")
	b.ReportMetric(q(onD, 0.99), "on-p99-µs")
	b.ReportMetric(q(onD, 0.99)/q(offD, 0.99), "p99-on/off")
	b.ReportMetric(float64(s.Dropped()), "dropped")
}

// TestPoolCloseEndsRun: a clean shutdown with a call in flight records it
// as cancelled (not abandoned), the child's exit, and the run's end.
func TestPoolCloseEndsRun(t *testing.T) {
	path := dbPath(t)
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, sock := servePool(t, &pool.Options{Record: s.Record})
	c := dialPool(t, sock)
	c.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000}}}`)
	waitFor(t, "the call to be written", func() bool {
		if err := s.flush(); err != nil {
			t.Fatal(err)
		}
		hs, err := s.Hangs(context.Background(), 0, time.Now())
		return err == nil && len(hs) == 1 && hs[0].WrittenToChild()
	})
	p.Close() // as app.Run does: the pool first, then the store
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	ctx := context.Background()
	reqs, err := ro.Requests(ctx, Filter{Method: "tools/call"}) // (the initialize, which waited for the child to start, was answered)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := ro.Runs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	kids, err := ro.ChildrenOfEarlierRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 || reqs[0].Status != pool.StatusCancelled || len(runs) != 1 || runs[0].Ended.IsZero() ||
		runs[0].Crashed || len(kids) != 0 {
		t.Errorf("after a clean shutdown: requests %+v, runs %+v, unexited children %+v", reqs, runs, kids)
	}
}

// TestPoolRecordsWriteAfterInFlightRow: a call that waits for its child
// to start again (the last one crashed) is in flight past InFlightAfter,
// its row written, not yet written to a child; once the new child takes
// it, the row says so, with that child's pid, as the live status does.
// The row used to keep saying no child had it until the call ended.
func TestPoolRecordsWriteAfterInFlightRow(t *testing.T) {
	path := dbPath(t)
	s := openT(t, path, &Options{InFlightAfter: 50 * time.Millisecond})
	hold := filepath.Join(t.TempDir(), "hold")
	p, sock := servePool(t, &pool.Options{Record: s.Record}, "-start-while", hold)
	c := dialPool(t, sock)
	first := p.ChildPIDs()
	if err := os.WriteFile(hold, nil, 0o600); err != nil { // the next child waits to start
		t.Fatal(err)
	}
	c.send(t, `{"jsonrpc":"2.0","id":"crash-1","method":"tools/call","params":{"name":"crash","arguments":{}}}`)
	c.recv(t) // its failure
	c.send(t, `{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000}}}`)

	ctx := context.Background()
	inFlight := func() Request {
		t.Helper()
		if err := s.flush(); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Requests(ctx, Filter{Status: StatusInFlight})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 {
			return Request{}
		}
		return rs[0]
	}
	waitFor(t, "the waiting call's in-flight row", func() bool { return inFlight().Name == "sleep" })
	if r := inFlight(); r.WrittenToChild() || r.PID != 0 {
		t.Fatalf("the call waiting for its child: %+v, want it not written to any", r)
	}
	if err := os.Remove(hold); err != nil { // the child starts
		t.Fatal(err)
	}
	var r Request
	waitFor(t, "the in-flight row to say the child has the call", func() bool {
		r = inFlight()
		return r.WrittenToChild()
	})
	if pids := p.ChildPIDs(); len(pids) != 1 || r.PID != pids[0] || slices.Equal(pids, first) || r.Written.Before(r.Received) {
		t.Errorf("the call written to its child: %+v, child PIDs %v (the first %v)", r, pids, first)
	}
}
