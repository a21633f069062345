package pool_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// postLines POSTs body in the background, until ctx ends, and brings its
// response line by line: first "Content-Type: " and the response's, once
// its headers come, then its body's lines until it ends (the channel
// closes then).
func postLines(ctx context.Context, t *testing.T, url, body string, header ...string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	mirrorModernHeaders(req.Header, body)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	lines := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		send := func(l string) bool {
			select {
			case lines <- l:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if !send("Content-Type: " + resp.Header.Get("Content-Type")) {
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !send(sc.Text()) {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return lines
}

// nextLine is the next line, within 15 s.
func nextLine(t *testing.T, what string, lines <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("%s ended", what)
		}
		return l
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: nothing within 15s", what)
	}
	return ""
}

// answerEvent reads lines up to the next event's data, its message, and
// then the end of the response; keep-alives between them are skipped.
func answerEvent(t *testing.T, what string, lines <-chan string) msg {
	t.Helper()
	for {
		l := nextLine(t, what, lines)
		data, ok := strings.CutPrefix(l, "data: ")
		if !ok {
			continue
		}
		var m msg
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("%s: event %q: %v", what, data, err)
		}
		m.raw = data
		if rest := untilEnd(t, what, lines); strings.TrimSpace(rest) != "" {
			t.Fatalf("%s: %q after the answer", what, rest)
		}
		return m
	}
}

// jsonAnswer reads a plain JSON response: its content type, then its one
// line, the answer.
func jsonAnswer(t *testing.T, what string, lines <-chan string) msg {
	t.Helper()
	if ct := nextLine(t, what, lines); ct != "Content-Type: application/json" {
		t.Fatalf("%s: %s, want application/json", what, ct)
	}
	var m msg
	l := nextLine(t, what, lines)
	if err := json.Unmarshal([]byte(l), &m); err != nil {
		t.Fatalf("%s: %q: %v", what, l, err)
	}
	m.raw = l
	return m
}

// keptAliveFront serves tp's front door with a short keep-alive interval:
// an answer slower than 200 ms is slow.
func keptAliveFront(t *testing.T, tp *testPool) *httptest.Server {
	h := tp.HTTPHandler()
	pool.SetHTTPKeepAlive(h, 200*time.Millisecond)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return srv
}

// TestHTTPSlowAnswerTurnsIntoAStream: a POST whose answer has not come
// within the keep-alive interval, from a client that accepts an event
// stream, is turned into one: its headers go out then, and a comment
// every interval until the answer, its last event. Node's fetch ends a
// response whose headers, or whose body, it waits 300 s for: a call that
// waits for a person's answer, or a long build, was cut. A fast answer
// stays plain JSON, and so does one for a client that accepts only JSON
// (nothing else can carry it). On the first edition a POST answered as
// JSON said nothing until its answer: its headers came with it.
func TestHTTPSlowAnswerTurnsIntoAStream(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"), fake("mod", "-era", "modern"))
	srv := keptAliveFront(t, tp)

	// Legacy: the call waits for the client's person to answer its
	// question, for as long as the test holds the answer back.
	c := &httpClient{t: t, url: srv.URL + "/mcp/srv"}
	c.initializeWith("c", `{"elicitation":{}}`)
	get := openGetStream(t, c.url, c.sid, "")
	call := postLines(t.Context(), t, c.url, legacyAskCall(2, "elicitation"), "Mcp-Session-Id", c.sid)
	_, q := get.event()
	if q.Method != "elicitation/create" {
		t.Fatalf("the GET stream's first event: %s, want the child's question", q.raw)
	}
	if ct := nextLine(t, "the unanswered call's response", call); ct != "Content-Type: text/event-stream" {
		t.Fatalf("the unanswered call's response: %s, want text/event-stream", ct)
	}
	if l := nextLine(t, "the unanswered call's stream", call); l != ": keep-alive" {
		t.Fatalf("the unanswered call's stream began with %q, want the keep-alive", l)
	}
	answerQuestion(t, c, q, "Ada")
	if m := answerEvent(t, "the answered call's stream", call); string(m.ID) != "2" || !strings.Contains(m.text(), "Ada") {
		t.Fatalf("the call's last event: %s, want its answer", m.raw)
	}

	// Legacy, the fast path: plain JSON.
	if m := jsonAnswer(t, "a fast call", postLines(t.Context(), t, c.url, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
		"Mcp-Session-Id", c.sid)); m.text() != "hi" {
		t.Fatalf("a fast call: %s", m.raw)
	}

	// 2026-07-28: a slow call, and one from a legacy client that accepts
	// only JSON, at once.
	slow := postLines(t.Context(), t, srv.URL+"/mcp/mod", modernCall("4", "", "m", "sleep", `{"ms":1500}`))
	jsonOnly := postLines(t.Context(), t, c.url, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":1500}}}`,
		"Mcp-Session-Id", c.sid, "Accept", "application/json")
	if ct := nextLine(t, "the slow 2026-07-28 call's response", slow); ct != "Content-Type: text/event-stream" {
		t.Fatalf("the slow 2026-07-28 call's response: %s, want text/event-stream", ct)
	}
	if l := nextLine(t, "the slow 2026-07-28 call's stream", slow); l != ": keep-alive" {
		t.Fatalf("the slow 2026-07-28 call's stream began with %q, want the keep-alive", l)
	}
	if m := answerEvent(t, "the slow 2026-07-28 call's stream", slow); string(m.ID) != "4" || m.text() != "slept 1500" {
		t.Fatalf("the slow 2026-07-28 call's last event: %s, want its answer", m.raw)
	}
	if m := jsonAnswer(t, "a slow call that accepts only JSON", jsonOnly); m.text() != "slept 1500" {
		t.Fatalf("a slow call that accepts only JSON: %s", m.raw)
	}
	if m := jsonAnswer(t, "a fast 2026-07-28 call", postLines(t.Context(), t, srv.URL+"/mcp/mod", modernCall("6", "", "m", "echo", `{"text":"hi"}`))); m.text() != "hi" {
		t.Fatalf("a fast 2026-07-28 call: %s", m.raw)
	}
}

// TestHTTPSlowAnswerStreamEndsAsItsJSONWould: a POST turned into an event
// stream only because its answer was slow ends as its JSON would have:
// a legacy session that ends under it, or a rotation of the token a
// 2026-07-28 call carried, answers the call with an error (the JSON was
// a 503 or a 401), as an event naming the request, for its client waits
// for that answer; and a 2026-07-28 client that closes it cancels the
// call at the child.
func TestHTTPSlowAnswerStreamEndsAsItsJSONWould(t *testing.T) {
	var token atomic.Pointer[string]
	old, fresh := "old-token", "new-token"
	token.Store(&old)
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, &pool.Options{HTTPToken: func() string { return *token.Load() }},
		fake("srv"), fake("mod", "-era", "modern", "-log", logPath))
	srv := keptAliveFront(t, tp)
	auth := []string{"Authorization", "Bearer " + old}

	c := &httpClient{t: t, url: srv.URL + "/mcp/srv"}
	initWith(c, "c", auth)
	call := postLines(t.Context(), t, c.url, `{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000}}}`,
		append([]string{"Mcp-Session-Id", c.sid}, auth...)...)
	untilLine(t, "the slow call's stream", call, ": keep-alive")
	c.deleteSession(auth...)
	if m := answerEvent(t, "the slow call's stream", call); string(m.ID) != `"long"` || m.Error == nil || m.Error.Code != jsonrpc.CodeBackendUnavailable {
		t.Fatalf("the slow call's last event as its session ended: %s, want its error answer", m.raw)
	}

	ctx, cancel := context.WithCancel(t.Context())
	modern := postLines(ctx, t, srv.URL+"/mcp/mod", modernCall("1", "", "m", "sleep", `{"ms":60000}`), auth...)
	untilLine(t, "the slow 2026-07-28 call's stream", modern, ": keep-alive")
	cancel()
	eventually(t, "notifications/cancelled at the child", func() bool {
		return countMethod(childLog(t, logPath), "notifications/cancelled") == 1
	})
	eventually(t, "nothing in flight", func() bool { return len(tp.Snapshot().InFlight) == 0 })

	modern = postLines(t.Context(), t, srv.URL+"/mcp/mod", modernCall("2", "", "m", "sleep", `{"ms":60000}`), auth...)
	untilLine(t, "the slow 2026-07-28 call's stream", modern, ": keep-alive")
	token.Store(&fresh)
	tp.HTTPTokenRotated()
	if m := answerEvent(t, "the slow 2026-07-28 call's stream", modern); string(m.ID) != "2" || m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest {
		t.Fatalf("the slow 2026-07-28 call's last event as its token was rotated: %s, want its error answer", m.raw)
	}
	eventually(t, "the call cancelled at the child", func() bool {
		return countMethod(childLog(t, logPath), "notifications/cancelled") == 2
	})
}
