package pool_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// The stateless HTTP exchanges: every 2026-07-28 request POSTed to a
// server is an exchange on that server's one stateless session, whatever
// client sent it. Their ids and progress tokens collide as freely as
// stdio clients' do; these tests are the attacks on that sharing.

// modernCall is a stateless tools/call with id, progress token (none if
// empty) and client name.
func modernCall(id, token, client, tool, args string) string {
	meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"` + client + `","version":"1"}`
	if token != "" {
		meta += `,"progressToken":` + token
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args +
		`,"_meta":{` + meta + `}}}`
}

// postStream posts body under ctx and returns everything the response
// carried, event by event (one message for a JSON answer), until it ends.
func postStream(ctx context.Context, t *testing.T, url, body string) ([]msg, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	mirrorModernHeaders(req.Header, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		var m msg
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("answer %q: %w", b, err)
		}
		m.raw = string(b)
		return []msg{m}, nil
	}
	var events []msg
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m msg
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				return events, fmt.Errorf("event %q: %w", data, err)
			}
			m.raw = data
			events = append(events, m)
		}
	}
	return events, sc.Err()
}

// progressTotals lists the "total" of each progress event, and fails if
// one carries another token than want.
func progressTotals(t *testing.T, events []msg, want string) []int {
	t.Helper()
	var totals []int
	for _, e := range events {
		if e.Method != "notifications/progress" {
			continue
		}
		var p struct {
			Token json.RawMessage `json:"progressToken"`
			Total int             `json:"total"`
		}
		if err := json.Unmarshal(e.Params, &p); err != nil || string(p.Token) != want {
			t.Fatalf("progress %s: token %s, want %s", e.Params, p.Token, want)
		}
		totals = append(totals, p.Total)
	}
	return totals
}

// TestHTTPStatelessSameIDAndTokenStayApart: two clients POST at once a
// call with the same id and the same progress token on the same server.
// Each response carries its own progress (3 steps against 5) and its own
// answer, and nothing of the other's; both are exchanges of one session.
func TestHTTPStatelessSameIDAndTokenStayApart(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	url := newHTTPFront(t, tp) + "/mcp/srv"
	var wg sync.WaitGroup
	events := make([][]msg, 2)
	for i, steps := range []int{3, 5} {
		wg.Go(func() {
			var err error
			events[i], err = postStream(context.Background(), t, url,
				modernCall("1", "7", fmt.Sprint("client-", i), "progress", fmt.Sprintf(`{"steps":%d,"ms":20}`, steps)))
			if err != nil {
				t.Errorf("POST %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i, steps := range []int{3, 5} {
		evs := events[i]
		if len(evs) != steps+1 {
			t.Fatalf("POST %d got %d messages, want %d progress and its answer: %+v", i, len(evs), steps, evs)
		}
		for _, total := range progressTotals(t, evs, "7") {
			if total != steps {
				t.Fatalf("POST %d (%d steps) got progress of a %d-step call", i, steps, total)
			}
		}
		last := evs[len(evs)-1]
		if last.Method != "" || string(last.ID) != "1" || last.text() != "done" {
			t.Fatalf("POST %d answer: %s", i, last.raw)
		}
	}
	sessions := tp.Snapshot().Sessions
	if len(sessions) != 1 || !sessions[0].Stateless {
		t.Fatalf("sessions: %+v, want the server's stateless session alone", sessions)
	}
}

// TestHTTPStatelessCloseCancelsOnlyItsOwn: two clients have a call with
// the same id and progress token in flight; one closes its response. Its
// call, and only its call, is cancelled at the child; the other's goes on,
// its progress still coming, until it closes its own.
func TestHTTPStatelessCloseCancelsOnlyItsOwn(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	url := newHTTPFront(t, tp) + "/mcp/srv"

	gone, leave := context.WithCancel(context.Background())
	defer leave()
	left := make(chan error, 1)
	go func() {
		_, err := postStream(gone, t, url, modernCall("1", "7", "leaver", "sleep", `{"ms":60000}`))
		left <- err
	}()
	eventually(t, "the leaver's call to reach the child", func() bool {
		in := tp.Snapshot().InFlight
		return len(in) == 1 && in[0].WrittenToChild
	})
	leaver := tp.Snapshot().InFlight[0]
	if leaver.Client != "leaver" || leaver.OriginalID != "1" {
		t.Fatalf("in flight: %+v", leaver)
	}

	// 200 steps 50 ms apart: in flight for ten seconds, unless closed.
	stayer := openStream(t, url, modernCall("1", "7", "stayer", "progress", `{"steps":200,"ms":50}`))
	progress := func() {
		t.Helper()
		if m := stayer.next(); m.Method != "notifications/progress" || !strings.Contains(m.raw, `"progressToken":7`) ||
			!strings.Contains(m.raw, `"total":200`) {
			t.Fatalf("the client that stays got %s", m.raw)
		}
	}
	progress()
	in := tp.Snapshot().InFlight
	if len(in) != 2 || in[0].Session != in[1].Session {
		t.Fatalf("in flight: %+v, want both calls on the stateless session", in)
	}
	leave()
	<-left
	eventually(t, "the leaver's call to be cancelled at the child", func() bool { return len(cancelledAtChild(t, logPath)) > 0 })
	if ids := cancelledAtChild(t, logPath); len(ids) != 1 || ids[0] != fmt.Sprint(leaver.PoolID) {
		t.Fatalf("the child was told to cancel %v, want the leaver's %d alone", ids, leaver.PoolID)
	}
	progress() // the other call goes on, its progress still its own
	progress()
	in = tp.Snapshot().InFlight
	if len(in) != 1 || in[0].Client != "stayer" || in[0].PoolID == leaver.PoolID {
		t.Fatalf("in flight after the leaver left: %+v", in)
	}
	stayerID := in[0].PoolID
	stayer.close()
	eventually(t, "the stayer's call to be cancelled when it closes", func() bool { return len(cancelledAtChild(t, logPath)) == 2 })
	if ids := cancelledAtChild(t, logPath); ids[1] != fmt.Sprint(stayerID) {
		t.Fatalf("cancelled %v, want the stayer's %d second", ids, stayerID)
	}
	eventually(t, "nothing in flight", func() bool { return len(tp.Snapshot().InFlight) == 0 })
}

// TestHTTPStatelessCapabilitiesArePerRequest: what one stateless request
// declares in its _meta decides the MRTR bridge for that request only: a
// call that declared no sampling is refused (-32021) before and after
// another client's call that declared it got its question (and its
// result: while that call is in flight, a question is either client's,
// and goes to neither).
func TestHTTPStatelessCapabilitiesArePerRequest(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	h := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	undeclared := func(id string) {
		t.Helper()
		resp := h.post(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"sampling"},` + modernMeta + `}}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "-32021") {
			t.Fatalf("call %s without sampling: %s %s, want 400 with -32021", id, resp.Status, b)
		}
	}
	undeclared("1")
	first := readResult(t, h.call(askCall("2", "sampling", "")))
	if first.ResultType != "input_required" {
		t.Fatalf("call with sampling: %+v", first)
	}
	answer := `,"requestState":"` + first.RequestState + `","inputResponses":{"` + onlyInputKey(t, first) +
		`":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`
	if done := readResult(t, h.call(askCall("3", "sampling", answer))); done.ResultType != "complete" {
		t.Fatalf("the retry with the answer: %+v", done)
	}
	undeclared("4")
}

// TestHTTPStatelessSessionInStatus: the stateless session shows in the
// snapshot as one http session marked stateless, with the pool's name for
// its clients, and each of its requests names the client that sent it.
func TestHTTPStatelessSessionInStatus(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	url := newHTTPFront(t, tp) + "/mcp/srv"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, client := range []string{"alpha", "beta"} {
		wg.Go(func() { _, _ = postStream(ctx, t, url, modernCall("1", "", client, "sleep", `{"ms":60000}`)) })
	}
	eventually(t, "two calls in flight", func() bool { return len(tp.Snapshot().InFlight) == 2 })
	snap := tp.Snapshot()
	if len(snap.Sessions) != 1 {
		t.Fatalf("sessions: %+v", snap.Sessions)
	}
	s := snap.Sessions[0]
	if !s.Stateless || s.Transport != "http" || s.ProtocolVersion != pool.Modern || s.ClientName == "" || s.InFlight != 2 {
		t.Fatalf("the stateless session: %+v", s)
	}
	clients := map[string]bool{}
	for _, r := range snap.InFlight {
		if r.Session != s.ID || r.OriginalID != "1" {
			t.Fatalf("request %+v", r)
		}
		clients[r.Client] = true
	}
	if !clients["alpha"] || !clients["beta"] {
		t.Fatalf("clients of the requests in flight: %v", clients)
	}
}

// sseStream is an open SSE response, read event by event.
type sseStream struct {
	t      *testing.T
	events chan msg
	close  context.CancelFunc
}

// openStream posts body and reads its event stream until close.
func openStream(t *testing.T, url, body string) *sseStream {
	t.Helper()
	resp, cancel := postOpen(t, url, body)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		resp.Body.Close()
		cancel()
		t.Fatalf("%s: %s %q", body, resp.Status, ct)
	}
	st := &sseStream{t: t, events: make(chan msg, 64), close: cancel}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m msg
				if json.Unmarshal([]byte(data), &m) == nil {
					m.raw = data
					st.events <- m
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return st
}

// next is the stream's next event.
func (st *sseStream) next() msg {
	st.t.Helper()
	select {
	case m := <-st.events:
		return m
	case <-time.After(15 * time.Second):
		st.t.Fatal("no event within 15s")
	}
	return msg{}
}

// TestHTTPStatelessListensStayApart: two clients listen on one modern
// child under the same id, one for tool changes, one for prompt changes.
// Each stream gets only the kind it asked for; closing one response ends
// that listen only (the child's one upstream listen is reopened for what
// the other still asks), and closing the other ends the upstream listen.
func TestHTTPStatelessListensStayApart(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath))
	url := newHTTPFront(t, tp) + "/mcp/srv"
	h := &httpClient{t: t, url: url}
	listen := func(filter string) *sseStream {
		st := openStream(t, url, `{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":`+filter+`,`+modernMeta+`}}`)
		if ack := st.next(); ack.Method != "notifications/subscriptions/acknowledged" {
			t.Fatalf("first event: %s", ack.raw)
		}
		return st
	}
	tools := listen(`{"toolsListChanged":true}`)
	prompts := listen(`{"promptsListChanged":true}`)
	eventually(t, "one upstream listen for tools and prompts", func() bool {
		return countInLog(t, logPath, "subscriptions/listen") == 2 && countInLog(t, logPath, "notifications/cancelled") == 1
	})
	notify := func(kind string) {
		t.Helper()
		h.call(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"` + kind + `"},` + modernMeta + `}}`)
	}
	notify("tools")
	notify("prompts")
	if m := tools.next(); m.Method != "notifications/tools/list_changed" || !strings.Contains(m.raw, `"io.modelcontextprotocol/subscriptionId":3`) {
		t.Fatalf("the tools listener got %s", m.raw)
	}
	if m := prompts.next(); m.Method != "notifications/prompts/list_changed" {
		t.Fatalf("the prompts listener got %s", m.raw)
	}

	tools.close()
	eventually(t, "the upstream listen reopened for prompts alone", func() bool {
		return countInLog(t, logPath, "subscriptions/listen") == 3 && countInLog(t, logPath, "notifications/cancelled") == 2
	})
	notify("prompts")
	if m := prompts.next(); m.Method != "notifications/prompts/list_changed" {
		t.Fatalf("the prompts listener, after the other left, got %s", m.raw)
	}
	prompts.close()
	eventually(t, "the upstream listen to close with the last listener", func() bool {
		return countInLog(t, logPath, "notifications/cancelled") == 3
	})
}

// TestHTTPSessionCostsNoGoroutine: a legacy HTTP session that waits for
// nothing holds no goroutine of the pool's (answers go to the POST that
// asked, other messages to the GET stream when one is open).
func TestHTTPSessionCostsNoGoroutine(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	url := newHTTPFront(t, tp) + "/mcp/srv"
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // no connection goroutines left behind
	open := func(i int) {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c%d","version":"1"}}}`, i)
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize %d: %s", i, resp.Status)
		}
	}
	open(0) // the child, its loops and the front door's are up
	before := runtime.NumGoroutine()
	for i := 1; i <= 20; i++ {
		open(i)
	}
	eventually(t, "the sessions' connections to end, and nothing of theirs to stay", func() bool {
		return runtime.NumGoroutine() <= before+2
	})
	if n := len(tp.Snapshot().Sessions); n != 21 {
		t.Fatalf("%d sessions, want 21", n)
	}
}

// postOpen posts body to url as a client that takes a JSON answer or an
// event stream; cancel ends the request, whose response stays open until
// then.
func postOpen(t *testing.T, url, body string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	mirrorModernHeaders(req.Header, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return resp, cancel
}
