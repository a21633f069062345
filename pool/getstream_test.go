package pool_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// smallBufListener gives each connection a small send buffer: a client
// that stops reading blocks the pool's writes after kilobytes, not the
// megabytes a loopback connection otherwise takes in.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// newStallFront is newHTTPFront on small send buffers; it returns the
// handler too, for the test's looks into it.
func newStallFront(t *testing.T, tp *testPool) (http.Handler, string) {
	h := tp.HTTPHandler()
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = smallBufListener{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return h, srv.URL
}

// getStream is a legacy session's GET stream on a connection of the
// test's own, read only when the test reads it.
type getStream struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader // the body, de-chunked
}

// openGetStream GETs session sid's stream, resuming after lastEventID when
// it is not empty; nil when the pool did not answer 200 (409: the old
// stream is still open).
func openGetStream(t *testing.T, url, sid, lastEventID string) *getStream {
	t.Helper()
	return startGetStream(t, dialHost(t, url), url, sid, lastEventID)
}

// openedGetStream is openGetStream with no Last-Event-ID, which must be
// answered 200.
func openedGetStream(t *testing.T, url, sid string) *getStream {
	t.Helper()
	st := openGetStream(t, url, sid, "")
	if st == nil {
		t.Fatal("GET: not 200")
	}
	return st
}

// dialHost opens a TCP connection to url's host.
func dialHost(t *testing.T, url string) net.Conn {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// openStalledStream is openGetStream on a connection that takes in little
// while the test does not read it.
func openStalledStream(t *testing.T, url, sid string) *getStream {
	t.Helper()
	conn := dialHost(t, url)
	_ = conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	st := startGetStream(t, conn, url, sid, "")
	if st == nil {
		t.Fatal("GET: not 200")
	}
	return st
}

func startGetStream(t *testing.T, conn net.Conn, url, sid, lastEventID string) *getStream {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		conn.Close()
		return nil
	}
	t.Cleanup(func() { conn.Close() })
	return &getStream{t: t, conn: conn, r: bufio.NewReader(resp.Body)}
}

// reopen opens session sid's next stream once the pool has let the last
// one go.
func reopen(t *testing.T, url, sid, lastEventID string) *getStream {
	t.Helper()
	var st *getStream
	eventually(t, "the old GET stream to end and a new one to open", func() bool {
		st = openGetStream(t, url, sid, lastEventID)
		return st != nil
	})
	return st
}

// event reads the stream's next event: its id and message.
func (st *getStream) event() (id string, m msg) {
	st.t.Helper()
	_ = st.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	var data string
	for {
		line, err := st.r.ReadString('\n')
		if err != nil {
			st.t.Fatalf("reading the GET stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && data != "":
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				st.t.Fatalf("event %.200q: %v", data, err)
			}
			m.raw = data
			return id, m
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// callResult is what a POSTed call got: its answer, or why none.
type callResult struct {
	m   msg
	err error
}

// goCall POSTs a request in the background, until ctx ends; the result
// comes on the channel.
func goCall(ctx context.Context, c *httpClient, body string) <-chan callResult {
	done := make(chan callResult, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- callResult{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		var m msg
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		m.raw = string(b)
		done <- callResult{m: m, err: err}
	}()
	return done
}

// result waits for a call's result.
func result(t *testing.T, what string, call <-chan callResult) msg {
	t.Helper()
	select {
	case r := <-call:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.m
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no answer", what)
	}
	return msg{}
}

// answerQuestion POSTs the client's answer to the question q.
func answerQuestion(t *testing.T, c *httpClient, q msg, name string) {
	t.Helper()
	r := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":%q}}}`, q.ID, name))
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("the answer to %s: %s, want 202", q.ID, r.Status)
	}
}

func legacyAskCall(id int, kind string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ask","arguments":{"kind":%q}}}`, id, kind)
}

func logCall(id int, data string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"log","arguments":{"level":"info","data":%q}}}`, id, data)
}

// TestHTTPStreamEndedAsksAgain: a child's question that a legacy
// session's GET stream wrote is asked again, whole and first, on the
// session's next stream when the stream ends unanswered (here by its
// write timeout: the client stopped reading), and the event it was
// writing goes again whole after it; the client's answer completes the
// call, a second answer to the same question does not reach the child,
// and the answered question is not asked again. On the first edition the question was gone with the stream, and
// the call waited for ever.
func TestHTTPStreamEndedAsksAgain(t *testing.T) {
	t.Cleanup(pool.SetStreamWriteTimeout(200 * time.Millisecond)) // runs last: after the pool closed
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	_, base := newStallFront(t, tp)
	c := &httpClient{t: t, url: base + "/mcp/srv"}
	c.initializeWith("c", `{"elicitation":{}}`)
	if m := c.call(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`); m.Error != nil {
		t.Fatalf("setLevel: %s", m.raw)
	}
	st := openStalledStream(t, c.url, c.sid)
	call := goCall(t.Context(), c, legacyAskCall(3, "elicitation"))
	qEvent, q := st.event()
	if q.Method != "elicitation/create" {
		t.Fatalf("the stream's first event: %s, want the child's question", q.raw)
	}
	// The client reads no more: the pool cannot know whether it took the
	// question in. A log larger than the connection holds stalls the
	// stream's write until its timeout ends the stream.
	big := strings.Repeat("x", 256<<10)
	if m := c.call(logCall(4, big)); m.Error != nil {
		t.Fatalf("log: %s", m.raw)
	}
	st2 := reopen(t, c.url, c.sid, "") // a client that does not resume by event id
	if id, again := st2.event(); again.Method != "elicitation/create" || string(again.ID) != string(q.ID) || id != qEvent {
		t.Fatalf("the next stream's first event: id %s %.200s, want the question again (id %s %s)", id, again.raw, qEvent, q.raw)
	}
	if _, l := st2.event(); l.Method != "notifications/message" || !strings.Contains(l.raw, big) {
		t.Fatalf("the next stream's second event: %.200s, want the log cut short, whole", l.raw)
	}
	answerQuestion(t, c, q, "Ada")
	if m := result(t, "the call that asked", call); !strings.Contains(m.text(), "Ada") {
		t.Fatalf("the call that asked: %s, want the client's answer", m.raw)
	}
	// The question arrived twice; a second answer to it is the client's
	// to send, and the pool's to drop.
	answerQuestion(t, c, q, "Bob")
	c.call(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`) // the child reads in order
	answers := 0
	for _, m := range childLog(t, logPath) {
		if m["id"] == "srv-1" && m["method"] == nil {
			answers++
		}
	}
	if answers != 1 {
		t.Fatalf("the child got %d answers to its question, want 1", answers)
	}
	// Answered, it is not asked again.
	st2.conn.Close()
	st3 := reopen(t, c.url, c.sid, "")
	c.call(logCall(6, "small"))
	if _, m := st3.event(); m.Method != "notifications/message" {
		t.Fatalf("the stream after the answer: %.200s, want only what came next", m.raw)
	}
}

// TestHTTPStreamResumesAfterLastEventID: a client that resumes its GET
// stream with Last-Event-ID is sent again only what came after that
// event: a question after it is asked again, one up to it is not.
func TestHTTPStreamResumesAfterLastEventID(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	c.initializeWith("c", `{"elicitation":{}}`)
	notify := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"}}}`
	st := openedGetStream(t, c.url, c.sid)
	c.call(notify)
	changed, n := st.event()
	if n.Method != "notifications/tools/list_changed" {
		t.Fatalf("first event %s, want list_changed", n.raw)
	}
	call := goCall(t.Context(), c, legacyAskCall(3, "elicitation"))
	asked, q := st.event()
	if q.Method != "elicitation/create" {
		t.Fatalf("second event %s, want the question", q.raw)
	}
	st.conn.Close()
	st = reopen(t, c.url, c.sid, changed)
	if id, again := st.event(); id != asked || string(again.ID) != string(q.ID) {
		t.Fatalf("resumed after event %s: event %s %s, want the question again (event %s)", changed, id, again.raw, asked)
	}
	st.conn.Close()
	st = reopen(t, c.url, c.sid, asked)
	c.call(notify)
	if _, m := st.event(); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("resumed after the question: %s, want only what came next", m.raw)
	}
	answerQuestion(t, c, q, "Ada")
	if m := result(t, "the call that asked", call); !strings.Contains(m.text(), "Ada") {
		t.Fatalf("the call that asked: %s", m.raw)
	}
}

// TestHTTPStreamQueueBound: what waits for a legacy session's stalled
// GET stream is bounded by Options.SessionQueue: a request takes the
// place of a queued notification, and one that finds only requests is
// answered for the client with an error, so that the child that asked
// does not wait for it; the queued requests go out on the next stream
// once the client drops the stalled one. On the first edition the stream
// queued 64 messages and lost them with the stream.
func TestHTTPStreamQueueBound(t *testing.T) {
	tp := newTestPool(t, &pool.Options{SessionQueue: 2}, fake("srv"))
	h, base := newStallFront(t, tp)
	c := &httpClient{t: t, url: base + "/mcp/srv"}
	c.initializeWith("c", `{"elicitation":{}}`)
	if m := c.call(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`); m.Error != nil {
		t.Fatalf("setLevel: %s", m.raw)
	}
	st := openStalledStream(t, c.url, c.sid) // never read
	big := strings.Repeat("x", 256<<10)
	for i := range 2 {
		if m := c.call(logCall(3+i, big)); m.Error != nil {
			t.Fatalf("log: %s", m.raw)
		}
	}
	eventually(t, "the stream stuck in the first log, the second waiting", func() bool {
		return pool.HTTPStreamWaiting(h, c.sid) == 1
	})
	ended := make(chan callResult, 3)
	for i := range 3 {
		call := goCall(t.Context(), c, legacyAskCall(10+i, "elicitation"))
		go func() { ended <- <-call }()
	}
	if m := result(t, "the first call to end", ended); !strings.Contains(m.text(), "no connected client can answer elicitation/create") {
		t.Fatalf("the first call to end: %s, want its question refused for the client", m.raw)
	}
	if n := pool.HTTPStreamWaiting(h, c.sid); n != 2 {
		t.Fatalf("%d messages wait for the stream, want the 2 other questions", n)
	}
	st.conn.Close()
	st = reopen(t, c.url, c.sid, "")
	for range 2 {
		_, q := st.event()
		if q.Method != "elicitation/create" {
			t.Fatalf("the next stream: %.200s, want the questions", q.raw)
		}
		answerQuestion(t, c, q, "Ada")
	}
	for range 2 {
		if m := result(t, "a call whose question waited", ended); !strings.Contains(m.text(), "Ada") {
			t.Fatalf("a call whose question waited: %s", m.raw)
		}
	}
}

// TestHTTPQuestionWaitingForStreamEndsWithSession: a question left
// waiting for a GET stream that never comes back is answered to the child
// with an error when its session ends (here idle: its client went away),
// and the child's call ends with it.
func TestHTTPQuestionWaitingForStreamEndsWithSession(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	h := tp.HTTPHandler()
	front := newHTTPFrontOf(t, h)
	c := &httpClient{t: t, url: front + "/mcp/srv"}
	c.initializeWith("c", `{"elicitation":{}}`)
	st := openedGetStream(t, c.url, c.sid)
	ctx, cancel := context.WithCancel(t.Context())
	call := goCall(ctx, c, legacyAskCall(2, "elicitation"))
	if _, q := st.event(); q.Method != "elicitation/create" {
		t.Fatalf("want the question, got %s", q.raw)
	}
	st.conn.Close()
	cancel() // the client is gone: a legacy disconnect cancels nothing
	<-call
	eventually(t, "the idle session to expire", func() bool {
		pool.ExpireHTTPIdle(h, time.Now().Add(pool.HTTPSessionIdle+time.Second))
		return len(tp.Snapshot().Sessions) == 0
	})
	eventually(t, "the child's question answered with an error", func() bool {
		for _, m := range childLog(t, logPath) {
			if m["id"] == "srv-1" && m["error"] != nil {
				return true
			}
		}
		return false
	})
	eventually(t, "the call to end", func() bool { return len(tp.Snapshot().InFlight) == 0 })
}

// A legacy HTTP client that declares roots is asked them once it can be:
// clients open their GET stream after notifications/initialized was
// accepted (the TypeScript SDK does), when the pool could not yet send
// a request; it asks on the stream as it opens, and the session's calls
// then run on the child of its roots. On the first edition such a client
// was never asked, and its calls ran on the "no roots" child for good.
func TestHTTPClientsRootsAskedWhenItsStreamOpens(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	c.initializeWith("c", `{"roots":{"listChanged":true}}`)
	answerRootsOnStream(t, c, "file:///work/h")
	m := c.call(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"roots"}}}`)
	if got := m.text(); !strings.Contains(got, "file:///work/h") {
		t.Errorf("the session's child was given roots %q, want file:///work/h", got)
	}
}

// A legacy HTTP client whose GET stream opens just as the pool finds,
// handling its notifications/initialized, that it cannot ask the client
// its roots yet, is asked them on that stream. On the first edition the
// pool looked for the stream and recorded the question as owed in two
// steps: a stream that opened between them found nothing owed, the debt
// was recorded after, and the client was not asked until its next GET
// stream (its calls ran on the "no roots" child).
func TestRootsOwedAsTheStreamOpensAreAsked(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	resp := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"c","version":"1"}}}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.sid = resp.Header.Get("Mcp-Session-Id")
	u, err := neturl.Parse(c.url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := http.NewRequest(http.MethodGet, c.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.sid)
	var sent error
	restore := pool.OpenStreamAsRootsAreOwed(func() { sent = req.Write(conn) })
	defer restore()
	r := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	r.Body.Close()
	if sent != nil {
		t.Fatalf("GET: %v", sent)
	}
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	got, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil || got.StatusCode != http.StatusOK {
		t.Fatalf("GET: %v, %v", got, err)
	}
	st := &getStream{t: t, conn: conn, r: bufio.NewReader(got.Body)}
	if _, ask := st.event(); ask.Method != "roots/list" {
		t.Fatalf("the stream's first event is %s, want roots/list", ask.raw)
	}
}

// answerRootsOnStream opens c's GET stream, expects the pool's roots/list
// as its first event, and answers it with the one root uri.
func answerRootsOnStream(t *testing.T, c *httpClient, uri string) *getStream {
	t.Helper()
	st := openedGetStream(t, c.url, c.sid)
	_, ask := st.event()
	if ask.Method != "roots/list" {
		t.Fatalf("the stream's first event is %s, want roots/list", ask.raw)
	}
	r := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[{"uri":%q}]}}`, ask.ID, uri))
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("the roots answer: %s, want 202", r.Status)
	}
	return st
}
