package pool_test

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/mcptest"
)

// fakeBin is the fake MCP server, built once by TestMain.
var fakeBin string

// testPool is a pool serving the stdio front door on a real Unix socket.
type testPool struct {
	*pool.Pool
	sock string
	dir  string
}

// newTestPool starts a pool with servers and serves it until the test
// ends.
func newTestPool(t *testing.T, opts *pool.Options, servers ...pool.ServerConfig) *testPool {
	t.Helper()
	return newTestPoolOpts(t, opts, servers...)
}

// newTestPoolTB is newTestPool for benchmarks.
func newTestPoolTB(t testing.TB, servers ...pool.ServerConfig) *testPool {
	return newTestPoolOpts(t, nil, servers...)
}

func newTestPoolOpts(t testing.TB, opts *pool.Options, servers ...pool.ServerConfig) *testPool {
	t.Helper()
	dir := shortTempDir(t)
	p := pool.New(opts)
	if err := p.Apply(servers); err != nil {
		t.Fatal(err)
	}
	sock := mcptest.Serve(t, p, dir)
	return &testPool{Pool: p, sock: sock, dir: dir}
}

// shortTempDir is a temp dir with a path short enough for a Unix socket.
func shortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// fake returns a server config running the fake MCP server with flags.
func fake(name string, flags ...string) pool.ServerConfig {
	return pool.ServerConfig{Name: name, Command: fakeBin, Args: flags}
}

// applyRequestTimeout makes d (zero: the default) the request timeout of
// cfg, tp's server, once its child has started. A test of what a short
// request timeout does starts the pool with the default and starts the
// child (its first client's initialize, say) before it applies the short
// one: the wait for the child's handshake is bounded by the request
// timeout too, and a loaded machine can take longer than a short one to
// start the child (the race-built fake). A reload that changes only the
// timeout keeps the running child.
func (tp *testPool) applyRequestTimeout(t testing.TB, cfg *pool.ServerConfig, d time.Duration) {
	t.Helper()
	for _, s := range tp.Snapshot().Servers {
		if s.Name == cfg.Name && s.State != pool.StateReady {
			t.Fatalf("server %q is %s: start its child before applying a short request timeout", s.Name, s.State)
		}
	}
	cfg.RequestTimeout = d
	if err := tp.Apply([]pool.ServerConfig{*cfg}); err != nil {
		t.Fatalf("apply requestTimeout %v: %v", d, err)
	}
}

// msg is one JSON-RPC message as a client sees it.
type msg struct {
	raw    string
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// client is one session through the stdio front door.
type client struct {
	t     testing.TB
	conn  net.Conn
	in    chan msg
	mu    sync.Mutex
	w     *bufio.Writer
	done  chan struct{}
	hold  chan struct{} // closed by pause: the reader stops reading
	quit  sync.Once
	quitC chan struct{}
	// patience is how long recv waits; 15 s unless a test moves a lot of
	// data (under -race, with the other packages' tests on the same cores).
	patience time.Duration
}

// pause makes the client stop reading its socket, like a client that
// hangs.
func (c *client) pause() { close(c.hold) }

// dial opens a session of server on the pool, failing the test on a
// refused hello.
func (tp *testPool) dial(t testing.TB, server string) *client {
	t.Helper()
	c, err := tp.tryDial(t, server)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (tp *testPool) tryDial(t testing.TB, server string) (*client, error) {
	conn, err := net.Dial("unix", tp.sock)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(conn, `{"server":%q}`+"\n", server)
	br := bufio.NewReaderSize(conn, 1<<20)
	line, err := br.ReadBytes('\n')
	if err != nil {
		conn.Close()
		return nil, err
	}
	var w pool.Welcome
	if err := json.Unmarshal(line, &w); err != nil || w.Error != "" {
		conn.Close()
		return nil, fmt.Errorf("hello refused: %s", line)
	}
	c := &client{t: t, conn: conn, in: make(chan msg, 1<<14), w: bufio.NewWriter(conn), done: make(chan struct{}), hold: make(chan struct{}), quitC: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer close(c.in)
		for {
			select {
			case <-c.hold:
				<-c.quitC
				return
			default:
			}
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var m msg
			if err := json.Unmarshal(line, &m); err != nil {
				t.Errorf("pool sent invalid JSON: %q", line)
				return
			}
			m.raw = strings.TrimSpace(string(line))
			c.in <- m
		}
	}()
	t.Cleanup(c.close)
	return c, nil
}

func (c *client) close() {
	c.quit.Do(func() { close(c.quitC) })
	c.conn.Close()
	<-c.done
}

// send writes raw lines to the pool.
func (c *client) send(lines ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range lines {
		c.w.WriteString(l)
		c.w.WriteByte('\n')
	}
	if err := c.w.Flush(); err != nil {
		c.t.Errorf("send: %v", err)
	}
}

// trySend is send for a client the pool may rightly drop (an attacker
// that is evicted): the write's error is returned, not a test failure.
func (c *client) trySend(lines ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range lines {
		c.w.WriteString(l)
		c.w.WriteByte('\n')
	}
	return c.w.Flush()
}

// sendf formats one line.
func (c *client) sendf(format string, args ...any) { c.send(fmt.Sprintf(format, args...)) }

// recv waits for the next message, failing the test after the deadline.
func (c *client) recv() msg {
	c.t.Helper()
	select {
	case m, ok := <-c.in:
		if !ok {
			c.t.Fatal("the pool closed the session")
		}
		return m
	case <-time.After(cmp.Or(c.patience, 15*time.Second)):
		c.t.Fatalf("no message from the pool within %s", cmp.Or(c.patience, 15*time.Second))
	}
	return msg{}
}

// recvID waits for the response with id, collecting everything else.
func (c *client) recvID(id string) (msg, []msg) {
	c.t.Helper()
	var other []msg
	for {
		m := c.recv()
		if string(m.ID) == id && m.Method == "" {
			return m, other
		}
		other = append(other, m)
	}
}

// initialize performs the legacy handshake as name.
func (c *client) initialize(name string, caps string) msg {
	c.t.Helper()
	if caps == "" {
		caps = "{}"
	}
	c.sendf(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":%s,"clientInfo":{"name":%q,"version":"1.0"}}}`, caps, name)
	m, _ := c.recvID(`"init"`)
	if m.Error != nil {
		c.t.Fatalf("initialize: %s", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

// call sends a tools/call with the given id bytes and arguments JSON.
func (c *client) call(id, tool, args string) {
	c.sendf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

// text returns the first text content of a tools/call result.
func (m msg) text() string {
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(m.Result, &r)
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// eventually polls cond until it holds or the deadline passes; a failure
// also says what each of detail reports then.
func eventually(t testing.TB, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			var more strings.Builder
			for _, d := range detail {
				more.WriteString(": " + d())
			}
			t.Fatalf("timed out waiting for %s%s", what, more.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// childLog reads the fake's -log file: every line the child received.
func childLog(t testing.TB, path string) []map[string]any {
	t.Helper()
	lines, err := mcptest.ReadLog(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return lines
}

// cancelledAtChild returns the request ids of the cancellations in the
// fake's -log file at path, in the order the child received them.
func cancelledAtChild(t testing.TB, path string) []string {
	t.Helper()
	var ids []string
	for _, m := range childLog(t, path) {
		if m["method"] == "notifications/cancelled" {
			params, _ := m["params"].(map[string]any)
			ids = append(ids, fmt.Sprint(params["requestId"]))
		}
	}
	return ids
}

// countMethod counts the messages with method in a child log.
func countMethod(log []map[string]any, method string) int {
	n := 0
	for _, m := range log {
		if m["method"] == method {
			n++
		}
	}
	return n
}

// recorder keeps the events a pool records (Options.Record), as the
// history store receives them.
type recorder struct {
	mu     sync.Mutex
	events []pool.Event
}

func (r *recorder) record(e pool.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// find returns the events that match.
func (r *recorder) find(match func(pool.Event) bool) []pool.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []pool.Event
	for _, e := range r.events {
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

// waitFor waits for an event that matches and returns the first.
func (r *recorder) waitFor(t *testing.T, what string, match func(pool.Event) bool) pool.Event {
	t.Helper()
	var got []pool.Event
	eventually(t, what, func() bool { got = r.find(match); return len(got) > 0 })
	return got[0]
}

// childPID is the PID of tp's one child.
func childPID(t *testing.T, tp *testPool) int {
	t.Helper()
	bs := tp.Snapshot().Backends
	if len(bs) != 1 || bs[0].PID == 0 {
		t.Fatalf("backends %+v, want one running child", bs)
	}
	return bs[0].PID
}
