package pool_test

import (
	"encoding/json"
	"io"
	"net/http"
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
