package loadgen

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/mcptest"
)

// TestHTTPRelayBothEras: the minimal relay serves a legacy client and a
// stateless 2026-07-28 client from one child, every session's ids the
// same as the others', and each answer reaches the request that asked
// it; a client without the bearer token gets nothing.
func TestHTTPRelayBothEras(t *testing.T) {
	bin, err := mcptest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	relay, err := StartHTTPRelay([]string{bin, "-inline-echo"}, "secret")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(relay)
	defer func() {
		srv.Close()
		if err := relay.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	servesBothEras(t, srv.URL+"/mcp/fake")
}

// TestHTTPRelayAnswersWhenItsChildDies: a request in flight when the
// child exits gets an error, not a wait for ever.
func TestHTTPRelayAnswersWhenItsChildDies(t *testing.T) {
	bin, err := mcptest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	relay, err := StartHTTPRelay([]string{bin}, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(relay)
	defer srv.Close()
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":3600000},` + statelessMeta + `}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp/fake", strings.NewReader(call))
	req.Header.Set("MCP-Protocol-Version", modernVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type reply struct {
		status int
		body   []byte
		err    error
	}
	replied := make(chan reply, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			replied <- reply{err: err}
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		replied <- reply{status: resp.StatusCode, body: body}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		relay.mu.Lock()
		waiting := len(relay.waiting)
		relay.mu.Unlock()
		if waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the request did not reach the child")
		}
	}
	if err := relay.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	r := <-replied
	if r.err != nil || r.status != http.StatusBadGateway {
		t.Fatalf("status %d, body %q, %v: want 502", r.status, r.body, r.err)
	}
	if err := relay.Close(); err == nil {
		t.Fatal("close: a killed child's exit was not reported")
	}
}

// TestHTTPRelayGivesUpOnAChildThatNeverAnswersInitialize: the relay
// does not wait for ever for its handshake; the child is ended.
func TestHTTPRelayGivesUpOnAChildThatNeverAnswersInitialize(t *testing.T) {
	bin, err := mcptest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = 200 * time.Millisecond
	relay, err := StartHTTPRelay([]string{bin, "-delay", "1h"}, "")
	if err == nil {
		relay.Close()
		t.Fatal("a relay started with a child that never answered initialize")
	}
	if !strings.Contains(err.Error(), "did not answer initialize") {
		t.Fatalf("error %q does not say the child did not answer", err)
	}
}

// TestRunHTTPRelayPrintsItsURLAndStops: the relay process's loop prints
// the URL it serves, serves there, and returns when its context ends,
// with its child.
func TestRunHTTPRelayPrintsItsURLAndStops(t *testing.T) {
	bin, err := mcptest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- RunHTTPRelay(ctx, []string{bin, "-inline-echo"}, "tok", pw) }()
	url, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{Sessions: 2, InFlight: 2, Duration: 100 * time.Millisecond},
		HTTPOpener(strings.TrimSpace(url), "tok"))
	if err != nil || res.Requests == 0 || res.Errors != 0 || res.Misrouted != 0 {
		t.Fatalf("run against %s: %v, %+v", url, err, res)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not stop")
	}
}
