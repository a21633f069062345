package pool_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// childAnswers counts the answers the child got to its request id, and
// says the error code of the last one (0: a result).
func childAnswers(t *testing.T, logPath, id string) (n int, code float64) {
	t.Helper()
	for _, m := range childLog(t, logPath) {
		if m["id"] != id || m["method"] != nil {
			continue
		}
		n++
		code = 0
		if e, ok := m["error"].(map[string]any); ok {
			code, _ = e["code"].(float64)
		}
	}
	return n, code
}

// askablePair starts a pool whose srv (its child logging to logPath)
// takes a question back after 100 ms (QuestionGrace), and two legacy HTTP
// sessions of it at url: a, which can answer a form, and b, which
// declares bCaps.
func askablePair(t *testing.T, bCaps string) (url, logPath string, a, b *httpClient) {
	t.Helper()
	logPath = filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, &pool.Options{QuestionGrace: 100 * time.Millisecond}, fake("srv", "-log", logPath))
	url = newHTTPFront(t, tp) + "/mcp/srv"
	a = &httpClient{t: t, url: url}
	a.initializeWith("a", `{"elicitation":{}}`)
	b = &httpClient{t: t, url: url}
	b.initializeWith("b", bCaps)
	return url, logPath, a, b
}

// TestHTTPQuestionTakenBackFromClientThatLeft: a child's question asked
// of a legacy HTTP session, whose call caused it, whose GET stream then
// ends, with no DELETE (the TypeScript SDK's close()), and does not come
// back within Options.QuestionGrace, is taken back and answered -32006
// to the child, as a DELETE would have it, and the call gets what the
// child makes of that, long before its request timeout. It is asked of
// no other session, though one can answer it and has its stream open:
// the question is the caller's. The client, coming back late, is not
// asked it again, and its answer from the old stream does not reach the
// child. On the first edition the question waited for the client's next
// stream, and the call for its timeout; later it was asked again of
// another session that could answer it.
func TestHTTPQuestionTakenBackFromClientThatLeft(t *testing.T) {
	url, logPath, a, b := askablePair(t, `{"elicitation":{}}`)
	stA := openedGetStream(t, url, a.sid)
	stB := openedGetStream(t, url, b.sid)
	call := goCall(t.Context(), a, legacyAskCall(2, "elicitation"))
	_, q := stA.event()
	if q.Method != "elicitation/create" {
		t.Fatalf("a's first event: %s, want the child's question", q.raw)
	}
	stA.conn.Close() // a leaves without a DELETE
	if m := result(t, "a's call", call); !strings.Contains(m.text(), "the client that was asked disconnected") {
		t.Fatalf("a's call: %s, want the child's question refused", m.raw)
	}
	if n, code := childAnswers(t, logPath, "srv-1"); n != 1 || code != -32006 {
		t.Fatalf("the child got %d answers to its question, the last with code %v; want one, -32006", n, code)
	}
	// a comes back: the question is no longer its.
	stA = reopen(t, url, a.sid, "")
	answerQuestion(t, a, q, "Ada") // from the old stream: dropped
	c := b.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"}}}`)
	if c.Error != nil {
		t.Fatalf("notify: %s", c.raw)
	}
	for who, st := range map[string]*getStream{"a, back,": stA, "b": stB} {
		if _, m := st.event(); m.Method != "notifications/tools/list_changed" {
			t.Fatalf("%s got %.200s, want only the change", who, m.raw)
		}
	}
	if n, code := childAnswers(t, logPath, "srv-1"); n != 1 || code != -32006 {
		t.Fatalf("the child got %d answers to its question (the last with code %v), want the pool's alone", n, code)
	}
}

// TestHTTPQuestionOfACallerThatCannotAnswerGoesToNoOne: a legacy HTTP
// client that declared no elicitation calls a tool that elicits, while
// another session, which declared it, has its GET stream open. The
// question is the caller's, which cannot answer it: the child gets
// -32006 at once, and the other session is asked nothing. Before, the
// other session was asked: any client could put a question of its own
// making to another's user.
func TestHTTPQuestionOfACallerThatCannotAnswerGoesToNoOne(t *testing.T) {
	url, logPath, a, b := askablePair(t, `{}`)
	stA := openedGetStream(t, url, a.sid)
	openedGetStream(t, url, b.sid) // it can receive, but not answer a form
	if m := result(t, "b's call", goCall(t.Context(), b, legacyAskCall(2, "elicitation"))); !strings.Contains(m.text(), "no connected client") {
		t.Fatalf("b's call: %s, want the child's question refused", m.raw)
	}
	if n, code := childAnswers(t, logPath, "srv-1"); n != 1 || code != -32006 {
		t.Fatalf("the child got %d answers to its question, the last with code %v; want one, -32006", n, code)
	}
	a.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"}}}`)
	if _, m := stA.event(); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("a's first event: %.200s, want only the change", m.raw)
	}
}

// TestHTTPQuestionKeptForClientBackWithinGrace: a client whose GET stream
// ends and that resumes it with Last-Event-ID within the grace is asked
// the child's question of its call again (no other session is), and its
// answer completes the call; its return ends the grace, so a grace
// counted from its stream's end takes nothing from it.
func TestHTTPQuestionKeptForClientBackWithinGrace(t *testing.T) {
	tp := newTestPool(t, &pool.Options{QuestionGrace: time.Minute}, fake("srv"))
	h := tp.HTTPHandler()
	front := newHTTPFrontOf(t, h)
	url := front + "/mcp/srv"
	a := &httpClient{t: t, url: url}
	a.initializeWith("a", `{"elicitation":{}}`)
	b := &httpClient{t: t, url: url}
	b.initializeWith("b", `{"elicitation":{}}`)
	notify := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"}}}`
	stA := openedGetStream(t, url, a.sid)
	a.call(fmt.Sprintf(notify, 2))
	changed, n := stA.event()
	if n.Method != "notifications/tools/list_changed" {
		t.Fatalf("a's first event: %s, want list_changed", n.raw)
	}
	call := goCall(t.Context(), a, legacyAskCall(4, "elicitation"))
	asked, q := stA.event()
	if q.Method != "elicitation/create" {
		t.Fatalf("a's second event: %s, want the child's question", q.raw)
	}
	stB := openedGetStream(t, url, b.sid)
	stA.conn.Close()
	eventually(t, "the question parked for a's return", func() bool { return pool.HTTPQuestionsParked(h, a.sid) })
	stA = reopen(t, url, a.sid, changed)
	if pool.HTTPQuestionsParked(h, a.sid) {
		t.Fatal("a is back, and its question is still to be taken back")
	}
	if id, again := stA.event(); id != asked || string(again.ID) != string(q.ID) {
		t.Fatalf("a resumed after event %s: event %s %s, want the question again (event %s)", changed, id, again.raw, asked)
	}
	answerQuestion(t, a, q, "Ada")
	if m := result(t, "a's call", call); !strings.Contains(m.text(), "Ada") {
		t.Fatalf("a's call: %s, want a's answer", m.raw)
	}
	b.call(fmt.Sprintf(notify, 3))
	if _, m := stB.event(); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("b's first event: %.200s, want only the change: the question was a's", m.raw)
	}
}
