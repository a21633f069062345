//go:build unix

package pool_test

import (
	"fmt"
	"net"
	"path/filepath"
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
	c.question(`"ask"`, "elicitation")
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

// A 2026-07-28 client over stdio whose call the pool answered with
// input_required, holding the child's call for its retry (MRTR), and that
// then closes its input can send no retry: the held call is cancelled at
// the child at once, not kept the 10 minutes (here a minute) a person is
// given to answer. So is the held call of a client that goes away. A
// call held for an HTTP client, whose retry may come on any request, is
// kept, and its retry completes it. A question the child asks once the
// client's input closed is not carried to it: the child gets -32006 and
// answers the call (or, asked as the input closed, the call it holds is
// cancelled as above). On the first edition the held calls ran on at the
// child, and held its place there, until the hold was let go.
func TestClosedInputEndsHeldCalls(t *testing.T) {
	t.Cleanup(pool.SetHoldKeep(time.Minute)) // restored once the pools have closed
	for _, how := range []string{"closes its input", "goes away"} {
		t.Run(how, func(t *testing.T) {
			// Two servers' children: on one, a question while the other
			// client's call is in flight could be either's, and goes to
			// neither.
			logPath, httpLog := filepath.Join(t.TempDir(), "child.log"), filepath.Join(t.TempDir(), "http.log")
			tp := newTestPool(t, nil, fake("srv", "-log", logPath), fake("web", "-log", httpLog))
			h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/web"}
			kept := readResult(t, h.call(askCall("1", "sampling", "")))
			if kept.ResultType != "input_required" || len(tp.Snapshot().InFlight) != 1 {
				t.Fatalf("the HTTP client's call: %+v; in flight: %+v", kept, tp.Snapshot().InFlight)
			}
			httpCall := tp.Snapshot().InFlight[0].PoolID

			c := tp.dial(t, "srv")
			c.send(askCall("2", "sampling", ""))
			if m, _ := c.recvID("2"); readResult(t, m).ResultType != "input_required" {
				t.Fatalf("the stdio client's call: %s", m.raw)
			}
			var held uint64
			for _, r := range tp.Snapshot().InFlight {
				if r.PoolID != httpCall {
					held = r.PoolID
				}
			}
			if held == 0 {
				t.Fatalf("the stdio client's call is not held: in flight %+v", tp.Snapshot().InFlight)
			}
			if how == "closes its input" {
				c.closeInput()
			} else {
				c.close()
			}

			eventually(t, "the held call to be cancelled at the child", func() bool { return len(cancelledAtChild(t, logPath)) > 0 },
				func() string { return fmt.Sprintf("in flight: %+v", tp.Snapshot().InFlight) })
			if ids := cancelledAtChild(t, logPath); len(ids) != 1 || ids[0] != fmt.Sprint(held) {
				t.Fatalf("the child was told to cancel %v, want the stdio client's held call %d alone", ids, held)
			}
			if in := tp.Snapshot().InFlight; len(in) != 1 || in[0].PoolID != httpCall {
				t.Fatalf("in flight: %+v, want the HTTP client's held call alone", in)
			}
			if ids := cancelledAtChild(t, httpLog); len(ids) != 0 {
				t.Fatalf("the HTTP client's child was told to cancel %v", ids)
			}
			for key := range kept.InputRequests {
				done := readResult(t, h.call(askCall("3", "sampling", `,"requestState":"`+kept.RequestState+`","inputResponses":{"`+key+
					`":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`)))
				if done.ResultType != "complete" || len(done.Content) != 1 || !strings.Contains(done.Content[0].Text, "forty-two") {
					t.Fatalf("the HTTP client's retry: %+v", done)
				}
			}
		})
	}

	t.Run("asked after", func(t *testing.T) {
		tp := newTestPool(t, nil, fake("srv"))
		c := tp.dial(t, "srv")
		c.send(askCall("1", "sampling", ""))
		c.closeInput()
		m, _ := c.recvID("1")
		if !strings.Contains(m.raw, "input_required") && !strings.Contains(m.text(), "closed its input") {
			t.Fatalf("a question for a client whose input closed: want the child's answer with the pool's error, got %s", m.raw)
		}
		eventually(t, "nothing to be left in flight", func() bool { return len(tp.Snapshot().InFlight) == 0 },
			func() string { return fmt.Sprintf("in flight: %+v", tp.Snapshot().InFlight) })
	})
}
