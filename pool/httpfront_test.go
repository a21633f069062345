package pool_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// httpClient is one HTTP MCP client of a test pool's front door.
type httpClient struct {
	t   testing.TB
	url string
	sid string // Mcp-Session-Id, once initialized (legacy)
}

func newHTTPFront(t testing.TB, tp *testPool) string {
	return newHTTPFrontOf(t, tp.HTTPHandler())
}

// newHTTPFrontOf serves h until the test ends, and returns its URL.
func newHTTPFrontOf(t testing.TB, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(http.DefaultClient.CloseIdleConnections) // before srv.Close
	return srv.URL
}

// post sends one message and returns the HTTP response.
func (c *httpClient) post(body string, header ...string) *http.Response {
	c.t.Helper()
	return c.do(body, true, header...)
}

// postRaw is post without the mirrored modern headers.
func (c *httpClient) postRaw(body string, header ...string) *http.Response {
	c.t.Helper()
	return c.do(body, false, header...)
}

func (c *httpClient) do(body string, mirror bool, header ...string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	if mirror {
		mirrorModernHeaders(req.Header, body)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// mirrorModernHeaders sets the headers a 2026-07-28 client mirrors from a
// modern request's body, as real clients do.
func mirrorModernHeaders(h http.Header, body string) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string                     `json:"name"`
			URI  string                     `json:"uri"`
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal([]byte(body), &m) != nil {
		return
	}
	var version string
	if json.Unmarshal(m.Params.Meta["io.modelcontextprotocol/protocolVersion"], &version) != nil {
		return
	}
	h.Set("MCP-Protocol-Version", version)
	h.Set("Mcp-Method", m.Method)
	switch m.Method {
	case "tools/call", "prompts/get":
		h.Set("Mcp-Name", m.Params.Name)
	case "resources/read":
		h.Set("Mcp-Name", m.Params.URI)
	}
}

// deleteSession ends c's session with a DELETE carrying header (name,
// value pairs), which must answer 204.
func (c *httpClient) deleteSession(header ...string) {
	c.t.Helper()
	del, _ := http.NewRequest(http.MethodDelete, c.url, nil)
	del.Header.Set("Mcp-Session-Id", c.sid)
	for i := 0; i+1 < len(header); i += 2 {
		del.Header.Set(header[i], header[i+1])
	}
	r, err := http.DefaultClient.Do(del)
	if err != nil {
		c.t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusNoContent {
		c.t.Fatalf("DELETE: %s", r.Status)
	}
}

// call posts a request and decodes its JSON answer.
func (c *httpClient) call(body string) msg {
	c.t.Helper()
	resp := c.post(body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("POST %s: %s %s", body, resp.Status, b)
	}
	var m msg
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("answer %q: %v", b, err)
	}
	m.raw = string(b)
	return m
}

func (c *httpClient) initialize(name string) {
	c.t.Helper()
	c.initializeWith(name, `{}`)
}

// initializeWith is initialize declaring the client capabilities caps.
func (c *httpClient) initializeWith(name, caps string) {
	c.t.Helper()
	resp := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":%s,"clientInfo":{"name":%q,"version":"1"}}}`, caps, name))
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		c.t.Fatalf("initialize: %s, session id %q", resp.Status, resp.Header.Get("Mcp-Session-Id"))
	}
	c.sid = resp.Header.Get("Mcp-Session-Id")
	r := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		c.t.Fatalf("notifications/initialized: %s, want 202", r.Status)
	}
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// TestHTTPLegacySessionsAndStdioShareIDs: two legacy HTTP sessions and a
// stdio session all use id 1 at once; each gets only its own answer.
func TestHTTPLegacySessionsAndStdioShareIDs(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	base := newHTTPFront(t, tp) + "/mcp/srv"
	a, b := &httpClient{t: t, url: base}, &httpClient{t: t, url: base}
	a.initialize("a")
	b.initialize("b")
	if a.sid == b.sid {
		t.Fatal("two sessions got one session id")
	}
	s := tp.dial(t, "srv")
	s.initialize("stdio", "")
	s.call("1", "sleep_echo", `{"ms":100,"text":"stdio"}`)
	var wg sync.WaitGroup
	got := make([]string, 2)
	for i, c := range []*httpClient{a, b} {
		wg.Go(func() {
			got[i] = c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep_echo","arguments":{"ms":100,"text":"http-%d"}}}`, i)).text()
		})
	}
	wg.Wait()
	if got[0] != "http-0" || got[1] != "http-1" {
		t.Fatalf("HTTP answers %q", got)
	}
	if r, _ := s.recvID("1"); r.text() != "stdio" {
		t.Fatalf("stdio answer %s", r.raw)
	}
	if n := len(tp.Snapshot().Sessions); n != 3 {
		t.Fatalf("%d sessions in the snapshot, want 3", n)
	}
	var http int
	for _, ses := range tp.Snapshot().Sessions {
		if ses.Transport == "http" {
			http++
		}
	}
	if http != 2 {
		t.Fatalf("%d http sessions, want 2", http)
	}
}

// TestHTTPManyClientsCollidingIDs: 16 legacy HTTP clients x 8 in flight,
// every client numbering from 1: nothing misrouted or lost.
func TestHTTPManyClientsCollidingIDs(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	base := newHTTPFront(t, tp) + "/mcp/srv"
	var wg sync.WaitGroup
	for i := range 16 {
		c := &httpClient{t: t, url: base}
		c.initialize(fmt.Sprint("c", i))
		for j := 1; j <= 8; j++ {
			wg.Go(func() {
				want := fmt.Sprintf("c%d/%d", i, j)
				resp := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, j, want))
				defer resp.Body.Close()
				var m msg
				if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
					t.Errorf("%s: %v", want, err)
					return
				}
				if got := m.text(); got != want || string(m.ID) != fmt.Sprint(j) {
					t.Errorf("asked %s (id %d), got %q (id %s)", want, j, got, m.ID)
				}
			})
		}
	}
	wg.Wait()
}

// TestHTTPSessionVersionHeader: a legacy session's request whose
// MCP-Protocol-Version header names no revision the pool speaks gets 400
// (2025-06-18 and later say so), on POST, GET and DELETE alike, and is not
// served: the DELETE ends nothing. Without the header, or with a revision
// the pool speaks, the session is served.
func TestHTTPSessionVersionHeader(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	c.initialize("c")
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	send := func(method, version string) int {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(list)
		}
		req, err := http.NewRequest(method, c.url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.sid)
		if version != "" {
			req.Header.Set("MCP-Protocol-Version", version)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // a GET that was served is a stream: leave it
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusBadRequest {
			b, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(b), "MCP-Protocol-Version") {
				t.Errorf("%s with %q: 400 without saying why: %s", method, version, b)
			}
		}
		return resp.StatusCode
	}
	for _, tc := range []struct {
		method, version string
		want            int
	}{
		{http.MethodPost, "1900-01-01", 400},
		{http.MethodPost, "not-a-version", 400},
		{http.MethodPost, "2099-01-01", 400},
		{http.MethodGet, "1900-01-01", 400},
		{http.MethodDelete, "1900-01-01", 400},
		{http.MethodPost, "", 200},
		{http.MethodPost, "2025-06-18", 200},
		{http.MethodPost, pool.LatestLegacy, 200},
		{http.MethodGet, pool.LatestLegacy, 200},
	} {
		if got := send(tc.method, tc.version); got != tc.want {
			t.Errorf("%s with MCP-Protocol-Version %q: %d, want %d", tc.method, tc.version, got, tc.want)
		}
	}
}

// TestHTTPRefusals: foreign Origin or Host, unknown session, unknown
// server, modern GET, batches, oversized bodies.
func TestHTTPRefusals(t *testing.T) {
	tp := newTestPoolOpts(t, &pool.Options{MaxMessageBytes: 1 << 10}, fake("srv"))
	base := newHTTPFront(t, tp)
	c := &httpClient{t: t, url: base + "/mcp/srv"}
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, tc := range []struct {
		name   string
		resp   func() *http.Response
		status int
	}{
		{"foreign origin", func() *http.Response { return c.post(ping, "Origin", "https://evil.example") }, 403},
		{"own origin", func() *http.Response {
			u, _ := url.Parse(c.url)
			return c.post(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`, "Origin", "http://"+u.Host)
		}, 200},
		{"another local origin", func() *http.Response {
			// A page served on localhost:3000 is not the pool.
			return c.post(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`, "Origin", "http://localhost:3000")
		}, 403},
		{"rebound host", func() *http.Response {
			req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(ping))
			req.Host = "evil.example"
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}, 403},
		{"unknown session", func() *http.Response { return c.post(ping, "Mcp-Session-Id", "nope") }, 404},
		{"unknown server", func() *http.Response { return (&httpClient{t: t, url: base + "/mcp/other"}).post(ping) }, 404},
		{"no session, not modern", func() *http.Response { return c.post(ping) }, 400},
		{"batch", func() *http.Response { return c.post("[" + ping + "]") }, 400},
		{"parse error", func() *http.Response { return c.post(`{"jsonrpc":`) }, 400},
		{"too large", func() *http.Response { return c.post(`{"x":"` + strings.Repeat("a", 2<<10) + `"}`) }, 413},
		{"modern GET", func() *http.Response {
			r, err := http.Get(c.url)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}, 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.resp()
			defer r.Body.Close()
			b, _ := io.ReadAll(r.Body)
			if r.StatusCode != tc.status {
				t.Fatalf("%s: %s %s, want %d", tc.name, r.Status, b, tc.status)
			}
			if tc.status != 200 && !strings.Contains(string(b), `"error"`) {
				t.Fatalf("%s: no JSON-RPC error body: %s", tc.name, b)
			}
		})
	}
}

// TestHTTPProgressOverSSE: a request with a progress token, from a client
// accepting SSE, gets its progress notifications and then its answer on
// one event stream.
func TestHTTPProgressOverSSE(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	c.initialize("sse")
	resp := c.post(`{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"progress","arguments":{"steps":3,"ms":5},"_meta":{"progressToken":42}}}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want text/event-stream", ct)
	}
	var events []msg
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m msg
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			events = append(events, m)
		}
	}
	if len(events) != 4 || events[3].Method != "" || string(events[3].ID) != `"p"` {
		t.Fatalf("events: %+v", events)
	}
	for _, e := range events[:3] {
		if e.Method != "notifications/progress" || !strings.Contains(string(e.Params), `"progressToken":42`) {
			t.Fatalf("progress event %s", e.Params)
		}
	}
}

// TestHTTPModernStatelessAndCancel: a 2026-07-28 client needs no session;
// closing its response mid-call cancels the call at the child.
func TestHTTPModernStatelessAndCancel(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "both", "-log", logPath))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	resp := c.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` + modernMeta + `}}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") != "" || !strings.Contains(string(b), `"hi"`) {
		t.Fatalf("modern call: %s, session id %q, %s", resp.Status, resp.Header.Get("Mcp-Session-Id"), b)
	}
	// The request was an exchange on the server's one stateless session,
	// which stays for the next.
	sessions := tp.Snapshot().Sessions
	if len(sessions) != 1 || !sessions[0].Stateless || sessions[0].Transport != "http" || sessions[0].ProtocolVersion != pool.Modern {
		t.Fatalf("sessions after a stateless call: %+v", sessions)
	}
	stateless := sessions[0].ID

	ctx, cancel := context.WithCancel(context.Background())
	sleep := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000},` + modernMeta + `}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(sleep))
	req.Header.Set("Content-Type", "application/json")
	mirrorModernHeaders(req.Header, sleep)
	done := make(chan error, 1)
	go func() {
		r, err := http.DefaultClient.Do(req)
		if err == nil {
			r.Body.Close()
		}
		done <- err
	}()
	eventually(t, "the call to reach the child", func() bool {
		in := tp.Snapshot().InFlight
		return len(in) == 1 && in[0].WrittenToChild
	})
	cancel()
	<-done
	eventually(t, "notifications/cancelled at the child", func() bool {
		return countMethod(childLog(t, logPath), "notifications/cancelled") == 1
	})
	if n := len(tp.Snapshot().InFlight); n != 0 {
		t.Fatalf("%d still in flight", n)
	}
	if sessions := tp.Snapshot().Sessions; len(sessions) != 1 || sessions[0].ID != stateless {
		t.Fatalf("sessions after a second stateless call: %+v, want %s alone", sessions, stateless)
	}
}

// TestHTTPGetStreamAndDelete: a legacy session's GET stream carries a
// list_changed; DELETE ends the session.
func TestHTTPGetStreamAndDelete(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	c.initialize("listener")
	req, _ := http.NewRequest(http.MethodGet, c.url, nil)
	req.Header.Set("Mcp-Session-Id", c.sid)
	req.Header.Set("Accept", "text/event-stream")
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != 200 {
		t.Fatalf("GET: %s", stream.Status)
	}
	c.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"}}}`)
	sc := bufio.NewScanner(stream.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "notifications/tools/list_changed") {
			break
		}
	}
	if sc.Err() != nil {
		t.Fatal(sc.Err())
	}
	c.deleteSession()
	eventually(t, "the session to end", func() bool { return len(tp.Snapshot().Sessions) == 0 })
	r := c.post(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	r.Body.Close()
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("after DELETE: %s, want 404", r.Status)
	}
}

// BenchmarkHTTPRoundTrip is BenchmarkRoundTrip's pool case through the
// HTTP front door: one legacy session, one call at a time.
func BenchmarkHTTPRoundTrip(b *testing.B) {
	tp := newTestPoolTB(b, fake("srv"))
	c := &httpClient{t: b, url: newHTTPFront(b, tp) + "/mcp/srv"}
	c.initialize("bench")
	b.ResetTimer()
	for i := range b.N {
		r := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, i+2))
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
}

// BenchmarkHTTPStatelessRoundTrip is BenchmarkHTTPRoundTrip for a
// 2026-07-28 client: each call an exchange on the server's stateless
// session.
func BenchmarkHTTPStatelessRoundTrip(b *testing.B) {
	tp := newTestPoolTB(b, fake("srv"))
	c := &httpClient{t: b, url: newHTTPFront(b, tp) + "/mcp/srv"}
	b.ResetTimer()
	for i := range b.N {
		r := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},%s}}`, i+2, modernMeta))
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
}

// A large call over HTTP, with its length declared and without it
// (chunked), reaches the child whole and comes back whole: the body is
// read past the small-body fast path.
func TestHTTPLargeCall(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	c.initialize("large")
	text := strings.Repeat(`line of text, "quoted"\n`, 1<<20/23)
	for _, chunked := range []bool{false, true} {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, text)
		var r io.Reader = strings.NewReader(body)
		if chunked {
			r = io.MultiReader(r) // no length the client can see: sent chunked
		}
		req, err := http.NewRequest(http.MethodPost, c.url, r)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if wantLen := int64(len(body)); chunked == (req.ContentLength == wantLen) {
			t.Fatalf("chunked %v: the request's length was %d", chunked, req.ContentLength)
		}
		var m msg
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &m) != nil || m.text() != text {
			t.Fatalf("chunked %v: %s, %d bytes back, text intact: %v", chunked, resp.Status, len(b), m.text() == text)
		}
	}
}

// TestHTTPStalledStreamIsLetGo: a legacy session's GET stream whose client
// stops reading is let go once a write waits past the stream's write
// timeout, so the session can expire, and its goroutine and connection
// are freed. On the first edition the stream's write blocked for ever,
// and a session with a stream never expires.
func TestHTTPStalledStreamIsLetGo(t *testing.T) {
	t.Cleanup(pool.SetStreamWriteTimeout(200 * time.Millisecond)) // runs last: after the pool closed
	tp := newTestPool(t, nil, fake("srv"))
	handler := tp.HTTPHandler()
	front := newHTTPFrontOf(t, handler)
	c := &httpClient{t: t, url: front + "/mcp/srv"}
	c.initialize("c")
	if m := c.call(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`); m.Error != nil {
		t.Fatalf("setLevel: %s", m.raw)
	}
	req, err := http.NewRequest(http.MethodGet, c.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.sid)
	stream, err := (&http.Client{}).Do(req) // its own connection, never read
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.Body.Close() })
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET: %s", stream.Status)
	}
	// Far more than a loopback connection buffers.
	big := strings.Repeat("x", 1<<20)
	for i := range 24 {
		if m := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"log","arguments":{"level":"info","data":%q}}}`, 10+i, big)); m.Error != nil {
			t.Fatalf("log: %s", m.raw)
		}
	}
	eventually(t, "the stalled stream let go and its session expired", func() bool {
		pool.ExpireHTTPIdle(handler, time.Now().Add(pool.HTTPSessionIdle+time.Second))
		return len(tp.Snapshot().Sessions) == 0
	})
}
