package pool_test

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestModernClientOfLegacyChild: a 2026-07-28 client of a legacy child, by
// HTTP and by stdio, gets results that carry resultType, and cacheable
// results that carry ttlMs and cacheScope; server/discover names the
// versions the pool serves. A legacy client of the same child gets the
// child's bytes unchanged.
func TestModernClientOfLegacyChild(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	stdio := tp.dial(t, "srv")
	for _, tc := range []struct {
		method, params string
		cacheable      bool
	}{
		{"server/discover", `{` + modernMeta + `}`, true},
		{"tools/list", `{` + modernMeta + `}`, true},
		{"resources/list", `{` + modernMeta + `}`, true},
		{"prompts/list", `{` + modernMeta + `}`, true},
		{"tools/call", `{"name":"echo","arguments":{"text":"hi"},` + modernMeta + `}`, false},
	} {
		body := `{"jsonrpc":"2.0","id":"x","method":"` + tc.method + `","params":` + tc.params + `}`
		stdio.send(body)
		viaStdio, _ := stdio.recvID(`"x"`)
		for how, m := range map[string]msg{"http": h.call(body), "stdio": viaStdio} {
			var r struct {
				ResultType string  `json:"resultType"`
				TTLMs      *int    `json:"ttlMs"`
				CacheScope *string `json:"cacheScope"`
			}
			if err := json.Unmarshal(m.Result, &r); err != nil || r.ResultType != "complete" {
				t.Fatalf("%s %s: no resultType complete: %s", how, tc.method, m.raw)
			}
			if tc.cacheable && (r.TTLMs == nil || *r.TTLMs != 0 || r.CacheScope == nil || *r.CacheScope != "private") {
				t.Fatalf("%s %s: want ttlMs 0, cacheScope private: %s", how, tc.method, m.raw)
			}
			if !tc.cacheable && (r.TTLMs != nil || r.CacheScope != nil) {
				t.Fatalf("%s %s: cache hints on a result that is not cacheable: %s", how, tc.method, m.raw)
			}
			if tc.method == "server/discover" && !strings.Contains(string(m.Result), `"supportedVersions":["2026-07-28","2025-11-25",`) {
				t.Fatalf("%s discover: %s", how, m.raw)
			}
		}
	}
	legacy := tp.dial(t, "srv")
	legacy.initialize("old", "")
	legacy.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if m, _ := legacy.recvID("2"); strings.Contains(m.raw, "resultType") || strings.Contains(m.raw, "ttlMs") {
		t.Fatalf("a legacy client got modern fields: %s", m.raw)
	}
}

// Every result a 2026-07-28 client gets from a legacy child names the
// server in _meta["io.modelcontextprotocol/serverInfo"] (2026-07-28
// basic/index: servers SHOULD, on every result), as server/discover names
// it: the child's own serverInfo. So do the pool's input_required for the
// child's question and for its -32042, and the retry's result. Over HTTP
// and stdio. On the first edition only server/discover carried it.
func TestModernResultsNameTheServer(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	roundTrip, _ := roundTrips(t, tp)
	infoOf := func(m msg) string {
		var r struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(m.Result, &r); err != nil {
			t.Fatalf("not a result: %s", m.raw)
		}
		return string(r.Meta["io.modelcontextprotocol/serverInfo"])
	}
	for _, how := range []string{"http", "stdio"} {
		t.Run(how, func(t *testing.T) {
			send := roundTrip[how]
			want := infoOf(send("1", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`))
			if !strings.Contains(want, `"fakemcp"`) {
				t.Fatalf("discover names the server %s, want the child's serverInfo", want)
			}
			check := func(what string, m msg) inputRequiredResult {
				t.Helper()
				if got := infoOf(m); got != want {
					t.Errorf("%s: serverInfo %s, want discover's %s: %s", what, got, want, m.raw)
				}
				return readResult(t, m)
			}
			check("tools/list", send("2", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+modernMeta+`}}`))
			check("prompts/list", send("3", `{"jsonrpc":"2.0","id":3,"method":"prompts/list","params":{`+modernMeta+`}}`))
			check("tools/call", send("4", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},`+modernMeta+`}}`))

			asked := check("input_required", send("5", askCall("5", "sampling", "")))
			for key := range asked.InputRequests {
				answer := `,"requestState":"` + asked.RequestState + `","inputResponses":{"` + key +
					`":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`
				check("the retry's result", send("6", askCall("6", "sampling", answer)))
			}
			file := filepath.Join(t.TempDir(), "not-yet")
			check("input_required for -32042", send("7", askURLCall("7", file, "", urlMeta)))
		})
	}
}

// TestHTTPModernValidation: the 2026-07-28 front door refuses what the spec
// says it must, with the spec's status and code, and none of it reaches the
// child; what is valid is served, and an unknown method is a 404.
func TestHTTPModernValidation(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	const caps = `"io.modelcontextprotocol/clientCapabilities":{}`
	const v = `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
	echo := func(meta string) string {
		return `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"refused"}` + meta + `}}`
	}
	modern := []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo"}
	for _, tc := range []struct {
		name   string
		body   string
		header []string
		status int
		code   int
	}{
		{"no _meta", echo(""), modern, 400, -32602},
		{"no version", echo(`,"_meta":{` + caps + `}`), modern, 400, -32602},
		{"no capabilities", echo(`,"_meta":{` + v + `}`), modern, 400, -32602},
		{"unsupported version", echo(`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01",` + caps + `}`),
			[]string{"MCP-Protocol-Version", "2099-01-01"}, 400, -32022},
		{"version header disagrees", echo(`,` + modernMeta), []string{"MCP-Protocol-Version", "2025-11-25"}, 400, -32020},
		{"method header disagrees", echo(`,` + modernMeta), []string{"Mcp-Method", "tools/list"}, 400, -32020},
		{"name header disagrees", echo(`,` + modernMeta), []string{"Mcp-Name", "crash"}, 400, -32020},
		{"name header missing", echo(`,` + modernMeta), nil, 400, -32020},
		{"name header bad base64", echo(`,` + modernMeta), []string{"Mcp-Name", "=?base64?!!?="}, 400, -32020},
		{"initialize", `{"jsonrpc":"2.0","id":5,"method":"initialize","params":{` + modernMeta + `}}`, nil, 404, -32601},
		{"ping", `{"jsonrpc":"2.0","id":5,"method":"ping","params":{` + modernMeta + `}}`, nil, 404, -32601},
		{"logging/setLevel", `{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"debug",` + modernMeta + `}}`, nil, 404, -32601},
		{"resources/subscribe", `{"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{"uri":"x:/a",` + modernMeta + `}}`, nil, 404, -32601},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			if tc.name == "name header missing" {
				resp = c.postRaw(tc.body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call")
			} else {
				resp = c.post(tc.body, tc.header...)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var m msg
			_ = json.Unmarshal(b, &m)
			if resp.StatusCode != tc.status || m.Error == nil || m.Error.Code != tc.code || string(m.ID) != "5" {
				t.Fatalf("%s %s, want %d with code %d and id 5", resp.Status, b, tc.status, tc.code)
			}
			if tc.code == -32022 && !strings.Contains(string(m.Error.Data), `"supported":["2026-07-28"`) ||
				tc.code == -32022 && !strings.Contains(string(m.Error.Data), `"requested":"2099-01-01"`) {
				t.Fatalf("unsupported version data: %s", b)
			}
		})
	}
	// Base64 sentinel form of a matching name is accepted.
	resp := c.post(echo(`,`+modernMeta), "Mcp-Name", "=?base64?ZWNobw==?=")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "refused") {
		t.Fatalf("base64 Mcp-Name: %s %s", resp.Status, b)
	}
	// An unknown method reaches the child, which says -32601: 404.
	resp = c.post(`{"jsonrpc":"2.0","id":6,"method":"no/such","params":{` + modernMeta + `}}`)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(b), "-32601") {
		t.Fatalf("unknown method: %s %s, want 404 -32601", resp.Status, b)
	}
	// A tool error is a result: 200.
	if m := c.call(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"nope","arguments":{},` + modernMeta + `}}`); m.Result == nil && m.Error == nil {
		t.Fatalf("tool error: %s", m.raw)
	}
	calls := 0
	for _, m := range childLog(t, logPath) {
		if p, _ := m["params"].(map[string]any); m["method"] == "tools/call" {
			if a, _ := p["arguments"].(map[string]any); a["text"] == "refused" {
				calls++
			}
		}
		if m["method"] == "ping" || m["method"] == "logging/setLevel" || m["method"] == "resources/subscribe" {
			t.Fatalf("a refused %s reached the child", m["method"])
		}
	}
	if calls != 1 {
		t.Fatalf("%d refused-or-served echo calls reached the child, want exactly the base64 one", calls)
	}
}

// A request in a revision the pool does not serve is told the versions a
// retry of it can use (-32022, 2026-07-28 basic/versioning: the client
// picks one from the list and retries, rather than falling back): over
// HTTP and stdio, before the server's first child ran and after, for an
// unknown revision and for a legacy one sent per request, 2026-07-28
// alone. Never the refused revision: a client that took the newest listed
// would retry it for ever. Not the legacy revisions server/discover lists
// either: only an initialize gets those, which is a fall-back, not a
// retry. (Before, it listed discover's list: every legacy revision, and
// a modern child's own other revisions, which the pool refuses here.)
func TestUnsupportedVersionListsOnlyWhatARetryCanUse(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	stdio := tp.dial(t, "srv")
	unsupported := func(version string) string {
		return `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` +
			version + `","io.modelcontextprotocol/clientCapabilities":{}}}}`
	}
	refusals := func(version string) map[string]msg {
		resp := h.post(unsupported(version))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		viaHTTP := msg{raw: string(b)}
		if err := json.Unmarshal(b, &viaHTTP); err != nil || resp.StatusCode != 400 {
			t.Fatalf("over HTTP: %s %s, want 400", resp.Status, b)
		}
		stdio.send(unsupported(version))
		viaStdio, _ := stdio.recvID("9")
		return map[string]msg{"http": viaHTTP, "stdio": viaStdio}
	}
	check := func(when, version string) {
		t.Helper()
		for how, m := range refusals(version) {
			var data struct {
				Supported []string `json:"supported"`
				Requested string   `json:"requested"`
			}
			if m.Error == nil || m.Error.Code != -32022 || json.Unmarshal(m.Error.Data, &data) != nil ||
				!slices.Equal(data.Supported, []string{"2026-07-28"}) || data.Requested != version {
				t.Errorf("%s, %s, %s requested: %s, want -32022 with supported [2026-07-28]", how, when, version, m.raw)
			}
		}
	}

	check("before any child", "2099-01-01")
	check("before any child", "2025-06-18")
	if m := h.call(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + modernMeta + `}}`); m.Result == nil {
		t.Fatalf("discover: %s", m.raw)
	}
	check("once a child ran", "2099-01-01")
	check("once a child ran", "2025-06-18")
}

// TestStdioModernValidation: a 2026-07-28 request over stdio gets the same
// _meta, version and removed-method checks as over HTTP, without reaching
// the child.
func TestStdioModernValidation(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := tp.dial(t, "srv")
	for _, tc := range []struct {
		body string
		code int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, -32022},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, -32602},
		{`{"jsonrpc":"2.0","id":3,"method":"ping","params":{` + modernMeta + `}}`, -32601},
		{`{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug",` + modernMeta + `}}`, -32601},
	} {
		c.send(tc.body)
		var id struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal([]byte(tc.body), &id)
		if m, _ := c.recvID(string(id.ID)); m.Error == nil || m.Error.Code != tc.code {
			t.Fatalf("%s: %s, want %d", tc.body, m.raw, tc.code)
		}
	}
}

// A legacy client of a 2026-07-28 child is promised only what it gets:
// the child has no resources/subscribe or list-change notifications any
// more, and the pool does not bridge them for a legacy session, so the
// initialize result offers none of them (the first edition passed the
// child's capabilities on, and a subscribe got "Method not found", list
// changes never came). What it does offer stays, logging too: the pool
// keeps the session's level and asks the child for its requests'
// messages at that level.
func TestLegacyClientOfModernChildIsPromisedWhatItGets(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
	c := tp.dial(t, "srv")
	m := c.initialize("old", "")
	var r struct {
		Capabilities map[string]map[string]any `json:"capabilities"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Capabilities["logging"]; !ok {
		t.Errorf("logging, which the pool bridges, not offered: %s", m.raw)
	}
	for _, k := range []string{"tools", "prompts", "resources"} {
		if _, ok := r.Capabilities[k]["listChanged"]; ok {
			t.Errorf("%s.listChanged offered: %s", k, m.raw)
		}
	}
	if _, ok := r.Capabilities["resources"]["subscribe"]; ok {
		t.Errorf("resources.subscribe offered: %s", m.raw)
	}
	if _, ok := r.Capabilities["tools"]; !ok {
		t.Errorf("tools, which it serves, not offered: %s", m.raw)
	}
}

// A legacy client of a 2026-07-28 child that reads a resource the child
// does not have gets 2025-11-25's "resource not found", -32002, with the
// child's message and data: the child says -32602 with the uri in its
// data (SEP-2164), which a legacy client takes for a malformed request.
// Another -32602 of the child's stays what it is, and a modern client
// gets the child's answer as the child wrote it.
func TestLegacyClientOfModernChildGetsResourceNotFound(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
	legacy := tp.dial(t, "srv")
	legacy.initialize("old", "")
	legacy.send(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"nope://x"}}`)
	m, _ := legacy.recvID("1")
	if m.Error == nil || m.Error.Code != -32002 || !strings.Contains(string(m.Error.Data), `"uri":"nope://x"`) {
		t.Errorf("a legacy client's read of a missing resource: want -32002 naming the uri, got %s", m.raw)
	}
	legacy.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"no_such_tool"}}`)
	if m, _ := legacy.recvID("2"); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("another -32602 of the child's: want it as it is, got %s", m.raw)
	}
	modern := tp.dial(t, "srv")
	modern.send(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"nope://x",` + modernMeta + `}}`)
	if m, _ := modern.recvID("3"); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("a modern client's read of a missing resource: want -32602, got %s", m.raw)
	}
}
