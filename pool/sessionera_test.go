package pool_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// A 2026-07-28 request in a session a legacy client opened with
// initialize is served as a 2026-07-28 request, on its own; the session
// stays what its initialize made it. The client first sends a
// server/discover and a subscriptions/listen carrying the modern _meta
// (each answered as 2026-07-28 answers), then plain legacy requests: they
// get legacy results (no resultType), the tool list changes its
// initialize promised (untagged; the listen gets its own, tagged), and
// the child's elicitation during a legacy call is asked of the client.
// Over stdio; over HTTP with the session's id on the modern requests.
// (Before, the first modern request made the whole session modern for
// good: no promised list changes, resultType on every result, and the
// elicitation failed the call with -32021, a code the client's revision
// does not know.)
func TestModernRequestLeavesALegacySessionLegacy(t *testing.T) {
	const discover = `{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{` + modernMeta + `}}`
	const listen = `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`

	t.Run("stdio", func(t *testing.T) {
		tp := newTestPool(t, nil, fake("srv"))
		c := tp.dial(t, "srv")
		init := c.initialize("old", `{"elicitation":{}}`)
		if !strings.Contains(string(init.Result), `"tools":{"listChanged":true}`) {
			t.Fatalf("initialize promised no tool list changes: %s", init.raw)
		}
		c.send(discover)
		if m, _ := c.recvID(`"d"`); !strings.Contains(string(m.Result), `"resultType":"complete"`) {
			t.Fatalf("server/discover: %s, want a 2026-07-28 result", m.raw)
		}
		c.send(listen)
		if ack := c.recv(); ack.Method != "notifications/subscriptions/acknowledged" {
			t.Fatalf("listen: %s, want its acknowledgement", ack.raw)
		}

		c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		if m, _ := c.recvID("2"); m.Error != nil || strings.Contains(m.raw, "resultType") {
			t.Errorf("a legacy tools/list: %.200s, want a legacy result", m.raw)
		}
		c.call("3", "notify", `{"kind":"tools"}`)
		_, before := c.recvID("3")
		if got, want := notificationsIn(before), []string{"notifications/tools/list_changed ", `notifications/tools/list_changed "L"`}; !sameSet(got, want) {
			t.Errorf("the tool list change: the session got %q, want %q", got, want)
		}
		c.call("4", "ask", `{"kind":"elicitation"}`)
		q := c.recv()
		if q.Method != "elicitation/create" {
			t.Fatalf("the legacy call's question: %s, want elicitation/create", q.raw)
		}
		c.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":"Ada"}}}`, q.ID)
		if m, _ := c.recvID("4"); m.Error != nil || !strings.Contains(m.raw, "Ada") || strings.Contains(m.raw, "resultType") {
			t.Errorf("the legacy call that asked: %s, want its legacy result with the answer", m.raw)
		}
	})

	t.Run("http", func(t *testing.T) {
		tp := newTestPool(t, nil, fake("srv"))
		c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
		c.initializeWith("old", `{"elicitation":{}}`)
		st := openGetStream(t, c.url, c.sid, "")
		if m := c.call(discover); !strings.Contains(string(m.Result), `"resultType":"complete"`) {
			t.Fatalf("server/discover: %s, want a 2026-07-28 result", m.raw)
		}
		if m := c.call(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); m.Error != nil || strings.Contains(m.raw, "resultType") {
			t.Errorf("a legacy tools/list: %.200s, want a legacy result", m.raw)
		}
		c.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"}}}`)
		if _, m := st.event(); m.Method != "notifications/tools/list_changed" {
			t.Fatalf("the GET stream's event: %s, want the promised tool list change", m.raw)
		}
		call := goCall(t.Context(), c, legacyAskCall(4, "elicitation"))
		_, q := st.event()
		if q.Method != "elicitation/create" {
			t.Fatalf("the GET stream's event: %s, want the legacy call's question", q.raw)
		}
		answerQuestion(t, c, q, "Ada")
		if m := result(t, "the legacy call that asked", call); m.Error != nil || !strings.Contains(m.raw, "Ada") || strings.Contains(m.raw, "resultType") {
			t.Errorf("the legacy call that asked: %s, want its legacy result with the answer", m.raw)
		}
	})
}

// sameSet reports whether got and want hold the same strings, in any
// order.
func sameSet(got, want []string) bool {
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}

// A 2026-07-28 request over HTTP is served statelessly whatever
// Mcp-Session-Id it carries (2026-07-28 streamable-http, Backward
// Compatibility: the header is ignored): with a live legacy session's
// id it is checked as any modern request is (its headers, its version:
// 400 with the modern error) and answered as one; with an id the pool
// does not know, it is served, not told to initialize again. (Before,
// the id was looked at first: a live one had the request served in the
// legacy session, unchecked, a refusal coming with HTTP 200; a stale one
// got 404.)
func TestModernRequestIgnoresTheSessionID(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	c.initialize("old")
	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`
	refused := func(what string, resp *http.Response, status, code int) {
		t.Helper()
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var m msg
		if err := json.Unmarshal(b, &m); err != nil || resp.StatusCode != status || m.Error == nil || m.Error.Code != code {
			t.Errorf("%s: %s %.200s, want %d with %d", what, resp.Status, b, status, code)
		}
	}
	refused("a live session's id, no Mcp-Method", c.post(list, "Mcp-Method", ""), http.StatusBadRequest, -32020)
	refused("a live session's id, a newer version in _meta", c.postRaw(
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		"MCP-Protocol-Version", "2099-01-01", "Mcp-Method", "tools/list"), http.StatusBadRequest, -32022)
	refused("a live session's id, the 2026-07-28 header, no _meta", c.postRaw(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
		"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"), http.StatusBadRequest, -32602)
	for _, sid := range []string{c.sid, "stale"} {
		c := &httpClient{t: t, url: c.url, sid: sid}
		resp := c.post(list)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"resultType":"complete"`) || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("session id %q: %s, session id %q, %.200s; want a 2026-07-28 result and no session id", sid, resp.Status, resp.Header.Get("Mcp-Session-Id"), b)
		}
	}
}
