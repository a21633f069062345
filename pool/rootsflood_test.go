//go:build unix

package pool_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

const rootsChanged = `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`

// rootsAsks counts the pool's roots/list among msgs.
func rootsAsks(msgs []msg) int {
	n := 0
	for _, m := range msgs {
		if m.Method == "roots/list" {
			n++
		}
	}
	return n
}

// Many roots/list_changed while the pool asks a client its roots make
// one more ask, which reads the roots as they are then, not one ask per
// notice: before, each held notice asked again as it was replayed, one
// after another, each waited for up to the ask timeout.
func TestRootsChangesDuringAnAskAskOnceMore(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(3 * time.Second))
	tp := newTestPool(t, nil, fake("fs"))
	c := tp.dial(t, "fs")
	ask := c.initRootsAsked("flood")
	for range 5 {
		c.send(rootsChanged)
	}
	c.call("1", "echo", `{"text":"held"}`)
	c.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[{"uri":"file:///work/a"}]}}`, ask.ID)
	c.answerRoots("file:///work/b") // the one more ask
	m, other := c.recvID("1")
	if n := rootsAsks(other); n > 0 || m.text() != "held" {
		t.Fatalf("after the ask again: %d more roots/list, the held call got %s", n, m.raw)
	}
	if got := c.childRoots("2"); !strings.Contains(got, "file:///work/b") {
		t.Fatalf("the session's child has roots %s, want the last answered", got)
	}
	// A notice after the answer asks again, as ever.
	c.send(rootsChanged)
	c.answerRoots("file:///work/a")
	if got := c.childRoots("3"); !strings.Contains(got, "file:///work/a") {
		t.Fatalf("after a later notice the session's child has roots %s", got)
	}
}

// `printf '%s\n' initialize initialized list_changed… call | switchboard
// connect fs`: a client that closed its input cannot answer roots/list, so
// the pool asks it nothing more and ends its open ask at once, and the
// call is answered now. Before, the pool asked once per notice and waited
// the ask timeout for each (40 s here with the default 10 s).
func TestClosedInputIsNotAskedItsRoots(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(time.Minute)) // longer than the client waits
	tp := newTestPool(t, nil, fake("fs"))
	c := tp.dial(t, "fs")
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"piped","version":"1.0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		rootsChanged, rootsChanged, rootsChanged,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"piped"}}}`)
	if err := c.conn.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	m, other := c.recvID("1")
	if n := rootsAsks(other); n > 1 || m.text() != "piped" {
		t.Fatalf("a client with its input closed was asked roots/list %d times; its call got %s", n, m.raw)
	}
}
