package pool_test

import (
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
