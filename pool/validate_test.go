package pool_test

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// A 2026-07-28 request is checked the same way whichever front door
// carries it and whichever era its child speaks: server/discover without
// the _meta every modern request carries, and a _meta
// io.modelcontextprotocol/logLevel that names no level, get -32602 (400
// over HTTP), none of it reaching the child. (Before, stdio answered the
// bare server/discover in full, and a legacy child's call took any log
// level, where a modern child refused it.)
func TestModernValidationIsTheSameEverywhere(t *testing.T) {
	const badLevel = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"bogus"}}}`
	bodies := []string{
		`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`,
		`{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}`,
		badLevel,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":7}}}`,
	}
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) {
			tp := newTestPool(t, nil, fake("srv", "-era", era))
			h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
			c := tp.dial(t, "srv")
			for _, body := range bodies {
				var req struct {
					ID json.RawMessage `json:"id"`
				}
				_ = json.Unmarshal([]byte(body), &req)
				c.send(body)
				if m, _ := c.recvID(string(req.ID)); m.Error == nil || m.Error.Code != -32602 {
					t.Errorf("stdio %s: %.200s, want -32602", body, m.raw)
				}
				resp := h.post(body)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var m msg
				if json.Unmarshal(b, &m) != nil || resp.StatusCode != http.StatusBadRequest || m.Error == nil || m.Error.Code != -32602 {
					t.Errorf("HTTP %s: %s %.200s, want 400 with -32602", body, resp.Status, b)
				}
			}
		})
	}
}

// On stdio a request of neither era (no initialize before it, no
// 2026-07-28 _meta in it) is refused with -32602 saying what each era's
// client sends, and reaches no child: served as legacy, it got an answer
// neither era's client expects. A session that opened with modern
// requests is no more legacy for one without _meta. ping, which a legacy
// client may send before its initialize, is answered; once initialized,
// the same request is served. (Before, such a request went to the child
// and was answered in legacy shape.)
func TestRequestOfNeitherEraIsRefused(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	c := tp.dial(t, "srv")
	refused := func(id string) {
		t.Helper()
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`)
		if m, _ := c.recvID(id); m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, "initialize first") {
			t.Errorf("tools/list %s of neither era: %.200s, want -32602 saying to initialize first", id, m.raw)
		}
	}
	refused("1")
	c.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if m, _ := c.recvID("2"); m.Error != nil || string(m.Result) != "{}" {
		t.Errorf("ping before initialize: %s", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + modernMeta + `}}`)
	if m, _ := c.recvID("3"); !strings.Contains(string(m.Result), `"resultType":"complete"`) {
		t.Errorf("a modern tools/list: %.200s", m.raw)
	}
	refused("4")

	c = tp.dial(t, "srv")
	c.initialize("old", "")
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
	if m, _ := c.recvID("5"); m.Error != nil || strings.Contains(m.raw, "resultType") {
		t.Errorf("an initialized session's tools/list: %.200s", m.raw)
	}
	if n := countMethod(childLog(t, logPath), "tools/list"); n != 2 {
		t.Errorf("the child saw %d tools/list, want 2: the modern one and the initialized session's", n)
	}
}
