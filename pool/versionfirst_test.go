package pool_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestUnsupportedVersionIsRefusedFirst: a request naming a revision the
// pool does not serve per request gets -32022 (HTTP 400), naming it, over
// HTTP and stdio, whatever else 2026-07-28 would find wrong with it: the
// version is read first, from _meta, else from the MCP-Protocol-Version
// header (basic/versioning: a server that does not implement the version
// MUST answer UnsupportedProtocolVersionError; that revision's other rules
// are not the request's), but after an MCP-Protocol-Version header that
// names another version than _meta (-32020, as the conformance suite
// has it). What names 2026-07-28 is judged by its rules as before. (Before, a 2027-01-01 request without clientCapabilities got
// -32602, one without Mcp-Method -32020, and a 2099-01-01 header over a
// body without _meta -32602.)
func TestUnsupportedVersionIsRefusedFirst(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	stdio := tp.dial(t, "srv")
	list := func(meta string) string {
		if meta == "" {
			return `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
		}
		return `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{` + meta + `}}}`
	}
	version := func(v string) string { return `"io.modelcontextprotocol/protocolVersion":"` + v + `"` }
	const caps = `"io.modelcontextprotocol/clientCapabilities":{}`
	for _, tc := range []struct {
		name      string
		body      string
		header    []string // over HTTP, the only headers besides the transport's own
		httpOnly  bool     // the version is in the header alone: stdio has none
		code      int
		requested string // of -32022
	}{
		{"a newer version, no clientCapabilities", list(version("2027-01-01")),
			[]string{"MCP-Protocol-Version", "2027-01-01", "Mcp-Method", "tools/list"}, false, -32022, "2027-01-01"},
		{"a newer version, no Mcp-Method header", list(version("2027-01-01") + "," + caps),
			[]string{"MCP-Protocol-Version", "2027-01-01"}, false, -32022, "2027-01-01"},
		{"a newer version, no headers at all", list(version("2027-01-01") + "," + caps), nil, false, -32022, "2027-01-01"},
		// The header against the body comes first (the conformance
		// suite's server-stateless: v999.0.0 in _meta under a 2026-07-28
		// header is -32020).
		{"a newer version in _meta, 2026-07-28 in the header", list(version("2099-01-01") + "," + caps),
			[]string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"}, true, -32020, ""},
		{"a legacy version per request, no session", list(version("2025-11-25")),
			[]string{"MCP-Protocol-Version", "2025-11-25", "Mcp-Method", "tools/list"}, false, -32022, "2025-11-25"},
		{"a newer version header, a body without _meta", list(""),
			[]string{"MCP-Protocol-Version", "2099-01-01", "Mcp-Method", "tools/list"}, true, -32022, "2099-01-01"},
		{"a newer version header, _meta without a version", list(caps),
			[]string{"MCP-Protocol-Version", "2099-01-01", "Mcp-Method", "tools/list"}, true, -32022, "2099-01-01"},
		// 2026-07-28 requests: that revision's rules, in its order.
		{"2026-07-28, no clientCapabilities", list(version("2026-07-28")),
			[]string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"}, false, -32602, ""},
		{"2026-07-28 header, a body without _meta", list(""),
			[]string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"}, true, -32602, ""},
		{"2026-07-28 in _meta, another version in the header", list(version("2026-07-28") + "," + caps),
			[]string{"MCP-Protocol-Version", "2099-01-01", "Mcp-Method", "tools/list"}, true, -32020, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.postRaw(tc.body, tc.header...)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			viaHTTP := msg{raw: string(b)}
			if err := json.Unmarshal(b, &viaHTTP); err != nil || resp.StatusCode != http.StatusBadRequest {
				t.Errorf("over HTTP: %s %s, want 400", resp.Status, b)
			}
			answers := map[string]msg{"http": viaHTTP}
			if !tc.httpOnly {
				stdio.send(tc.body)
				answers["stdio"], _ = stdio.recvID("7")
			}
			for how, m := range answers {
				var data struct {
					Requested string `json:"requested"`
				}
				if m.Error == nil || m.Error.Code != tc.code ||
					tc.code == -32022 && (json.Unmarshal(m.Error.Data, &data) != nil || data.Requested != tc.requested) {
					t.Errorf("%s: %s, want %d (requested %q)", how, m.raw, tc.code, tc.requested)
				}
			}
		})
	}
}

// TestLegacySessionNamesALegacyVersionInMeta: a legacy session's request
// whose _meta names a legacy revision, its own negotiated one or another,
// is the session's legacy request, served as its others are, over HTTP
// (with its session id) and stdio: only 2026-07-28 or later in _meta makes
// a request modern (basic/versioning: modern revisions are 2026-07-28 and
// later; legacy revisions give the key no meaning). A newer revision in
// _meta is still refused with -32022. (Before, any version in _meta made
// the request a 2026-07-28 one: -32602 without clientCapabilities, else
// -32022, naming the session's own version.)
func TestLegacySessionNamesALegacyVersionInMeta(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	h.initialize("old") // negotiates 2025-06-18
	stdio := tp.dial(t, "srv")
	stdio.initialize("old", "") // negotiates 2025-11-25
	list := func(id, meta string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"_meta":{` + meta + `}}}`
	}
	version := func(v string) string { return `"io.modelcontextprotocol/protocolVersion":"` + v + `"` }
	const caps = `,"io.modelcontextprotocol/clientCapabilities":{}`
	viaStdio := func(body string) msg {
		stdio.send(body)
		m, _ := stdio.recvID("8")
		return m
	}
	viaHTTP := func(body, header string) msg {
		resp := h.postRaw(body, "MCP-Protocol-Version", header)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := msg{raw: resp.Status + " " + string(b)}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("over HTTP: %s %s", resp.Status, b)
		}
		return m
	}
	served := func(how, what string, m msg) {
		t.Helper()
		var r struct {
			Tools      []json.RawMessage `json:"tools"`
			ResultType *string           `json:"resultType"`
		}
		if m.Error != nil || json.Unmarshal(m.Result, &r) != nil || len(r.Tools) == 0 || r.ResultType != nil {
			t.Errorf("%s, %s: %s, want the legacy session's tools/list result (no resultType)", how, what, m.raw)
		}
	}
	for _, meta := range []string{"", caps} {
		served("stdio", "its own version "+meta, viaStdio(list("8", version("2025-11-25")+meta)))
		served("stdio", "another legacy version "+meta, viaStdio(list("8", version("2025-06-18")+meta)))
		served("http", "its own version "+meta, viaHTTP(list("8", version("2025-06-18")+meta), "2025-06-18"))
		served("http", "another legacy version "+meta, viaHTTP(list("8", version("2025-11-25")+meta), "2025-06-18"))
	}
	for how, m := range map[string]msg{
		"stdio": viaStdio(list("8", version("2099-01-01")+caps)),
		"http":  viaHTTP(list("8", version("2099-01-01")+caps), "2099-01-01"),
	} {
		if m.Error == nil || m.Error.Code != -32022 || !strings.Contains(string(m.Error.Data), `"requested":"2099-01-01"`) {
			t.Errorf("%s, a newer version in a legacy session's _meta: %s, want -32022", how, m.raw)
		}
	}
}
