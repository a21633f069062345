package pool_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// TestResumeHelloSize: a resuming shim's hello carries the client's
// initialize and a lost entry per request the dead pool owed, and is as
// long as those are: one with 400 requests owed is taken, and each of
// them answered with the at-most-once error. One longer than the pool
// takes at all is refused with the reason, not closed unanswered: its
// shim ends the session rather than try the next pool. On the first
// edition the pool closed any hello over 4 KiB without a word.
func TestResumeHelloSize(t *testing.T) {
	tp := newTestPool(t, &pool.Options{MaxMessageBytes: 1 << 10}, fake("a"))
	t.Run("400 owed", func(t *testing.T) {
		resume := wire.Resume{Session: "s1", Counted: true}
		for i := range 400 {
			resume.Lost = append(resume.Lost, wire.Lost{ID: fmt.Sprint(i), Written: true})
		}
		hello, _ := json.Marshal(wire.Hello{Server: "a", Resumable: true, Resume: &resume})
		conn, br := helloConn(t, tp, hello)
		if w := welcome(t, br); w.Error != "" || w.Session == "" {
			t.Fatalf("welcome: %+v", w)
		}
		owed := map[string]bool{}
		for len(owed) < 400 {
			line, err := br.ReadBytes('\n')
			if err != nil {
				t.Fatalf("%d answers, then %v", len(owed), err)
			}
			if line[0] == wire.Control {
				continue // the session's state, for its shim
			}
			var m msg
			if err := json.Unmarshal(line, &m); err != nil || m.Error == nil || m.Error.Code != -32003 {
				t.Fatalf("answer %d: %s", len(owed), line)
			}
			owed[string(m.ID)] = true
		}
		conn.Close()
	})
	t.Run("past the limit", func(t *testing.T) {
		hello := `{"server":"a","resume":{"session":"s1","initialize":"` + strings.Repeat("A", tp.HelloLimit()) + `"}}` + "\n"
		_, br := helloConn(t, tp, []byte(hello))
		if w := welcome(t, br); !strings.Contains(w.Error, "longer than this pool takes") || w.Stopping {
			t.Fatalf("welcome: %+v, want a refusal that says the hello is too long", w)
		}
	})
}

// helloConn dials tp's socket and sends hello, with its newline, from
// another goroutine: a pool that refuses it may not read it all.
func helloConn(t *testing.T, tp *testPool, hello []byte) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("unix", tp.sock)
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{})
	t.Cleanup(func() { conn.Close(); <-sent })
	go func() {
		defer close(sent)
		_, _ = conn.Write(append(hello, '\n'))
	}()
	return conn, bufio.NewReader(conn)
}

// welcome reads the pool's answer to a hello.
func welcome(t *testing.T, br *bufio.Reader) pool.Welcome {
	t.Helper()
	line, err := br.ReadBytes('\n')
	if err != nil && err != io.EOF {
		t.Fatalf("no welcome: %v", err)
	}
	var w pool.Welcome
	if err := json.Unmarshal(line, &w); err != nil {
		t.Fatalf("welcome %q: %v", line, err)
	}
	return w
}
