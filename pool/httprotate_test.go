package pool_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
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

// TestHTTPRotationEndsHeldCalls: a 2026-07-28 client let in with the old
// token calls a tool whose legacy child asks for sampling; the pool
// answers input_required and holds the call at the child for the
// client's retry (MRTR). The rotation ends that call as it ends the old
// token's requests in flight: the child is told it was cancelled, and a
// retry with the new token and the old requestState is answered as one
// whose requestState the pool never gave out. A stdio client's held
// call, which no token let in, goes on and completes (on another
// server's child: on one child, a question while the other client's
// call is in flight could be either's, and goes to neither). On the first
// edition the rotation reached only POSTs waiting for their answers: the
// held call ran on, and the new token's retry completed it.
func TestHTTPRotationEndsHeldCalls(t *testing.T) {
	var token atomic.Pointer[string]
	old, fresh := "old-token", "new-token"
	token.Store(&old)
	logPath := filepath.Join(t.TempDir(), "child.log")
	otherLog := filepath.Join(t.TempDir(), "other.log")
	tp := newTestPool(t, &pool.Options{HTTPToken: func() string { return *token.Load() }}, fake("srv", "-log", logPath),
		fake("other", "-log", otherLog))
	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	call := func(body, tok string) msg {
		t.Helper()
		resp := h.post(body, "Authorization", "Bearer "+tok)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m msg
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("POST %s: %s %q", body, resp.Status, b)
		}
		m.raw = resp.Status + " " + string(b)
		return m
	}
	answer := func(r inputRequiredResult) string {
		for key := range r.InputRequests {
			return `,"requestState":"` + r.RequestState + `","inputResponses":{"` + key +
				`":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`
		}
		t.Fatalf("no question in %+v", r)
		return ""
	}

	stdio := tp.dial(t, "other")
	stdio.send(askCall("11", "sampling", ""))
	m, _ := stdio.recvID("11")
	kept := readResult(t, m)
	if kept.ResultType != "input_required" || len(tp.Snapshot().InFlight) != 1 {
		t.Fatalf("the stdio client's call: %s; in flight: %+v", m.raw, tp.Snapshot().InFlight)
	}
	stdioCall := tp.Snapshot().InFlight[0].PoolID
	held := readResult(t, call(askCall("1", "sampling", ""), old))
	if held.ResultType != "input_required" {
		t.Fatalf("the old token's call: %+v", held)
	}
	var heldCall uint64
	for _, r := range tp.Snapshot().InFlight {
		if r.PoolID != stdioCall {
			heldCall = r.PoolID
		}
	}

	token.Store(&fresh)
	tp.HTTPTokenRotated()

	eventually(t, "the old token's held call to be cancelled at the child", func() bool { return len(cancelledAtChild(t, logPath)) > 0 },
		func() string { return fmt.Sprintf("in flight: %+v", tp.Snapshot().InFlight) })
	if ids := cancelledAtChild(t, logPath); len(ids) != 1 || ids[0] != fmt.Sprint(heldCall) {
		t.Fatalf("the child was told to cancel %v, want the old token's held call %d alone", ids, heldCall)
	}
	if in := tp.Snapshot().InFlight; len(in) != 1 || in[0].PoolID != stdioCall {
		t.Fatalf("in flight after the rotation: %+v, want the stdio client's held call alone", in)
	}
	if ids := cancelledAtChild(t, otherLog); len(ids) != 0 {
		t.Fatalf("the stdio client's child was told to cancel %v", ids)
	}

	retry := call(askCall("2", "sampling", answer(held)), fresh)
	unknown := call(askCall("3", "sampling", strings.Replace(answer(held), held.RequestState, "sb1."+strings.Repeat("0", 32), 1)), fresh)
	if strings.Contains(retry.raw, "forty-two") {
		t.Fatalf("the held call of the rotated token completed for the new token's retry: %s", retry.raw)
	}
	if outcome(retry) != outcome(unknown) {
		t.Fatalf("the retry with the rotated-away requestState: %s; with an unknown one: %s", retry.raw, unknown.raw)
	}

	stdio.send(askCall("12", "sampling", answer(kept)))
	m, _ = stdio.recvID("12")
	if done := readResult(t, m); done.ResultType != "complete" || len(done.Content) != 1 || !strings.Contains(done.Content[0].Text, "forty-two") {
		t.Fatalf("the stdio client's retry after the rotation: %s", m.raw)
	}
}

// outcome is what kind of answer m is: an error's code, or a result's
// resultType.
func outcome(m msg) string {
	if m.Error != nil {
		return fmt.Sprint("error ", m.Error.Code)
	}
	var r struct {
		ResultType string `json:"resultType"`
	}
	_ = json.Unmarshal(m.Result, &r)
	return "result " + r.ResultType
}
