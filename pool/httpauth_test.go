//go:build unix

package pool_test

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

const testToken = "0123456789abcdef"

func tokenPool(t *testing.T, opts *pool.Options) (*testPool, *httpClient) {
	t.Helper()
	if opts == nil {
		opts = &pool.Options{}
	}
	opts.HTTPToken = func() string { return testToken }
	tp := newTestPool(t, opts, fake("srv"))
	return tp, &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
}

// A local web page or another local user's process must not run a tool:
// on the first edition a token-less POST, a text/plain POST (a "simple"
// request a page sends with no preflight) and any localhost origin were
// all served. The side-effect file the tool would write stays absent.
func TestHTTPStrangersCannotRunTools(t *testing.T) {
	_, c := tokenPool(t, nil)
	effect := filepath.Join(t.TempDir(), "effect")
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","arguments":{"file":%q},`+modernMeta+`}}`, effect)
	auth := "Bearer " + testToken
	u, _ := url.Parse(c.url)
	for _, tc := range []struct {
		name   string
		header []string
		status int
	}{
		{"no token", nil, 401},
		{"wrong token", []string{"Authorization", "Bearer nope"}, 401},
		{"page on localhost:3000", []string{"Authorization", auth, "Origin", "http://localhost:3000"}, 403},
		{"page on the same port, other name", []string{"Authorization", auth, "Origin", "http://localhost:1"}, 403},
		{"text/plain with the token", []string{"Authorization", auth, "Content-Type", "text/plain"}, 415},
		{"text/plain from a page", []string{"Content-Type", "text/plain", "Origin", "http://localhost:3000"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.post(call, tc.header...)
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode != tc.status || !strings.Contains(string(b), `"error"`) {
				t.Fatalf("%s %s, want %d", r.Status, b, tc.status)
			}
			if _, err := os.Stat(effect); err == nil {
				t.Fatal("the tool ran")
			}
		})
	}
	// The user's own client, with the token and the listener's origin.
	r := c.post(call, "Authorization", auth, "Origin", "http://"+u.Host)
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("with the token: %s %s", r.Status, b)
	}
	if _, err := os.Stat(effect); err != nil {
		t.Fatal("the tool did not run for the token holder")
	}
}

// The Bearer scheme's name is case-insensitive (RFC 9110 §11.1, RFC
// 6750): a client sending "bearer TOKEN" is let in. On the first edition
// it got 401. The token itself is compared exactly.
func TestHTTPBearerSchemeAnyCase(t *testing.T) {
	_, c := tokenPool(t, nil)
	ping := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + modernMeta + `}}`
	for _, tc := range []struct {
		auth   string
		status int
	}{
		{"Bearer " + testToken, 200},
		{"bearer " + testToken, 200},
		{"BEARER " + testToken, 200},
		{"bEaReR  " + testToken, 200},
		{"bearer " + strings.ToUpper(testToken), 401},
		{"Basic " + testToken, 401},
		{"Bearer" + testToken, 401},
		{"bearer", 401},
	} {
		t.Run(tc.auth, func(t *testing.T) {
			r := c.post(ping, "Authorization", tc.auth)
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode != tc.status {
				t.Fatalf("%s %s, want %d", r.Status, b, tc.status)
			}
		})
	}
}

// An origin the user listed in http.allowedOrigins is let in with the
// token, wherever it is served from (the first edition refused every
// non-loopback origin before reading the list); an origin nobody listed
// is refused even with the token, and a listed one still needs it.
func TestHTTPListedOriginsAreAllowed(t *testing.T) {
	_, c := tokenPool(t, &pool.Options{HTTPAllowedOrigins: []string{"https://inspector.example.com", "http://localhost:5173/"}})
	ping := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + modernMeta + `}}`
	auth := "Bearer " + testToken
	for _, tc := range []struct {
		name   string
		header []string
		status int
	}{
		{"listed, elsewhere", []string{"Authorization", auth, "Origin", "https://inspector.example.com"}, 200},
		{"listed, local, with a slash in the list", []string{"Authorization", auth, "Origin", "http://localhost:5173"}, 200},
		{"listed, no token", []string{"Origin", "https://inspector.example.com"}, 401},
		{"not listed, elsewhere", []string{"Authorization", auth, "Origin", "https://evil.example.com"}, 403},
		{"not listed, local", []string{"Authorization", auth, "Origin", "http://localhost:3000"}, 403},
		{"listed origin's look-alike", []string{"Authorization", auth, "Origin", "https://inspector.example.com.evil.example"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.post(ping, tc.header...)
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode != tc.status {
				t.Fatalf("%s %s, want %d", r.Status, b, tc.status)
			}
		})
	}
}

// An unauthenticated caller learns nothing of the configured servers.
func TestHTTPUnauthenticatedLearnsNoNames(t *testing.T) {
	_, c := tokenPool(t, nil)
	other := &httpClient{t: t, url: strings.TrimSuffix(c.url, "/srv") + "/nope"}
	r := other.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 401 || strings.Contains(string(b), "srv") {
		t.Fatalf("%s %s", r.Status, b)
	}
}

// Legacy HTTP sessions are capped per server: past the cap the session
// whose client has been quiet longest is evicted; a flood of initializes
// cannot grow the pool without end.
func TestHTTPSessionCap(t *testing.T) {
	defer pool.SetHTTPEvictQuiet(0)() // the flood's sessions, just opened, may be evicted
	tp, c := tokenPool(t, &pool.Options{MaxHTTPSessions: 3})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`
	var sids []string
	for range 10 {
		r := c.post(init, "Authorization", "Bearer "+testToken)
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode != 200 {
			t.Fatalf("initialize: %s", r.Status)
		}
		sids = append(sids, r.Header.Get("Mcp-Session-Id"))
	}
	eventually(t, "the sessions over the cap to end", func() bool { return len(tp.Snapshot().Sessions) == 3 })
	// The newest three live; the oldest were expired.
	for i, sid := range sids {
		r := c.post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`, "Authorization", "Bearer "+testToken, "Mcp-Session-Id", sid)
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if want := map[bool]int{true: 200, false: 404}[i >= 7]; r.StatusCode != want {
			t.Errorf("session %d: %s, want %d", i, r.Status, want)
		}
	}
}
