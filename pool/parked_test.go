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
// of a legacy HTTP session whose GET stream then ends, with no DELETE
// (the TypeScript SDK's close()), and does not come back within
// Options.QuestionGrace, is asked again of another session that can
// answer it, here the one whose call caused it, which opened its stream
// meanwhile. The first client, coming back late, is not asked it again,
// and its answer from the old stream does not reach the child. On the
// first edition the question waited for the first client's next stream,
// and the call for its timeout.
func TestHTTPQuestionTakenBackFromClientThatLeft(t *testing.T) {
	url, logPath, a, b := askablePair(t, `{"elicitation":{}}`)
	stA := openedGetStream(t, url, a.sid)
	call := goCall(t.Context(), b, legacyAskCall(2, "elicitation"))
	_, q := stA.event() // b has no stream: a, the one that can receive, is asked
	if q.Method != "elicitation/create" {
		t.Fatalf("a's first event: %s, want the child's question", q.raw)
	}
	stB := openedGetStream(t, url, b.sid)
	stA.conn.Close() // a leaves without a DELETE
	_, again := stB.event()
	if again.Method != "elicitation/create" || string(again.ID) == string(q.ID) {
		t.Fatalf("b's first event: %s, want the question asked anew (a had id %s)", again.raw, q.ID)
	}
	answerQuestion(t, b, again, "Bea")
	if m := result(t, "b's call", call); !strings.Contains(m.text(), "Bea") {
		t.Fatalf("b's call: %s, want b's answer", m.raw)
	}
	// a comes back: the question is no longer its.
	stA = reopen(t, url, a.sid, "")
	answerQuestion(t, a, q, "Ada") // from the old stream: dropped
	c := b.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"}}}`)
	if c.Error != nil {
		t.Fatalf("notify: %s", c.raw)
	}
	if _, m := stA.event(); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("a's stream after it came back: %.200s, want only what came next", m.raw)
	}
	if n, code := childAnswers(t, logPath, "srv-1"); n != 1 || code != 0 {
		t.Fatalf("the child got %d answers to its question (the last with code %v), want b's alone", n, code)
	}
}

// TestHTTPQuestionTakenBackNoOneElse: a child's question that a legacy
// HTTP client left on its ended GET stream past the grace, with no other
// session able to answer it (the caller declared no elicitation), is
// answered to the child with -32006, as a DELETE would have it, and the
// call that caused it gets what the child makes of that, long before its
// request timeout. On the first edition both waited for the timeout.
func TestHTTPQuestionTakenBackNoOneElse(t *testing.T) {
	url, logPath, a, b := askablePair(t, `{}`)
	stA := openedGetStream(t, url, a.sid)
	openedGetStream(t, url, b.sid) // it can receive, but not answer a form
	call := goCall(t.Context(), b, legacyAskCall(2, "elicitation"))
	if _, q := stA.event(); q.Method != "elicitation/create" {
		t.Fatalf("a's first event: %s, want the child's question", q.raw)
	}
	stA.conn.Close()
	if m := result(t, "b's call", call); !strings.Contains(m.text(), "the client that was asked disconnected") {
		t.Fatalf("b's call: %s, want the child's question refused", m.raw)
	}
	if n, code := childAnswers(t, logPath, "srv-1"); n != 1 || code != -32006 {
		t.Fatalf("the child got %d answers to its question, the last with code %v; want one, -32006", n, code)
	}
}

// TestHTTPQuestionKeptForClientBackWithinGrace: a client whose GET stream
// ends and that resumes it with Last-Event-ID within the grace is asked
// the child's question again, as its own (no other session is), and its
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
	call := goCall(t.Context(), b, legacyAskCall(2, "elicitation"))
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
	if m := result(t, "b's call", call); !strings.Contains(m.text(), "Ada") {
		t.Fatalf("b's call: %s, want a's answer", m.raw)
	}
	b.call(fmt.Sprintf(notify, 3))
	if _, m := stB.event(); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("b's first event: %.200s, want only the change: the question was a's", m.raw)
	}
}
