//go:build unix

package shim

import (
	"bufio"
	"bytes"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/home"
	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/mcptest"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// busyWelcome is what a pool at its limit of local connections answers
// a connection, before it reads the hello.
const busyWelcome = `{"error":"Switchboard has 4096 local sessions and connections open, its limit: this one is refused","busy":true,"run":"r2"}`

// TestReattachWaitsOutABusyPool: a session that resumes on a pool at its
// limit of local connections (a burst of shims resuming after a restart,
// or a local process holding connections) is refused before the pool
// read its hello: the pool did not refuse the session, only the
// connection. The shim tries again, and resumes the session once the
// pool takes it; it does not end it. Both kinds of shim. On the first
// edition the refusal ended the session for good.
func TestReattachWaitsOutABusyPool(t *testing.T) {
	for _, tc := range resumingShims(t) {
		t.Run(tc.name, func(t *testing.T) {
			paths, hellos := poolsThatWelcome(t, busyWelcome, busyWelcome,
				`{"session":"s9","attached":`+strconv.FormatBool(tc.attach)+`,"run":"r2"}`)
			conn, session, run, err := tc.reattach(paths)
			if err != nil {
				t.Fatalf("reattach: %v", err)
			}
			conn.Close()
			if session != "s9" || run != "r2" {
				t.Errorf("reattached as %s of run %s, want s9 of r2", session, run)
			}
			for i := range 3 {
				if h := <-hellos; h.Resume == nil || h.Resume.Session != "s1" {
					t.Errorf("hello %d: %+v, want session s1 resumed", i+1, h)
				}
			}
		})
	}
}

// TestBusyPoolsAreWaitedForAWhile: a shim whose session pools refuse as
// busy, one after another, waits for them between its hellos, and gives
// up after busyWait saying why, as it does when no pool answers: its
// client is not left waiting for ever.
func TestBusyPoolsAreWaitedForAWhile(t *testing.T) {
	busy := welcomeError(wire.Welcome{Error: "Switchboard has 2 local sessions and connections open, its limit", Busy: true})
	var h helloBackoff
	for range 3 {
		if err := h.next(busy, wire.Welcome{}, "r1"); err != nil {
			t.Fatalf("a busy pool, the first time: %v; want a try again", err)
		}
		if h.ready() {
			t.Fatalf("the next hello to a busy pool is allowed at once")
		}
	}
	h.busy.since = time.Now().Add(-busyWait - time.Second)
	err := h.next(busy, wire.Welcome{}, "r1")
	if err == nil || !strings.Contains(err.Error(), "local sessions and connections open") || !strings.Contains(err.Error(), busyWait.String()) {
		t.Fatalf("busy pools for longer than %s: %v; want the session given up saying why", busyWait, err)
	}
}

// TestResumeOnAFullPool: the attack, on a real pool. Every local
// connection the pool takes is held (Options.MaxLocalSessions, small
// here); a relaying shim whose pool went away resumes its session there
// and is refused at the cap; once a connection closes it resumes the
// session, which answers.
func TestResumeOnAFullPool(t *testing.T) {
	bin, err := mcptest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := shortHome(t)
	refusals := &logWatch{want: "refusing local connections", seen: make(chan struct{})}
	p := pool.New(&pool.Options{MaxLocalSessions: 2, Logger: slog.New(slog.NewTextHandler(refusals, nil))})
	if err := p.Apply([]pool.ServerConfig{{Name: "fake", Command: bin}}); err != nil {
		t.Fatal(err)
	}
	paths := home.Paths{Run: dir + "/run", Config: dir + "/config.json"}
	sock := mcptest.Serve(t, p, paths.Run)
	var holders []net.Conn
	for i := range 2 {
		c := mcptest.Open(t, sock, "fake", "holder"+strconv.Itoa(i))
		t.Cleanup(func() { c.Close() })
		holders = append(holders, c)
	}

	var out bytes.Buffer
	r := &relayed{paths: paths, name: "fake", run: "r1", session: "s1", kept: kept{init: []byte(`{}`)}, out: &out,
		fromClient: make(chan []byte), clientErr: make(chan error, 1), count: newUnanswered()}
	type result struct {
		conn net.Conn
		br   *bufio.Reader
		err  error
	}
	done := make(chan result, 1)
	go func() {
		conn, br, err := r.reconnect(true)
		done <- result{conn, br, err}
	}()
	select {
	case <-refusals.seen:
	case res := <-done:
		t.Fatalf("the resume ended before the pool refused it: %v", res.err)
	case <-time.After(15 * time.Second):
		t.Fatal("the pool refused no connection at its limit")
	}
	holders[0].Close()
	var res result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		holders[1].Close()
		res = <-done
		t.Errorf("the resume still waited 20 s after a connection closed")
	}
	if res.err != nil {
		t.Fatalf("a resume refused at the limit of local connections ended the session: %v (its client got %q)", res.err, out.String())
	}
	defer res.conn.Close()
	if _, err := res.conn.Write([]byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"back"}}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	_ = res.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		line, err := res.br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("the resumed session's stream: %q, %v", line, err)
		}
		if line[0] == wire.Control {
			continue // the session's state, for its shim
		}
		if !bytes.Contains(line, []byte(`"id":5`)) || !bytes.Contains(line, []byte(`back`)) {
			t.Fatalf("the resumed session answered %q; want the echo of call 5", line)
		}
		return
	}
}

// logWatch is a log's writer that closes seen once a line holds want.
type logWatch struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (w *logWatch) Write(b []byte) (int, error) {
	if strings.Contains(string(b), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(b), nil
}
