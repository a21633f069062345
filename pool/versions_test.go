package pool_test

import (
	"encoding/json"
	"io"
	"slices"
	"testing"
)

// The pool offers no revision whose rules it does not keep: 2025-03-26
// requires receiving JSON-RPC batches, which the pool refuses, so it is
// neither answered to an initialize nor listed by server/discover. A
// client asking for it is answered 2024-11-05, the newest revision the
// pool serves before it (the SDKs that send 2025-03-26 speak 2024-11-05
// too; none knew 2025-06-18); a child that speaks it is presented as
// 2025-06-18, the oldest served revision after it (later revisions only
// add to the wire format), never as itself. Over stdio and HTTP. (Before,
// the pool agreed to 2025-03-26, then refused the batches it allows.)
func TestNoRevisionThatNeedsBatches(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"), fake("old", "-protocol-version", "2025-03-26"))
	front := newHTTPFront(t, tp)
	negotiated := func(server, requested string) (viaStdio, viaHTTP string) {
		t.Helper()
		init := `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + requested +
			`","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		c := tp.dial(t, server)
		c.send(init)
		m, _ := c.recvID(`"init"`)
		if err := json.Unmarshal(m.Result, &r); err != nil {
			t.Fatalf("initialize over stdio: %s", m.raw)
		}
		viaStdio = r.ProtocolVersion
		h := &httpClient{t: t, url: front + "/mcp/" + server}
		resp := h.postRaw(init)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r.ProtocolVersion = ""
		if err := json.Unmarshal(b, &m); err != nil || json.Unmarshal(m.Result, &r) != nil {
			t.Fatalf("initialize over HTTP: %s %s", resp.Status, b)
		}
		return viaStdio, r.ProtocolVersion
	}
	for _, tc := range []struct{ server, requested, want string }{
		{"srv", "2025-03-26", "2024-11-05"},
		{"srv", "2025-06-18", "2025-06-18"},
		{"srv", "2024-11-05", "2024-11-05"},
		{"old", "2025-11-25", "2025-06-18"},
		{"old", "2025-06-18", "2025-06-18"},
		{"old", "2025-03-26", "2024-11-05"},
	} {
		if viaStdio, viaHTTP := negotiated(tc.server, tc.requested); viaStdio != tc.want || viaHTTP != tc.want {
			t.Errorf("%s asked for %s: answered %q over stdio, %q over HTTP; want %s", tc.server, tc.requested, viaStdio, viaHTTP, tc.want)
		}
	}
	for server, want := range map[string][]string{
		"srv": {"2026-07-28", "2025-11-25", "2025-06-18", "2024-11-05"},
		"old": {"2026-07-28", "2025-06-18", "2024-11-05"},
	} {
		h := &httpClient{t: t, url: front + "/mcp/" + server}
		var r struct {
			SupportedVersions []string `json:"supportedVersions"`
		}
		if m := h.call(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + modernMeta + `}}`); json.Unmarshal(m.Result, &r) != nil || !slices.Equal(r.SupportedVersions, want) {
			t.Errorf("%s: server/discover lists %q, want %q", server, r.SupportedVersions, want)
		}
	}
}
