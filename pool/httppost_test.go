package pool_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// within waits up to 15 s for what ch brings.
func within[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: nothing within 15s", what)
	}
	var zero T
	return zero
}

// readAllAsync reads r to its end in the background.
func readAllAsync(r io.Reader) <-chan string {
	done := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	return done
}

// sseData is the data of each event of an SSE body, decoded.
func sseData(t *testing.T, body string) []msg {
	t.Helper()
	var events []msg
	for line := range strings.Lines(body) {
		data, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "data: ")
		if !ok {
			continue
		}
		var m msg
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event %.200q: %v", data, err)
		}
		m.raw = data
		events = append(events, m)
	}
	return events
}

// progressSteps is the "progress" value of each progress event, in order;
// answered says whether an answer came after them.
func progressSteps(t *testing.T, events []msg) (steps []int, answered bool) {
	t.Helper()
	for _, e := range events {
		if e.Method != "notifications/progress" {
			answered = answered || e.Result != nil || e.Error != nil
			continue
		}
		var p struct {
			Progress int `json:"progress"`
		}
		if err := json.Unmarshal(e.Params, &p); err != nil {
			t.Fatalf("progress %s: %v", e.Params, err)
		}
		steps = append(steps, p.Progress)
	}
	return steps, answered
}

// TestHTTPProgressAllReachAReader: a call's progress notifications, POSTed
// with a progress token and answered as an event stream, all reach a
// client that reads its stream, however fast the child sends them, as
// they all reach a stdio client. On the first edition they went through
// 16 slots, and those that found no room were dropped: 17 of 200 came.
func TestHTTPProgressAllReachAReader(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	c.initialize("c")
	const n = 500
	resp := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":%d,"ms":0},"_meta":{"progressToken":"p"}}}`, n))
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want an event stream", ct)
	}
	steps, answered := progressSteps(t, sseData(t, within(t, "the stream's end", readAllAsync(resp.Body))))
	if len(steps) != n || !answered {
		t.Fatalf("%d of %d progress notifications came, answered %v", len(steps), n, answered)
	}
	for i, s := range steps {
		if s != i+1 {
			t.Fatalf("progress %d came as notification %d", s, i+1)
		}
	}
}

// TestHTTPListenTakesEveryChange: a 2026-07-28 listen over HTTP gets every
// list change of a burst, as a stdio listen does. On the first edition a
// burst of 200 reached the stream 65 to 119 times: what found its 16 slots
// full was dropped.
func TestHTTPListenTakesEveryChange(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	st := openStream(t, c.url, `{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+modernMeta+`}}`)
	if ack := st.next(); ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first event %s, want the acknowledgement", ack.raw)
	}
	const n = 200
	done := make(chan msg, n)
	for i := range n {
		go func() {
			resp := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"notify","arguments":{"kind":"tools"},`+modernMeta+`}}`, 100+i))
			defer resp.Body.Close()
			var m msg
			_ = json.NewDecoder(resp.Body).Decode(&m)
			done <- m
		}()
	}
	for range n {
		if m := within(t, "a notify call's answer", done); m.Result == nil {
			t.Fatalf("notify: %s", m.raw)
		}
	}
	// Each change was related to the listen before its call was answered.
	deadline := time.After(15 * time.Second)
	for got := 0; got < n; got++ {
		select {
		case m := <-st.events:
			if m.Method != "notifications/tools/list_changed" {
				t.Fatalf("event %d: %s, want a tools change", got+1, m.raw)
			}
		case <-deadline:
			t.Fatalf("%d of %d changes reached the listen", got, n)
		}
	}
}

// rawPost writes a POST of body to session sid (none: "") on a connection
// of its own that takes in little while the test does not read it; the
// test reads the response when it likes.
func rawPost(t *testing.T, url, sid, body string) (net.Conn, *http.Request) {
	t.Helper()
	conn := dialHost(t, url)
	t.Cleanup(func() { conn.Close() })
	_ = conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	mirrorModernHeaders(req.Header, body)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	return conn, req
}

// TestHTTPStreamBehindIsLetGoWithoutGaps: a client that falls behind its
// POST's event stream by more than its queue holds (Options.MaxMessageBytes)
// is let go, as a stdio client that stops reading is evicted: its stream
// ends, without the answer, after what was written whole, and nothing is
// missing from what it got. On the first edition the messages that found
// no room were dropped one by one and the stream went on: the client got
// its answer after a stream with holes in it, and could not tell.
func TestHTTPStreamBehindIsLetGoWithoutGaps(t *testing.T) {
	tp := newTestPool(t, &pool.Options{MaxMessageBytes: 256 << 10}, fake("srv"))
	_, base := newStallFront(t, tp)
	c := &httpClient{t: t, url: base + "/mcp/srv"}
	c.initialize("c")
	const n = 10000 // over a megabyte: far more than the connection's buffers and the queue hold
	before := tp.Snapshot().Counters.Requests
	conn, req := rawPost(t, c.url, c.sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":%d,"ms":0},"_meta":{"progressToken":"p"}}}`, n))
	eventually(t, "the child to answer the call", func() bool {
		s := tp.Snapshot()
		return s.Counters.Requests > before && len(s.InFlight) == 0
	})
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusServiceUnavailable {
		return // let go before its first event: it says so
	}
	steps, answered := progressSteps(t, sseData(t, string(body)))
	if answered || len(steps) == 0 || len(steps) >= n {
		t.Fatalf("%s: %d of %d progress notifications, answered %v: want the stream cut short, unanswered", resp.Status, len(steps), n, answered)
	}
	for i, s := range steps {
		if s != i+1 {
			t.Fatalf("progress %d came as notification %d: notifications between were lost", s, i+1)
		}
	}
}

// TestHTTPUnreadPOSTLetsGo: a POST whose client never reads its answer (a
// large JSON body, or an event stream) holds its handler no longer than a
// GET stream's write timeout: its session (legacy) expires when idle, and
// a stateless session ends once its last exchange did. On the first
// edition the write waited for ever: the session counted the POST as
// waiting, and never expired.
func TestHTTPUnreadPOSTLetsGo(t *testing.T) {
	t.Cleanup(pool.SetStreamWriteTimeout(200 * time.Millisecond)) // runs last: after the pool closed
	for _, tc := range []struct{ name, body string }{
		{"legacy json", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{"bytes":8000000}}}`},
		{"legacy stream", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":20000,"ms":0},"_meta":{"progressToken":"p"}}}`},
		{"modern json", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{"bytes":8000000},` + modernMeta + `}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestPool(t, nil, fake("srv"))
			h, base := newStallFront(t, tp)
			c := &httpClient{t: t, url: base + "/mcp/srv"}
			if !strings.Contains(tc.body, modernMeta) {
				c.initialize("c")
			}
			before := tp.Snapshot().Counters.Requests
			rawPost(t, c.url, c.sid, tc.body)
			eventually(t, "the child to answer the call", func() bool {
				s := tp.Snapshot()
				return s.Counters.Requests > before && len(s.InFlight) == 0
			})
			eventually(t, "the unread POST let go and its session ended", func() bool {
				pool.ExpireHTTPIdle(h, time.Now().Add(max(pool.HTTPSessionIdle, 2*pool.DefaultIdleTimeout)+time.Second))
				return len(tp.Snapshot().Sessions) == 0
			})
		})
	}
}

// TestHTTPCancelledPOSTEnds: a legacy client that cancels its call with
// notifications/cancelled, keeping the call's POST open, as the TS SDK does
// on an abort or a timeout, has that POST ended at once: 202 with no body
// when nothing was written, else the end of its event stream (no answer:
// MCP does not answer a cancelled request). Its session is then idle, and
// expires. On the first edition the POST waited for an answer that never
// came, and the session, with a POST waiting, never expired.
func TestHTTPCancelledPOSTEnds(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			tp := newTestPool(t, nil, fake("srv"))
			h, base := newStallFront(t, tp)
			c := &httpClient{t: t, url: base + "/mcp/srv"}
			c.initialize("c")
			call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000}}}`
			if stream { // one step, then a long wait
				call = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2,"ms":60000},"_meta":{"progressToken":"p"}}}`
			}
			responded := make(chan *http.Response, 1)
			go func() {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, c.url, strings.NewReader(call))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Session-Id", c.sid)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					close(responded)
					return
				}
				responded <- resp
			}()
			var resp *http.Response
			if stream { // its first event has come: the stream has begun
				resp = within(t, "the call's event stream", responded)
			}
			eventually(t, "the call to reach the child", func() bool {
				in := tp.Snapshot().InFlight
				return len(in) == 1 && in[0].WrittenToChild
			})
			r := c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"aborted"}}`)
			r.Body.Close()
			if !stream {
				resp = within(t, "the cancelled call's response", responded)
			}
			if resp == nil {
				t.FailNow()
			}
			defer resp.Body.Close()
			body := within(t, "the cancelled call's response to end", readAllAsync(resp.Body))
			if stream {
				steps, answered := progressSteps(t, sseData(t, body))
				if resp.StatusCode != http.StatusOK || len(steps) != 1 || answered {
					t.Fatalf("%s: %d progress events, answered %v; want the one step and no answer", resp.Status, len(steps), answered)
				}
			} else if resp.StatusCode != http.StatusAccepted || body != "" {
				t.Fatalf("%s %q, want 202 with no body", resp.Status, body)
			}
			if in := tp.Snapshot().InFlight; len(in) != 0 {
				t.Fatalf("%d requests in flight after the cancel", len(in))
			}
			pool.ExpireHTTPIdle(h, time.Now().Add(pool.HTTPSessionIdle+time.Second))
			if n := len(tp.Snapshot().Sessions); n != 0 {
				t.Fatalf("%d sessions after the idle period", n)
			}
		})
	}
}
