//go:build unix

package pool_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// appLikeFront serves tp's front door as the app does: a header timeout
// and an idle timeout, no read timeout (it would end long streams).
func appLikeFront(t *testing.T, tp *testPool) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(tp.HTTPHandler())
	srv.Config.ReadHeaderTimeout = time.Second
	srv.Config.IdleTimeout = 2 * time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return strings.TrimPrefix(srv.URL, "http://")
}

// A caller without the token that declares a body, sends one byte of it
// and stalls must not hold a connection: on the first edition net/http
// waited, with no deadline, to discard the body before sending the 401,
// so the answer never came and the goroutine, its buffers and the
// descriptor stayed as long as the caller liked. The refusal is sent at
// once and the connection closed, whatever the rest of the body does. A
// listed origin's preflight that declares a body is answered the same way.
func TestHTTPStrangerCannotHoldAConnection(t *testing.T) {
	tp := newTestPool(t, &pool.Options{
		HTTPToken:          func() string { return testToken },
		HTTPAllowedOrigins: []string{"http://localhost:5173"},
	}, fake("srv"))
	host := appLikeFront(t, tp)
	t.Run("stalled", func(t *testing.T) {
		for _, tc := range []struct {
			name, head string
			status     int
		}{
			{"no token", "POST /mcp/srv HTTP/1.1\r\nContent-Type: application/json\r\n", 401},
			{"wrong origin", "POST /mcp/srv HTTP/1.1\r\nContent-Type: application/json\r\nOrigin: http://localhost:3000\r\nAuthorization: Bearer " + testToken + "\r\n", 403},
			{"not a loopback Host", "POST /mcp/srv HTTP/1.1\r\n", 403},
			{"listed origin's preflight", "OPTIONS /mcp/srv HTTP/1.1\r\nOrigin: http://localhost:5173\r\nAccess-Control-Request-Method: POST\r\n", 204},
		} {
			for _, hdr := range []string{"Content-Length: 100000\r\n", "Transfer-Encoding: chunked\r\n"} {
				t.Run(tc.name+", "+strings.TrimSpace(hdr), func(t *testing.T) {
					t.Parallel()
					h := host
					if tc.name == "not a loopback Host" {
						h = "evil.example"
					}
					resp, closed := stalledRequest(t, host, h, tc.head, hdr)
					if resp.StatusCode != tc.status {
						t.Fatalf("%s, want %d", resp.Status, tc.status)
					}
					if !resp.Close || !closed {
						t.Fatalf("Connection: close %v, closed %v: the front door keeps the stalled body's connection", resp.Close, closed)
					}
				})
			}
		}
	})
	if n := len(tp.Snapshot().Sessions); n != 0 {
		t.Fatalf("%d sessions", n)
	}
}

// A client without the token that sends its whole body, as most do before
// they read the answer, gets the 401 and then the connection's clean end:
// closing on the unread body would reset the connection, and a client
// still writing could lose the answer.
func TestHTTPRefusalLetsTheBodyIn(t *testing.T) {
	tp, _ := tokenPool(t, nil)
	host := appLikeFront(t, tp)
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const size = 200 << 10 // under net/http's 256 KB
	req := fmt.Appendf(nil, "POST /mcp/srv HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", host, size)
	go func() { _, _ = conn.Write(append(req, bytes.Repeat([]byte(" "), size)...)) }() // head and body together
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("%s, want 401", resp.Status)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the 401: %v, want the connection's clean end", err)
	}
}

// stalledRequest sends, on a connection to addr, a request's head naming
// host and the first byte of a body that declares more (hdr: its
// Content-Length or chunked coding), then stalls; it returns the answer
// the front door gives within 5 s, and whether it then closed the
// connection.
func stalledRequest(t *testing.T, addr, host, head, hdr string) (*http.Response, bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%sHost: %s\r\n%s\r\n", head, host, hdr)
	if strings.HasPrefix(hdr, "Transfer-Encoding") {
		fmt.Fprint(conn, "1\r\n{\r\n")
	} else {
		fmt.Fprint(conn, "{")
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within 5 s: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var ne net.Error
	_, err = br.ReadByte()
	return resp, err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// A token holder's request body has a deadline too: a client that sends
// one byte of the body it declared and stalls gets an error once the
// deadline passes, and its connection is closed, instead of holding a
// handler for ever.
func TestHTTPSlowBodyOfTokenHolderEnds(t *testing.T) {
	t.Cleanup(pool.SetHTTPBodyTimeout(300 * time.Millisecond))
	tp, _ := tokenPool(t, nil)
	host := appLikeFront(t, tp)
	for _, hdr := range []string{"Content-Length: 100000\r\n", "Transfer-Encoding: chunked\r\n"} {
		t.Run(strings.TrimSpace(hdr), func(t *testing.T) {
			head := "POST /mcp/srv HTTP/1.1\r\nContent-Type: application/json\r\nAuthorization: Bearer " + testToken + "\r\n"
			resp, closed := stalledRequest(t, host, host, head, hdr)
			if resp.StatusCode != http.StatusBadRequest || !closed {
				t.Fatalf("%s, closed %v; want 400 and the connection closed", resp.Status, closed)
			}
		})
	}
}

// The body deadline bounds the body only: a POST's SSE stream and a GET
// stream that outlive it are not cut (net/http watches the connection for
// the client's going once the body is read, and a deadline left there
// would end the request).
func TestHTTPBodyDeadlineSparesStreams(t *testing.T) {
	t.Cleanup(pool.SetHTTPBodyTimeout(100 * time.Millisecond))
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	c.initialize("c")
	st := openedGetStream(t, c.url, c.sid)
	// Its progress comes at once, its answer after the deadline.
	resp := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":4,"ms":150},"_meta":{"progressToken":"p"}}}`)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(string(b), `"done"`) {
		t.Fatalf("the call's stream: %s %q, %v", resp.Header.Get("Content-Type"), b, err)
	}
	// The GET stream, open since before, still carries the session's news.
	m := c.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"}}}`)
	if m.Error != nil {
		t.Fatalf("notify: %s", m.raw)
	}
	if _, n := st.event(); n.Method != "notifications/tools/list_changed" {
		t.Fatalf("GET stream: %s, want list_changed", n.raw)
	}
}

// A browser page on an origin the user listed can use the front door: its
// preflight is answered with what the page may send and read, for that
// origin only; the preflight itself opens nothing and says nothing of the
// servers, and the page's real requests still need the token.
func TestHTTPListedOriginCORS(t *testing.T) {
	const listed = "http://localhost:5173"
	tp, c := tokenPool(t, &pool.Options{HTTPAllowedOrigins: []string{listed + "/"}})
	preflight := func(path, origin, host string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodOptions, strings.TrimSuffix(c.url, "/mcp/srv")+path, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,mcp-protocol-version,mcp-method,mcp-name,mcp-param-region")
		req.Header.Set("Access-Control-Request-Private-Network", "true")
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}

	resp, body := preflight("/mcp/srv", listed, "")
	if resp.StatusCode != http.StatusNoContent || body != "" {
		t.Fatalf("listed origin's preflight: %s %q, want 204 and no body", resp.Status, body)
	}
	h := resp.Header
	if got := h.Get("Access-Control-Allow-Origin"); got != listed {
		t.Errorf("Allow-Origin %q, want %q", got, listed)
	}
	if !strings.Contains(h.Get("Vary"), "Origin") {
		t.Errorf("Vary %q, want Origin", h.Get("Vary"))
	}
	for name, want := range map[string][]string{
		"Access-Control-Allow-Methods": {"GET", "POST", "DELETE"},
		"Access-Control-Allow-Headers": {"Authorization", "Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version",
			"Last-Event-Id", "Mcp-Method", "Mcp-Name", "Mcp-Param-Region"},
	} {
		got := strings.Split(h.Get(name), ", ")
		for _, w := range want {
			if !containsFold(got, w) {
				t.Errorf("%s %q lacks %s", name, h.Get(name), w)
			}
		}
	}
	if h.Get("Access-Control-Allow-Private-Network") != "true" {
		t.Errorf("Allow-Private-Network %q: a listed page served elsewhere cannot reach loopback", h.Get("Access-Control-Allow-Private-Network"))
	}
	if h.Get("Access-Control-Max-Age") == "" || h.Get("Mcp-Session-Id") != "" || h.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("preflight headers %v", h)
	}
	// A preflight for a server that does not exist looks the same.
	if r, _ := preflight("/mcp/nope", listed, ""); r.StatusCode != http.StatusNoContent {
		t.Errorf("preflight for an unknown server: %s", r.Status)
	}
	if n := len(tp.Snapshot().Sessions); n != 0 {
		t.Fatalf("%d sessions after preflights", n)
	}

	// Nothing for an origin nobody listed, nor for a listed one at a
	// rebinding Host: the Host check comes first.
	for _, tc := range []struct{ origin, host string }{
		{"http://localhost:3000", ""},
		{"https://evil.example", ""},
		{listed, "rebound.example:80"},
	} {
		r, b := preflight("/mcp/srv", tc.origin, tc.host)
		if r.StatusCode != http.StatusForbidden || r.Header.Get("Access-Control-Allow-Origin") != "" ||
			r.Header.Get("Access-Control-Allow-Headers") != "" || strings.Contains(b, "srv") {
			t.Errorf("preflight from %s at Host %q: %s %v %s, want a bare 403", tc.origin, tc.host, r.Status, r.Header, b)
		}
	}

	// The real request: without the token, still 401 (readable by the
	// page); with it, served, and the page may read the session id.
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`
	r := c.post(init, "Origin", listed)
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized || r.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("listed origin without the token: %s", r.Status)
	}
	if got := r.Header.Get("Access-Control-Allow-Origin"); got != listed {
		t.Errorf("401 to a listed origin: Allow-Origin %q", got)
	}
	r = c.post(init, "Origin", listed, "Authorization", "Bearer "+testToken)
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK || r.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("listed origin with the token: %s", r.Status)
	}
	if got := r.Header.Get("Access-Control-Allow-Origin"); got != listed {
		t.Errorf("Allow-Origin %q, want %q", got, listed)
	}
	if !containsFold(strings.Split(r.Header.Get("Access-Control-Expose-Headers"), ", "), "Mcp-Session-Id") {
		t.Errorf("Expose-Headers %q lacks Mcp-Session-Id", r.Header.Get("Access-Control-Expose-Headers"))
	}
	// An OPTIONS that is not a preflight gets no pass either.
	req, _ := http.NewRequest(http.MethodOptions, c.url, nil)
	req.Header.Set("Origin", listed)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("OPTIONS without Access-Control-Request-Method: %v %v, want 401", r.Status, err)
	} else {
		r.Body.Close()
	}
	// The listener's own origin needs no CORS and gets none.
	r = c.post(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`,
		"Origin", "http://"+strings.TrimPrefix(strings.TrimSuffix(c.url, "/mcp/srv"), "http://"), "Authorization", "Bearer "+testToken)
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("own origin: %s, Allow-Origin %q", r.Status, r.Header.Get("Access-Control-Allow-Origin"))
	}
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(strings.TrimSpace(e), s) {
			return true
		}
	}
	return false
}

// TestHTTPGatePassedTellsTheConnection: the gate tells a request's
// connection (WithHTTPGatePassed) when the request passes it, and only
// then: not for a refusal, nor for a listed origin's preflight, which
// needs no token. The app's server closes the other connections first
// when it needs room.
func TestHTTPGatePassedTellsTheConnection(t *testing.T) {
	tp := newTestPool(t, &pool.Options{
		HTTPToken:          func() string { return testToken },
		HTTPAllowedOrigins: []string{"http://localhost:5173"},
	}, fake("srv"))
	var mu sync.Mutex
	passed := map[string]int{} // by the client's address
	srv := httptest.NewUnstartedServer(tp.HTTPHandler())
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		addr := c.RemoteAddr().String()
		return pool.WithHTTPGatePassed(ctx, func() {
			mu.Lock()
			passed[addr]++
			mu.Unlock()
		})
	}
	srv.Start()
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name, head string
		want       int
	}{
		{"no token", "GET /mcp/srv HTTP/1.1\r\n", 0},
		{"a page's Origin", "GET /mcp/srv HTTP/1.1\r\nOrigin: http://localhost:3000\r\nAuthorization: Bearer " + testToken + "\r\n", 0},
		{"a listed origin's preflight", "OPTIONS /mcp/srv HTTP/1.1\r\nOrigin: http://localhost:5173\r\nAccess-Control-Request-Method: POST\r\n", 0},
		{"the token", "GET /mcp/srv HTTP/1.1\r\nAuthorization: Bearer " + testToken + "\r\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "%sHost: %s\r\n\r\n", tc.head, host)
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			mu.Lock()
			got := passed[conn.LocalAddr().String()]
			mu.Unlock()
			if got != tc.want {
				t.Fatalf("%s: the connection was told %d times that a request passed, want %d", resp.Status, got, tc.want)
			}
		})
	}
}
