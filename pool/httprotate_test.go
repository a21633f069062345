package pool_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// streamLines sends a request and reads its response, an event stream,
// line by line until it ends: the channel closes then. It fails the test
// unless the answer is 200.
func streamLines(t *testing.T, method, url, body string, header ...string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method == http.MethodPost {
		mirrorModernHeaders(req.Header, body)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("%s %s: %s %s", method, body, resp.Status, b)
	}
	lines := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return lines
}

// untilEnd reads lines until the stream ends, within 15 s, and returns
// what it read.
func untilEnd(t *testing.T, what string, lines <-chan string) string {
	t.Helper()
	var got strings.Builder
	deadline := time.After(15 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return got.String()
			}
			got.WriteString(l + "\n")
		case <-deadline:
			t.Fatalf("%s did not end; it read %q", what, got.String())
		}
	}
}

// untilLine reads lines until one contains want, within 15 s.
func untilLine(t *testing.T, what string, lines <-chan string, want string) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s ended before %q", what, want)
			}
			if strings.Contains(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no %q within 15s", what, want)
		}
	}
}

// TestHTTPRotationEndsOldTokenStreams: rotating the token cuts off
// every client let in with the old one, at once. Client A (old token)
// asked for debug logs and holds its GET stream open, and a 2026-07-28
// client (old token) listens for tool changes; after the rotation, B
// (new token) calls a tool that logs a secret. A's stream and the
// listen end, A gets nothing of B's, and A's session is gone (it no
// longer holds a share of the child or answers its questions). On the
// first edition the token was checked only as each request arrived: A's
// stream went on and carried B's secret, and so did the listen.
func TestHTTPRotationEndsOldTokenStreams(t *testing.T) {
	var token atomic.Pointer[string]
	old, fresh := "old-token", "new-token"
	token.Store(&old)
	tp := newTestPool(t, &pool.Options{HTTPToken: func() string { return *token.Load() }},
		fake("srv"), fake("mod", "-era", "modern"))
	base := newHTTPFront(t, tp)
	oldAuth := []string{"Authorization", "Bearer " + old}
	newAuth := []string{"Authorization", "Bearer " + fresh}

	a := &httpClient{t: t, url: base + "/mcp/srv"}
	initWith(a, "a", oldAuth)
	a.callWith(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`, oldAuth)
	aStream := streamLines(t, http.MethodGet, a.url, "", append([]string{"Mcp-Session-Id", a.sid}, oldAuth...)...)
	listen := streamLines(t, http.MethodPost, base+"/mcp/mod",
		`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+modernMeta+`}}`, oldAuth...)
	untilLine(t, "the listen", listen, "notifications/subscriptions/acknowledged")
	eventually(t, "A's GET stream open", func() bool { return len(tp.Snapshot().Sessions) == 2 })

	token.Store(&fresh)
	tp.HTTPTokenRotated()

	b := &httpClient{t: t, url: base + "/mcp/srv"}
	initWith(b, "b", newAuth)
	b.callWith(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"log","arguments":{"level":"info","data":"victim secret"}}}`, newAuth)

	if got := untilEnd(t, "A's GET stream", aStream); strings.Contains(got, "victim secret") {
		t.Fatalf("A's stream, opened with the old token, carried B's log: %q", got)
	}
	untilEnd(t, "the old token's listen", listen)
	eventually(t, "A's session to end", func() bool {
		for _, s := range tp.Snapshot().Sessions {
			if s.ClientName == "a" {
				return false
			}
		}
		return true
	})
	r := a.post(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, oldAuth...)
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("A's request with the old token: %s, want 401", r.Status)
	}
}

// initWith initializes c as client name, with header on each request.
func initWith(c *httpClient, name string, header []string) {
	c.t.Helper()
	resp := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"`+name+`","version":"1"}}}`, header...)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		c.t.Fatalf("initialize: %s", resp.Status)
	}
	c.sid = resp.Header.Get("Mcp-Session-Id")
	r := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, header...)
	r.Body.Close()
}

// callWith posts a request with header and fails the test unless it is
// answered 200.
func (c *httpClient) callWith(body string, header []string) {
	c.t.Helper()
	resp := c.post(body, header...)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("POST %s: %s %s", body, resp.Status, b)
	}
}
