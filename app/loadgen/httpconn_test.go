package loadgen

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestConnPoolReplies: the load tool's client reads each kind of reply
// whole, keeps a connection for the next request unless the server
// closes it, and sends what the request carries.
func TestConnPoolReplies(t *testing.T) {
	var dialed atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Mcp-Session-Id", r.Header.Get("X-Echo"))
		switch r.URL.Path {
		case "/chunked": // flushed in parts: no Content-Length
			for _, part := range []string{"one ", "two ", string(body)} {
				_, _ = io.WriteString(w, part)
				w.(http.Flusher).Flush()
			}
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = w.Write(body)
		case "/accepted":
			w.WriteHeader(http.StatusAccepted)
		default:
			_, _ = fmt.Fprintf(w, "%s %s %s", r.Method, r.Host, body)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	var p connPool
	defer p.closeAll()
	for _, tc := range []struct {
		path, method, body string
		status             int
		want               string
		dialed             int32 // connections opened so far
	}{
		{"/plain", http.MethodPost, "hello", 200, "POST " + srv.Listener.Addr().String() + " hello", 1},
		{"/plain", http.MethodDelete, "", 200, "DELETE " + srv.Listener.Addr().String() + " ", 1},
		{"/chunked", http.MethodPost, "three", 200, "one two three", 1},
		{"/accepted", http.MethodPost, "x", 202, "", 1},
		{"/close", http.MethodPost, "last", 200, "last", 1},
		{"/plain", http.MethodPost, "again", 200, "POST " + srv.Listener.Addr().String() + " again", 2},
	} {
		tgt, err := parseTarget(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.do(tgt, tc.method, []header{{"X-Echo", tc.path}}, []byte(tc.body))
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		if r.status != tc.status || string(r.body) != tc.want || r.header.Get("Mcp-Session-Id") != tc.path {
			t.Errorf("%s %s: %d %q (header %q), want %d %q", tc.method, tc.path, r.status, r.body, r.header.Get("Mcp-Session-Id"), tc.status, tc.want)
		}
		if n := dialed.Load(); n != tc.dialed {
			t.Errorf("%s %s: %d connections opened, want %d", tc.method, tc.path, n, tc.dialed)
		}
	}
}

// TestConnPoolCloseAllEndsWaitingRequests: a request whose answer never
// comes ends when its session ends, and the session sends nothing after.
func TestConnPoolCloseAllEndsWaitingRequests(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(arrived)
		<-release
	}))
	defer srv.Close()
	defer close(release)
	tgt, err := parseTarget(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var p connPool
	done := make(chan error, 1)
	go func() {
		_, err := p.do(tgt, http.MethodPost, nil, []byte("wait"))
		done <- err
	}()
	<-arrived
	p.closeAll()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the waiting request got an answer")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting request did not end with its session")
	}
	if _, err := p.do(tgt, http.MethodPost, nil, nil); !errors.Is(err, errSessionEnded) {
		t.Fatalf("a request after the end: %v, want errSessionEnded", err)
	}
}

// TestParseTarget: what the client dials, and what it refuses.
func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want target
		bad  bool
	}{
		{url: "http://127.0.0.1:8080/mcp", want: target{addr: "127.0.0.1:8080", host: "127.0.0.1:8080", path: "/mcp"}},
		{url: "http://localhost/mcp?x=1", want: target{addr: "localhost:80", host: "localhost", path: "/mcp?x=1"}},
		{url: "http://[::1]:9/", want: target{addr: "[::1]:9", host: "[::1]:9", path: "/"}},
		{url: "https://127.0.0.1/mcp", bad: true},
		{url: "127.0.0.1:8080", bad: true},
		{url: "http://%zz", bad: true},
	} {
		got, err := parseTarget(tc.url)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("parseTarget(%q) = %+v, %v", tc.url, got, err)
		}
	}
}
