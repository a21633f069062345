package app

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// failingListener fails its first fails accepts with errno, as the
// listener of a process or system out of buffers or memory does.
type failingListener struct {
	net.Listener
	errno syscall.Errno
	mu    sync.Mutex
	fails int
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.fails > 0
	if fail {
		l.fails--
	}
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", l.errno)}
	}
	return l.Listener.Accept()
}

// TestServeHTTPOutOfBuffersRetries: the HTTP front door and the control
// API go on serving after their listener fails for want of buffers or
// memory, which net/http alone would take for the listener's end (and
// Run for the pool's).
func TestServeHTTPOutOfBuffersRetries(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOBUFS, syscall.ENOMEM} {
		t.Run(errno.Error(), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() }) // a request still waiting ends
			fl := &failingListener{Listener: ln, errno: errno, fails: 3}
			var logged syncBuffer
			srv := &http.Server{
				Handler:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "served") }),
				ErrorLog: serverLog(slog.New(slog.NewTextHandler(&logged, nil)), "HTTP front door"),
			}
			served := make(chan error, 1)
			go func() { served <- serveHTTP(srv, fl, "HTTP front door") }()

			type reply struct {
				body string
				err  error
			}
			got := make(chan reply, 1)
			client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			go func() {
				resp, err := client.Get("http://" + ln.Addr().String() + "/")
				if err != nil {
					got <- reply{err: err}
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				got <- reply{string(b), err}
			}()
			select {
			case err := <-served:
				t.Fatalf("serveHTTP returned on %v: %v", errno, err)
			case r := <-got:
				if r.err != nil || r.body != "served" {
					t.Fatalf("after %v: body %q, err %v", errno, r.body, r.err)
				}
			}
			fl.mu.Lock()
			left := fl.fails
			fl.mu.Unlock()
			if left != 0 {
				t.Errorf("%d accepts were not failed", left)
			}
			srv.Close()
			if err := <-served; err != nil {
				t.Fatalf("serveHTTP after Close: %v", err)
			}
			// The retries are in the app's log, naming the server.
			if out := logged.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, `server="HTTP front door"`) ||
				!strings.Contains(out, errno.Error()) || !strings.Contains(out, "retrying") {
				t.Errorf("the app's log says of the retries:\n%s", out)
			}
		})
	}
}

// frontDoorOrigin is the browser origin the front door's tests list in
// http.allowedOrigins.
const frontDoorOrigin = "http://localhost:5173"

// frontDoorConfigWithOrigin is a config running the fake server "a" whose
// front door lets frontDoorOrigin's pages in.
func frontDoorConfigWithOrigin(t *testing.T) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fakeServers(t, "a"), &m); err != nil {
		t.Fatal(err)
	}
	m["http"] = map[string]any{"allowedOrigins": []string{frontDoorOrigin}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// setFrontDoorBounds sets the front door's connection limit and its
// bound on a connection's first headers for the test.
func setFrontDoorBounds(t *testing.T, maxConns int, firstHeaders time.Duration) {
	t.Helper()
	oldMax, oldFirst := frontDoorMaxConns, frontDoorFirstHeaders
	frontDoorMaxConns, frontDoorFirstHeaders = maxConns, firstHeaders
	t.Cleanup(func() { frontDoorMaxConns, frontDoorFirstHeaders = oldMax, oldFirst })
}

// frontDoorInitialize is a legacy initialize, which a client with the
// token POSTs to /mcp/a.
const frontDoorInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// initializeOn sends frontDoorInitialize with the token on conn and
// reads the answer.
func initializeOn(t *testing.T, conn net.Conn, br *bufio.Reader, addr, token string) *http.Response {
	t.Helper()
	fmt.Fprintf(conn, "POST /mcp/a HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
		addr, token, len(frontDoorInitialize), frontDoorInitialize)
	return readAnswer(t, conn, br, 10*time.Second, "initialize")
}

// TestHTTPFrontDoorMakesRoomForTheToken: any local process, without the
// token, could fill the front door's connections with requests whose
// headers it never ends, each held until the header timeout (10 s), and
// more waiting unaccepted ahead of a client with the token: that client
// waited 8 to 10 s with 1500 of them, and timed out with 5000. At the
// limit the front door now closes the oldest connection that has had no
// request through the gate, so the client with the token is served at
// once; and a connection a request with the token passed on, older than
// all of them, is not the one closed. The first headers' own bound is
// set out of reach here: only making room can serve the client in time.
func TestHTTPFrontDoorMakesRoomForTheToken(t *testing.T) {
	setFrontDoorBounds(t, 8, time.Minute)
	inst, addr := runFrontDoor(t)
	holder, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	held := bufio.NewReader(holder)
	if resp := initializeOn(t, holder, held, addr, inst.currentToken()); resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("initialize: %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	var strangers []net.Conn
	defer func() {
		for _, c := range strangers {
			c.Close()
		}
	}()
	for range 3 * frontDoorMaxConns { // the limit's worth accepted, the rest waiting in the backlog
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		strangers = append(strangers, c)
		fmt.Fprintf(c, "POST /mcp/a HTTP/1.1\r\nHost: %s\r\n", addr) // and nothing more
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp/a", strings.NewReader(frontDoorInitialize))
	req.Header.Set("Authorization", "Bearer "+inst.currentToken())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	client := &http.Client{Timeout: 5 * time.Second} // far below the strangers' hold
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("a client with the token, past connections that never end their headers: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a client with the token: %d, want 200", resp.StatusCode)
	}
	fmt.Fprintf(holder, "GET /mcp/a HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", addr, inst.currentToken())
	resp = readAnswer(t, holder, held, 5*time.Second, "the token holder's kept-alive connection, after the strangers came")
	if resp.StatusCode != http.StatusMethodNotAllowed { // a GET without a session, past the gate
		t.Fatalf("the token holder's next request: %d, want 405", resp.StatusCode)
	}
}

// TestHTTPFrontDoorBoundsFirstHeaders: a connection whose first request's
// headers are not in by frontDoorFirstHeaders is closed (a loopback
// client sends them at once; a connection held open by headers it never
// ends was held for the whole header timeout, 10 s). A connection that
// had a request pass the gate keeps the generous bounds: its next
// request's headers may come slowly.
func TestHTTPFrontDoorBoundsFirstHeaders(t *testing.T) {
	const first = 200 * time.Millisecond
	setFrontDoorBounds(t, frontDoorMaxConns, first)
	inst, addr := runFrontDoor(t)

	stranger, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	fmt.Fprintf(stranger, "POST /mcp/a HTTP/1.1\r\nHost: %s\r\n", addr)
	_ = stranger.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := stranger.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a connection whose first headers never end: %v, want it closed by the front door", err)
	}

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	if resp := initializeOn(t, conn, br, addr, inst.currentToken()); resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("initialize: %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	fmt.Fprintf(conn, "GET /mcp/a HTTP/1.1\r\nHost: %s\r\n", addr) // its next request, slowly
	_ = conn.SetReadDeadline(time.Now().Add(5 * first))
	if _, err := br.ReadByte(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection that passed the gate, its next headers begun: %v, want it still open", err)
	}
	fmt.Fprintf(conn, "Authorization: Bearer %s\r\n\r\n", inst.currentToken())
	resp := readAnswer(t, conn, br, 10*time.Second, "the slow request")
	if resp.StatusCode != http.StatusMethodNotAllowed { // a GET without a session, past the gate
		t.Fatalf("the slow request: %d, want 405", resp.StatusCode)
	}
}

// TestHTTPFrontDoorClosesStrangersConnections: a request that does not
// pass the gate (no token, a page's Origin) gets its answer, and its
// connection is closed with it, instead of staying open for the idle
// timeout; so is a listed origin's preflight, which needs no token (a
// preflight every 25 s held one connection open for minutes). A client
// without the token holds none of the front door's counted connections
// by sending requests.
func TestHTTPFrontDoorClosesStrangersConnections(t *testing.T) {
	_, addr := runFrontDoorWith(t, frontDoorConfigWithOrigin(t))
	for _, tc := range []struct {
		name, request string
		want          int
	}{
		{"no token", "GET /mcp/a HTTP/1.1\r\nHost: %s\r\n\r\n", http.StatusUnauthorized},
		{"no token, a body", "POST /mcp/a HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", http.StatusUnauthorized},
		{"a page's Origin", "GET /mcp/a HTTP/1.1\r\nHost: %s\r\nOrigin: https://evil.example\r\n\r\n", http.StatusForbidden},
		{"a listed origin, no token", "GET /mcp/a HTTP/1.1\r\nHost: %s\r\nOrigin: " + frontDoorOrigin + "\r\n\r\n", http.StatusUnauthorized},
		{"a listed origin's preflight", "OPTIONS /mcp/a HTTP/1.1\r\nHost: %s\r\nOrigin: " + frontDoorOrigin + "\r\nAccess-Control-Request-Method: POST\r\n\r\n", http.StatusNoContent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, tc.request, addr)
			br := bufio.NewReader(conn)
			resp := readAnswer(t, conn, br, 5*time.Second, tc.name)
			if resp.StatusCode != tc.want || !resp.Close {
				t.Fatalf("%d, Connection: close %v; want %d with Connection: close", resp.StatusCode, resp.Close, tc.want)
			}
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the answer: %v, want the connection closed by the front door", err)
			}
		})
	}
}

// TestHTTPFrontDoorListenerMakesRoom: at its limit the front door's
// listener closes the oldest connection that has had no request through
// the gate to take a new one, never one that has; when all of them have,
// a new connection waits, unaccepted, until one closes, or until the
// listener closes.
func TestHTTPFrontDoorListenerMakesRoom(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newFrontDoorListener(inner, 2, time.Minute)
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	accepts := make(chan accepted, 1)
	acceptOne := func() { c, err := ln.Accept(); accepts <- accepted{c, err} }
	dialAndAccept := func() (client, server net.Conn) {
		t.Helper()
		client, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		go acceptOne()
		select {
		case a := <-accepts:
			if a.err != nil {
				t.Fatal(a.err)
			}
			t.Cleanup(func() { a.c.Close() })
			return client, a.c
		case <-time.After(5 * time.Second):
			t.Fatal("not accepted")
		}
		return nil, nil
	}
	closedByServer := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF)
	}

	aClient, a := dialAndAccept()
	bClient, _ := dialAndAccept()
	a.(*frontConn).passedGate() // a token holder's, older than b
	_, c := dialAndAccept()
	if !closedByServer(bClient) {
		t.Fatal("the stranger's connection was not closed to make room")
	}
	_ = aClient.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := aClient.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the token holder's connection: %v, want it open", err)
	}

	c.(*frontConn).passedGate() // every slot a token holder's now
	dClient, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer dClient.Close()
	go acceptOne()
	select {
	case a := <-accepts:
		t.Fatalf("accepted past the limit of token holders' connections: %v, %v", a.c, a.err)
	case <-time.After(200 * time.Millisecond):
	}
	c.Close()
	select {
	case d := <-accepts:
		if d.err != nil {
			t.Fatal(d.err)
		}
		d.c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("not accepted once a token holder's connection closed")
	}

	// Full again (a and e, both token holders'): an Accept waiting for
	// room ends when the listener closes.
	_, e := dialAndAccept()
	e.(*frontConn).passedGate()
	go acceptOne()
	select {
	case a := <-accepts:
		t.Fatalf("accepted past the limit of token holders' connections: %v, %v", a.c, a.err)
	case <-time.After(200 * time.Millisecond): // waiting for room
	}
	ln.Close()
	select {
	case a := <-accepts:
		if !errors.Is(a.err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, %v", a.c, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still waits after Close")
	}
}
