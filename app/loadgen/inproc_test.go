package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestInProcessHTTPBothEras: the HTTP baseline answers a legacy client
// (initialize, Mcp-Session-Id) and a stateless 2026-07-28 client
// (_meta and mirrored headers on every POST), each request with its own
// token back; a client without the bearer token gets nothing.
func TestInProcessHTTPBothEras(t *testing.T) {
	srv, err := StartInProcessHTTP("secret")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	servesBothEras(t, srv.URL)
}

// servesBothEras runs a legacy and a stateless 2026-07-28 client against
// url, which wants the bearer token "secret": each is answered, every
// request with its own token back, nothing misrouted or hung; a client
// with another token does not complete its handshake.
func servesBothEras(t *testing.T, url string) {
	t.Helper()
	cfg := Config{Sessions: 4, InFlight: 3, Warmup: 20 * time.Millisecond, Duration: 200 * time.Millisecond}
	for _, tc := range []struct {
		name string
		open func(url, token string) Opener
	}{
		{"legacy", HTTPOpener},
		{"stateless", HTTPStatelessOpener},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(context.Background(), cfg, tc.open(url, "secret"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests == 0 || res.Misrouted != 0 || res.Hung != 0 || res.Errors != 0 {
				t.Fatalf("result: %+v", res)
			}
			if _, err := Run(context.Background(), cfg, tc.open(url, "wrong")); err == nil {
				t.Fatal("a client with the wrong token completed its handshake")
			}
		})
	}
}

// TestHTTPHandshakeWithoutAServerFails: a handshake whose POST gets no
// answer, because no server listens or because the run is interrupted,
// ends the run with an error. (The load tool, sent SIGTERM during its
// HTTP comparison, stopped its pool and then waited for an initialize
// answer for ever.)
func TestHTTPHandshakeWithoutAServerFails(t *testing.T) {
	srv, err := StartInProcessHTTP("")
	if err != nil {
		t.Fatal(err)
	}
	url := srv.URL
	srv.Close() // nothing listens there any more
	cfg := Config{Sessions: 2, InFlight: 1, Duration: 50 * time.Millisecond}
	interrupted, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		open func(url, token string) Opener
	}{
		{"legacy", HTTPOpener},
		{"stateless", HTTPStatelessOpener},
	} {
		for _, how := range []struct {
			name string
			ctx  context.Context
		}{{"no server", context.Background()}, {"interrupted", interrupted}} {
			ctx := how.ctx
			t.Run(tc.name+", "+how.name, func(t *testing.T) {
				done := make(chan error, 1)
				go func() {
					_, err := Run(ctx, cfg, tc.open(url, ""))
					done <- err
				}()
				select {
				case err := <-done:
					if err == nil {
						t.Fatal("a run without a server succeeded")
					}
				case <-time.After(30 * time.Second):
					t.Fatal("the handshake still waits after 30 s")
				}
			})
		}
	}
}

// TestWithMeta: the stateless client's _meta goes first in params,
// whatever params hold.
func TestWithMeta(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"id":1,"params":{"name":"echo"}}`, `{"id":1,"params":{` + statelessMeta + `,"name":"echo"}}`},
		{`{"id":1,"params":{}}`, `{"id":1,"params":{` + statelessMeta + `}}`},
	} {
		got, ok := withMeta([]byte(tc.in))
		if !ok || string(got) != tc.want {
			t.Errorf("withMeta(%s) = %s, %v; want %s", tc.in, got, ok, tc.want)
		}
	}
	if _, ok := withMeta([]byte(`{"id":1,"method":"ping"}`)); ok {
		t.Error("withMeta found params in a request without them")
	}
}

// TestHTTPRequestsThatFailAreErrorsNotHangs: a POST whose connection the
// server breaks, or that the server answers with an HTTP error and no
// JSON-RPC answer (a session the server no longer knows), is an error the
// client knows of, counted as such; only a request nobody answers hangs.
func TestHTTPRequestsThatFailAreErrorsNotHangs(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		switch {
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
			return
		case m.ID == nil:
			w.WriteHeader(http.StatusAccepted)
			return
		}
		switch calls.Add(1) {
		case 1: // the connection breaks: the server went away
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		case 2: // a session the server no longer knows
			http.Error(w, "unknown session", http.StatusNotFound)
		default: // answered, as the client asked
			var p struct {
				Params struct {
					Arguments struct {
						Text string `json:"text"`
					} `json:"arguments"`
				} `json:"params"`
			}
			_ = json.Unmarshal(body, &p)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%q}]}}`, m.ID, p.Params.Arguments.Text)
		}
	}))
	defer srv.Close()
	res, err := Run(context.Background(), Config{Sessions: 1, InFlight: 1, Duration: 100 * time.Millisecond, HangAfter: time.Second}, HTTPOpener(srv.URL, ""))
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 2 || res.Hung != 0 || res.Misrouted != 0 || res.Requests == 0 {
		t.Fatalf("want 2 errors, none hung or misrouted, the rest answered: %+v", res)
	}
}
