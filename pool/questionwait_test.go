package pool_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestLegacyQuestionPausesItsCallsTimeout: a legacy child asks its legacy
// client a question during a call (an elicitation, a sampling), and a
// person takes longer than the server's request timeout to answer it.
// The call's timeout waits while the question does: the answer still
// reaches the child and the call gets the child's result. Another
// session's call, whose client was not asked, keeps its timeout (made
// after the question, it times out later than the asked call would have:
// the wait for it is the wait past that call's own timeout). The wait is
// bounded as a 2026-07-28 client's is (here 4 s, not 10 minutes): a
// question nobody answers ends its call saying the client did not answer.
// On the first edition the call got -32001 at its request timeout while
// the child still waited for the person, and the answer was lost. The
// claim is about order (the answer comes after the call's own timeout
// would have ended it), so no step of it races a short timeout: the
// timeout (2 s) is large next to the child's asking and its result after
// the answer, which share it, and the wait for a person (4 s) ends well
// after the other session's call times out and the answer goes.
func TestLegacyQuestionPausesItsCallsTimeout(t *testing.T) {
	c := questionPausesItsCallsTimeout(t, fake("srv"))

	c.question(`"unanswered"`, "elicitation")
	m, _ := c.recvID(`"unanswered"`)
	if m.Error == nil || m.Error.Code != -32001 || !strings.Contains(m.Error.Message, "the client did not answer") {
		t.Fatalf("a question nobody answers: want -32001 saying the client did not answer, got %s", m.raw)
	}
}

// questionPausesItsCallsTimeout runs the claim TestLegacyQuestionPausesItsCallsTimeout
// and TestBridgedQuestionPausesItsCallsTimeout share, on the child cfg
// (legacy or 2026-07-28): under a 2 s request timeout and a 4 s wait for a
// person, the child asks an elicitation, then a sampling; each is answered
// only after another session's call, made after the question, times out,
// and its call must still get the child's result. It returns the asked
// client.
func questionPausesItsCallsTimeout(t *testing.T, cfg pool.ServerConfig) *client {
	t.Helper()
	const timeout, keep = 2 * time.Second, 4 * time.Second
	t.Cleanup(pool.SetHoldKeep(keep)) // restored once the pool has closed
	tp := newTestPool(t, nil, cfg)
	c, other := tp.dial(t, "srv"), tp.dial(t, "srv")
	c.initialize("person", `{"elicitation":{},"sampling":{}}`)
	other.initialize("other", "")
	tp.applyRequestTimeout(t, &cfg, timeout)

	for i, q := range []struct{ kind, answer, want string }{
		{"elicitation", `{"action":"accept","content":{"name":"Ada"}}`, "Ada"},
		{"sampling", `{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}`, "forty-two"},
	} {
		id := `"` + q.kind + `"`
		asked := c.question(id, q.kind)
		sleeper := `"sleep` + string(rune('0'+i)) + `"`
		other.call(sleeper, "sleep", `{"ms":20000}`)
		if m, _ := other.recvID(sleeper); m.Error == nil || m.Error.Code != -32001 {
			t.Fatalf("%s: the other session's call: want -32001 at its timeout, got %s", q.kind, m.raw)
		}
		c.sendf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, asked.ID, q.answer)
		res, extra := c.recvID(id)
		if !strings.Contains(res.text(), q.want) || len(extra) != 0 {
			t.Fatalf("%s: the call answered after its timeout: %s (before it: %v)", q.kind, res.raw, extra)
		}
	}

	return c
}

// TestLegacyQuestionNeverShortensATimeout: a question pauses the asked
// session's calls' timeouts, bounded by how long a person is waited for
// (holdKeep, here 300 ms); a call whose own timeout ends later than that
// bound keeps it. Here the server's request timeout is 5 s: another
// session's call arms the pool's timeout sweep for 5 s, then, 2 s in, the
// asked session starts a 4 s build and a call whose question nobody
// answers. The build gets its result at 6 s, within its own timeout; the
// unanswered call ends at its own 7 s deadline with the plain timeout
// error, as it would have without the question. On the first edition the
// question moved both deadlines to the bound, and the sweep armed for 5 s
// cut both there (-32001 "the client did not answer … within 300ms"), a
// second before the build finished.
func TestLegacyQuestionNeverShortensATimeout(t *testing.T) {
	const timeout, keep = 5 * time.Second, 300 * time.Millisecond
	t.Cleanup(pool.SetHoldKeep(keep)) // restored once the pool has closed
	cfg := fake("srv")
	cfg.RequestTimeout = timeout
	tp := newTestPool(t, nil, cfg)
	c, other := tp.dial(t, "srv"), tp.dial(t, "srv")
	c.initialize("person", `{"elicitation":{}}`)
	other.initialize("other", "")

	other.call(`"first"`, "sleep", `{"ms":2000}`) // arms the sweep for 5 s; 2 s pass
	if m, _ := other.recvID(`"first"`); m.Error != nil {
		t.Fatalf("first: %s", m.raw)
	}
	c.call(`"build"`, "sleep", `{"ms":4000}`) // due at 7 s, done at 6 s
	c.question(`"ask"`, "elicitation")
	if m, _ := c.recvID(`"build"`); m.Error != nil || m.text() != "slept 4000" {
		t.Fatalf("a call within its timeout, paused by a question: want its result, got %s", m.raw)
	}
	m, _ := c.recvID(`"ask"`)
	if m.Error == nil || m.Error.Code != -32001 || !strings.Contains(m.Error.Message, "did not answer tools/call within 5s") {
		t.Fatalf("an unanswered question's call past its own timeout: want -32001 naming 5s, got %s", m.raw)
	}
}

// question has c call the fake's ask tool as id, for a question of kind
// ("elicitation" or "sampling"), and returns the child's question, which
// must be the next message c gets.
func (c *client) question(id, kind string) msg {
	c.t.Helper()
	c.call(id, "ask", `{"kind":"`+kind+`"}`)
	q := c.recv()
	if want := map[string]string{"elicitation": "elicitation/create", "sampling": "sampling/createMessage"}[kind]; q.Method != want {
		c.t.Fatalf("want the child's question, got %s", q.raw)
	}
	return q
}
