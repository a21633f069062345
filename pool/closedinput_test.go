//go:build unix

package pool_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A client that closes its input (`printf … | switchboard connect NAME`)
// can answer no question. The questions it was asked end at once, and it
// is asked nothing more: a legacy child's is answered with the pool's
// error, so the child answers its call now; a 2026-07-28 child's, put to
// it for a call, ends that call with an error now. Its other calls still
// get their answers, as for any client that closed its input. On the
// first edition the questions waited for the person (here a minute, 10 by
// default), and the call and the session with them.

// closeInput closes the client's side of its connection for writing.
func (c *client) closeInput() {
	c.t.Helper()
	if err := c.conn.(*net.UnixConn).CloseWrite(); err != nil {
		c.t.Fatal(err)
	}
}

// closeInputAsked starts a call that sleeps 300 ms and one whose child
// asks the client a question, and closes the client's input once the
// question has come.
func closeInputAsked(t *testing.T, tp *testPool) *client {
	t.Helper()
	c := tp.dial(t, "srv")
	c.initialize("piped", `{"elicitation":{}}`)
	c.call(`"slow"`, "sleep", `{"ms":300}`)
	c.call(`"ask"`, "ask", `{"kind":"elicitation"}`)
	if q := c.recv(); q.Method != "elicitation/create" {
		t.Fatalf("want the child's question, got %s", q.raw)
	}
	c.closeInput()
	return c
}

// closeInputBeforeAsked sends, as a piped client does, the initialize and
// a call whose child asks the client a question, and closes the client's
// input at once, before the question has come.
func closeInputBeforeAsked(t *testing.T, tp *testPool) *client {
	t.Helper()
	c := tp.dial(t, "srv")
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"piped","version":"1.0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"ask","method":"tools/call","params":{"name":"ask","arguments":{"kind":"elicitation"}}}`)
	c.closeInput()
	return c
}

func TestClosedInputEndsLegacyChildsQuestion(t *testing.T) {
	t.Cleanup(pool.SetHoldKeep(time.Minute)) // restored once the pools have closed

	t.Run("asked before", func(t *testing.T) {
		tp := newTestPool(t, nil, fake("srv"))
		c := closeInputAsked(t, tp)
		m, _ := c.recvID(`"ask"`)
		if !strings.Contains(m.text(), "closed its input") {
			t.Fatalf("the call whose question can no longer be answered: want the child's answer with the pool's error, got %s", m.raw)
		}
		if m, _ := c.recvID(`"slow"`); m.text() != "slept 300" {
			t.Fatalf("a call in flight as the input closed: want its answer, got %s", m.raw)
		}
	})

	t.Run("asked after", func(t *testing.T) {
		tp := newTestPool(t, nil, fake("srv"))
		c := closeInputBeforeAsked(t, tp)
		m, _ := c.recvID(`"ask"`)
		if !strings.Contains(m.text(), "closed its input") && !strings.Contains(m.text(), "no connected client") {
			t.Fatalf("a question to a client whose input closed: want the child's answer with the pool's error, got %s", m.raw)
		}
	})
}

// A question a legacy child asks for the call of a client whose input
// closed is that client's, not another session's: it ends -32006 "closed
// its input", and another session of the child that declared elicitation
// is asked nothing (it would see a form for a call it never made, and its
// answer would become the piped client's result). The child starts slowly,
// so it asks after the piped client's input closed, as in a pipe.
func TestClosedInputQuestionIsNotAskedOfAnotherSession(t *testing.T) {
	t.Cleanup(pool.SetHoldKeep(time.Minute)) // restored once the pools have closed
	tp := newTestPool(t, nil, fake("srv", "-startup-delay", "1s"))
	other := tp.dial(t, "srv")
	other.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"person","version":"1.0"}}}`)
	piped := tp.dial(t, "srv")
	piped.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"piped","version":"1.0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"ask","method":"tools/call","params":{"name":"ask","arguments":{"kind":"elicitation"}}}`)
	piped.closeInput()
	other.recvID(`"init"`)
	other.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	deadline := time.After(15 * time.Second)
	for {
		select {
		case m := <-other.in:
			if m.Method == "elicitation/create" {
				t.Errorf("another session was asked the piped client's question: %s", m.raw)
				other.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":"Mallory"}}}`, m.ID)
			}
		case m, ok := <-piped.in:
			if !ok {
				t.Fatal("the piped session ended before its call's answer")
			}
			if string(m.ID) != `"ask"` || m.Method != "" {
				continue
			}
			if !strings.Contains(m.text(), "closed its input") {
				t.Fatalf("want the child's answer with the pool's error (-32006, closed its input), got %s", m.raw)
			}
			return
		case <-deadline:
			t.Fatal("no answer to the piped client's call")
		}
	}
}

func TestClosedInputEndsBridgedQuestion(t *testing.T) {
	t.Cleanup(pool.SetHoldKeep(time.Minute)) // restored once the pools have closed

	t.Run("asked before", func(t *testing.T) {
		tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
		c := closeInputAsked(t, tp)
		m, _ := c.recvID(`"ask"`)
		if m.Error == nil || !strings.Contains(m.Error.Message, "closed its input") {
			t.Fatalf("the call whose question can no longer be answered: want the pool's error, got %s", m.raw)
		}
		if m, _ := c.recvID(`"slow"`); m.text() != "slept 300" {
			t.Fatalf("a call in flight as the input closed: want its answer, got %s", m.raw)
		}
		if n := pool.BridgedQuestions(tp.Pool); n != 0 {
			t.Fatalf("%d questions still wait for a client whose input closed", n)
		}
	})

	t.Run("asked after", func(t *testing.T) {
		tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
		c := closeInputBeforeAsked(t, tp)
		m, _ := c.recvID(`"ask"`)
		if m.Error == nil || !strings.Contains(m.Error.Message, "closed its input") {
			t.Fatalf("a question to a client whose input closed: want the pool's error, got %s", m.raw)
		}
	})
}
