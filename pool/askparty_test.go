package pool_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// askParty is one client of the party tests, of one kind: slow starts a
// call that stays in flight on the child for a few seconds, ask a call
// during which the child asks its client to elicit; each returns what
// waits for everything the call's client was sent until the call's
// answer, that answer last.
type askParty struct {
	slow, ask func() (wait func() []msg)
}

// partyKinds makes a party of each kind on server srv of tp: a legacy
// stdio session, and a 2026-07-28 HTTP client (each call an exchange of
// the server's stateless session). Both declare elicitation.
var partyKinds = map[string]func(t *testing.T, tp *testPool, name string) askParty{
	"stdio": func(t *testing.T, tp *testPool, name string) askParty {
		c := tp.dial(t, "srv")
		c.initialize(name, `{"elicitation":{}}`)
		call := func(id, tool, args string) func() []msg {
			c.call(id, tool, args)
			return func() []msg {
				m, other := c.recvID(id)
				return append(other, m)
			}
		}
		return askParty{
			slow: func() func() []msg { return call(`"slow"`, "sleep", `{"ms":3000}`) },
			ask:  func() func() []msg { return call(`"ask"`, "ask", `{"kind":"elicitation"}`) },
		}
	},
	"http": func(t *testing.T, tp *testPool, name string) askParty {
		url := newHTTPFront(t, tp) + "/mcp/srv"
		post := func(body string) func() []msg {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			got := make(chan []msg, 1)
			go func() {
				defer cancel()
				m, err := postStream(ctx, t, url, body)
				if err != nil {
					m = append(m, msg{raw: "error: " + err.Error()})
				}
				got <- m
			}()
			return func() []msg {
				select {
				case m := <-got:
					return m
				case <-time.After(30 * time.Second):
					t.Fatalf("%s: no answer to %s", name, body)
				}
				return nil
			}
		}
		declared := func(body string) string {
			return strings.Replace(body, `clientCapabilities":{}`, `clientCapabilities":{"elicitation":{}}`, 1)
		}
		return askParty{
			slow: func() func() []msg {
				return post(declared(modernCall("1", "", name, "sleep_echo", `{"ms":3000,"text":"mine"}`)))
			},
			ask: func() func() []msg { return post(declared(modernCall("1", "", name, "ask", `{"kind":"elicitation"}`))) },
		}
	},
}

// TestQuestionDuringSeveralClientsCallsGoesToNobody: client A's slow call
// is in flight on a shared legacy child when client B calls a tool that
// asks B's user for input. A legacy child does not say which call asks:
// the pool cannot tell B's question from A's, so it shows it to neither
// client, the child gets -32006 at once saying why, and the pool logs a
// warning, once however often it happens; A's call ends with its own
// result. For every pair of kinds: two legacy stdio sessions, two
// stateless HTTP calls (which share one pool session, so the session
// says nothing of the client), and one of each. Before, the question
// went to the oldest caller, A: A's user was shown B's question, and
// A's answer became B's result (a client could phish another's user by
// asking while the other had a call in flight).
func TestQuestionDuringSeveralClientsCallsGoesToNobody(t *testing.T) {
	for _, pair := range [][2]string{{"stdio", "stdio"}, {"http", "http"}, {"stdio", "http"}, {"http", "stdio"}} {
		t.Run(pair[0]+"-then-"+pair[1], func(t *testing.T) {
			logs := &logBuffer{}
			tp := newTestPool(t, &pool.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}, fake("srv"))
			a, b := partyKinds[pair[0]](t, tp, "A"), partyKinds[pair[1]](t, tp, "B")
			for round := range 2 { // the second: the warning is not repeated
				waitA := a.slow()
				eventually(t, "A's call to reach the child", func() bool {
					in := tp.Snapshot().InFlight
					return len(in) == 1 && in[0].WrittenToChild
				})
				waitB := b.ask()
				got := waitA()
				for _, m := range got {
					if m.Method != "" || strings.Contains(m.raw, "input_required") || strings.Contains(m.raw, "What is your name") {
						t.Fatalf("round %d: A was shown B's question: %s", round, raws(got))
					}
				}
				if last := got[len(got)-1]; last.Error != nil || last.text() != "slept 3000" && last.text() != "mine" {
					t.Fatalf("round %d: A's call got %s, want its own result", round, raws(got))
				}
				res := waitB()
				if text := res[len(res)-1].text(); !strings.Contains(text, "-32006") || !strings.Contains(text, "several clients") ||
					!strings.Contains(text, `share\": \"session`) {
					t.Fatalf("round %d: B's call got %s, want the child told -32006 that several clients' calls were in flight",
						round, raws(res))
				}
				for _, m := range res[:len(res)-1] {
					if m.Method != "" {
						t.Errorf("round %d: B was sent %s", round, m.raw)
					}
				}
			}
			if n := logs.count("a server's question went to no client"); n != 1 {
				t.Fatalf("%d warnings of the unasked question, want 1 (once, however often):\n%s", n, logs.b.String())
			}
		})
	}
}

// TestQuestionDuringOneClientsCallsGoesToIt: the calls in flight when a
// legacy child asks are all one client's, so the question is that
// client's: a legacy session with two calls in flight is asked it; a
// 2026-07-28 stdio session (one connection, one client) with two calls
// in flight that declared elicitation gets it as input_required on one
// of them (the oldest); a stateless HTTP call alone gets it as
// input_required.
func TestQuestionDuringOneClientsCallsGoesToIt(t *testing.T) {
	t.Run("legacy session", func(t *testing.T) {
		tp := newTestPool(t, nil, fake("srv"))
		c := tp.dial(t, "srv")
		c.initialize("one", `{"elicitation":{}}`)
		c.call(`"slow"`, "sleep", `{"ms":3000}`)
		eventually(t, "the slow call to reach the child", func() bool {
			in := tp.Snapshot().InFlight
			return len(in) == 1 && in[0].WrittenToChild
		})
		q := c.question(`"ask"`, "elicitation")
		c.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":"Ada"}}}`, q.ID)
		if m, _ := c.recvID(`"ask"`); !strings.Contains(m.text(), "Ada") {
			t.Fatalf("the asking call: %s, want its client's answer", m.raw)
		}
		if m, _ := c.recvID(`"slow"`); m.text() != "slept 3000" {
			t.Fatalf("the slow call: %s", m.raw)
		}
	})
	t.Run("modern stdio session", func(t *testing.T) {
		tp := newTestPool(t, nil, fake("srv"))
		c := tp.dial(t, "srv")
		c.send(strings.Replace(modernCall(`"slow"`, "", "one", "sleep_echo", `{"ms":3000,"text":"mine"}`),
			`clientCapabilities":{}`, `clientCapabilities":{"elicitation":{}}`, 1))
		eventually(t, "the slow call to reach the child", func() bool {
			in := tp.Snapshot().InFlight
			return len(in) == 1 && in[0].WrittenToChild
		})
		c.send(askCall(`"ask"`, "elicitation", ""))
		// Its oldest call that declared elicitation carries it: the
		// client's own, whichever of its calls that is.
		m := c.recv()
		if r := readResult(t, m); r.ResultType != "input_required" || len(r.InputRequests) != 1 ||
			!strings.Contains(m.raw, "What is your name") {
			t.Fatalf("the session's first answer: %s, want its question as input_required", m.raw)
		}
	})
	t.Run("stateless call", func(t *testing.T) {
		tp := newTestPool(t, nil, fake("srv"))
		h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
		if r := readResult(t, h.call(askCall("1", "elicitation", ""))); r.ResultType != "input_required" || len(r.InputRequests) != 1 {
			t.Fatalf("the asking call: %+v, want input_required", r)
		}
	})
}

// TestUndeclaredCallersQuestionIsAskedOfNoOtherSession: a client that
// declared no elicitation calls a tool that elicits, while another
// session, which declared it, has no call on the child. The question is
// the caller's, who cannot answer it: the child gets -32006, and the
// other session is shown nothing. Before, the most recently active
// session that could answer was asked: any client could put a question
// of its own making to another's user, and read the answer.
func TestUndeclaredCallersQuestionIsAskedOfNoOtherSession(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	victim, hostile := tp.dial(t, "srv"), tp.dial(t, "srv")
	victim.initialize("victim", `{"elicitation":{}}`)
	hostile.initialize("hostile", "")
	hostile.call("1", "ask", `{"kind":"elicitation"}`)
	select {
	case m := <-victim.in:
		t.Fatalf("the other session was shown the caller's question: %s", m.raw)
	case m := <-hostile.in:
		if text := m.text(); string(m.ID) != "1" || !strings.Contains(text, "-32006") {
			t.Fatalf("the caller got %s, want its call's result: the child told -32006", m.raw)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no message within 15s")
	}
	victim.call("2", "echo", `{"text":"still here"}`)
	if m, other := victim.recvID("2"); m.text() != "still here" || len(other) != 0 {
		t.Fatalf("the other session: %s, after %s", m.raw, raws(other))
	}
}
