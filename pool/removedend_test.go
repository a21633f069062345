//go:build unix

package pool_test

import (
	"bufio"
	"bytes"
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

// relayedSession is a session whose shim relays the client's bytes and
// reads the control lines in the pool's stream (wire.Hello.Resumable), as
// `switchboard connect` does where its client's pipes cannot be handed
// over (a terminal, a file, Windows).
type relayedSession struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
	run  string
}

// relay opens a relayed session of server on tp and initializes it.
func (tp *testPool) relay(t *testing.T, server string) *relayedSession {
	t.Helper()
	conn, err := net.Dial("unix", tp.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r := &relayedSession{t: t, conn: conn, br: bufio.NewReader(conn)}
	r.send(fmt.Sprintf(`{"server":%q,"resumable":true}`, server))
	w := welcome(t, r.br)
	if w.Error != "" || w.Session == "" {
		t.Fatalf("welcome: %+v", w)
	}
	r.run = w.Run
	r.send(stateInitialize)
	if m, _ := r.next(); m.Error != nil || string(m.ID) != "1" {
		t.Fatalf("initialize answered %s", m.raw)
	}
	return r
}

func (r *relayedSession) send(line string) {
	r.t.Helper()
	if _, err := r.conn.Write([]byte(line + "\n")); err != nil {
		r.t.Fatal(err)
	}
}

// next reads the stream to the next message for the client, and returns
// it with the Farewell, if the stream ended with one before it (then the
// message is empty).
func (r *relayedSession) next() (msg, *pool.Farewell) {
	r.t.Helper()
	for {
		_ = r.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		line, err := r.br.ReadBytes('\n')
		if err != nil {
			if err == io.EOF && len(line) == 0 {
				return msg{}, nil
			}
			r.t.Fatalf("the stream: %q, %v", line, err)
		}
		if line[0] == wire.Control {
			var bye pool.Farewell
			if json.Unmarshal(line[1:], &bye) == nil && bye.End != "" {
				return msg{}, &bye
			}
			continue // the session's state, for its shim
		}
		m := msg{raw: string(bytes.TrimSpace(line))}
		if err := json.Unmarshal(line, &m); err != nil {
			r.t.Fatalf("the client got %q: %v", line, err)
		}
		return m, nil
	}
}

// A server removed from the config ends its sessions once their requests
// are answered, and a relaying shim is told why, as an attached one is:
// its stream ends with a Farewell saying the session ended because the
// server was removed. (The stream ended with no Farewell: the shim took
// it for a pool that died, resumed the session with the same pool, and
// exited saying "the restarted pool did not take the session back: no
// such server", though nothing had restarted.) A shim that comes back
// all the same is refused saying the server was removed, by a pool that
// names its run: the shim can tell it did not restart.
func TestRemovedServerTellsARelayingShimWhy(t *testing.T) {
	tp := newTestPool(t, &pool.Options{RunID: "run-1"}, fake("srv"), fake("other"))
	r := tp.relay(t, "srv")
	if err := tp.Apply([]pool.ServerConfig{fake("other")}); err != nil {
		t.Fatal(err)
	}
	m, bye := r.next()
	if bye == nil {
		t.Fatalf("the stream went on with %q, or ended with no Farewell; want a Farewell", m.raw)
	}
	if !strings.Contains(bye.End, `server "srv" was removed from the configuration`) || !strings.Contains(bye.End, "session ended") {
		t.Errorf("farewell %+v; want it to say the session ended as server \"srv\" was removed", bye)
	}
	if m, bye := r.next(); m.raw != "" || bye != nil {
		t.Errorf("after the Farewell, the stream carried %q %+v; want its end", m.raw, bye)
	}

	hello, _ := json.Marshal(wire.Hello{Server: "srv", Resumable: true, Resume: &wire.Resume{Run: r.run, Session: "s1"}})
	_, br := helloConn(t, tp, hello)
	w := welcome(t, br)
	if !strings.Contains(w.Error, `no such server "srv"`) || !strings.Contains(w.Error, "removed from the config") || w.Run != "run-1" {
		t.Errorf("a resume after the removal: %+v; want it refused saying the server was removed, by run-1", w)
	}
}

// A removed server's idle sessions end at once, not after the calls of
// its busy sessions: each session waits only for its own. (They ended
// one after another, each waiting for those before it.)
func TestRemovedServerEndsIdleSessionsAtOnce(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	var busy, idle []*client
	for i := range 8 {
		c := tp.dial(t, "srv")
		c.initialize("c", "")
		if i < 3 {
			c.call("2", "sleep", `{"ms":60000}`)
			busy = append(busy, c)
		} else {
			idle = append(idle, c)
		}
	}
	eventually(t, "the busy sessions' calls in flight", func() bool { return len(tp.Snapshot().InFlight) == len(busy) })
	if err := tp.Apply(nil); err != nil {
		t.Fatal(err)
	}
	for i, c := range idle {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("idle session %d did not end within 10s of its server's removal", i+1)
		}
	}
	if n := len(tp.Snapshot().InFlight); n != len(busy) {
		t.Errorf("%d calls in flight once the idle sessions ended, want the busy sessions' %d", n, len(busy))
	}
}
