package pool_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestHTTPIdleStreamsAreKeptAlive: an event stream with nothing to say
// (a legacy session's GET stream, a 2026-07-28 listen) is sent an SSE
// comment every so often, so that a client that ends a body silent for
// minutes (Node's fetch aborts one after 300 s, and the TypeScript SDK
// then reconnects, losing what came in between) keeps it. On the first
// edition an idle stream carried nothing at all.
func TestHTTPIdleStreamsAreKeptAlive(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"), fake("mod", "-era", "modern"))
	h := tp.HTTPHandler()
	pool.SetHTTPKeepAlive(h, 50*time.Millisecond)
	front := newHTTPFrontOf(t, h)

	c := &httpClient{t: t, url: front + "/mcp/srv"}
	c.initialize("c")
	get := streamLines(t, http.MethodGet, c.url, "", "Mcp-Session-Id", c.sid)
	untilLine(t, "the idle GET stream", get, ": keep-alive")

	listen := streamLines(t, http.MethodPost, front+"/mcp/mod",
		`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+modernMeta+`}}`)
	untilLine(t, "the listen", listen, "notifications/subscriptions/acknowledged")
	untilLine(t, "the idle listen", listen, ": keep-alive")

	// A listen's stream is its response even for a client that names only
	// JSON in Accept; that response's keep-alive timer is armed only once
	// it is an event stream (a plain answer for such a client needs none).
	jsonOnly := streamLines(t, http.MethodPost, front+"/mcp/mod",
		`{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+modernMeta+`}}`,
		"Accept", "application/json")
	untilLine(t, "the JSON-only client's listen", jsonOnly, "notifications/subscriptions/acknowledged")
	untilLine(t, "the JSON-only client's idle listen", jsonOnly, ": keep-alive")
}

// TestHTTPListChangeWaitsForTheNextStream: a list change that comes while
// a legacy session has no GET stream open (the TypeScript SDK reconnects
// after a stream ends) waits for the next stream, one of each kind, so
// the client lists again rather than miss it; other notifications are
// still dropped. On the first edition every notification was dropped
// then, and the client never learnt that the list had changed.
func TestHTTPListChangeWaitsForTheNextStream(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	h := tp.HTTPHandler()
	front := newHTTPFrontOf(t, h)
	c := &httpClient{t: t, url: front + "/mcp/srv"}
	c.initialize("c")
	if m := c.call(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`); m.Error != nil {
		t.Fatalf("setLevel: %s", m.raw)
	}
	st := openGetStream(t, c.url, c.sid, "")
	st.conn.Close()
	eventually(t, "the GET stream to end", func() bool { return !pool.HTTPStreamOpen(h, c.sid) })

	notify := func(id int, kind string) {
		t.Helper()
		if m := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"notify","arguments":{"kind":%q}}}`, id, kind)); m.Error != nil {
			t.Fatalf("notify: %s", m.raw)
		}
	}
	notify(3, "tools")
	notify(4, "tools")
	notify(5, "prompts")
	c.call(logCall(6, "not kept"))
	if n := pool.HTTPStreamWaiting(h, c.sid); n != 2 {
		t.Fatalf("%d messages wait for the next stream, want one list change of each kind", n)
	}
	st = openGetStream(t, c.url, c.sid, "")
	if _, m := st.event(); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("the next stream's first event: %s", m.raw)
	}
	if _, m := st.event(); m.Method != "notifications/prompts/list_changed" {
		t.Fatalf("the next stream's second event: %s", m.raw)
	}
}
