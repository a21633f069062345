//go:build unix

package pool_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A key that Go's encoding/json takes for "id" without being it: on the
// first edition the pool saw a notification and passed its bytes on, the
// Go child saw a request with the victim's pool id, and the victim got the
// attacker's answer while its own was orphaned.
func TestCaseFoldedIDCannotAnswerAnotherSession(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	victim, attacker := tp.dial(t, "srv"), tp.dial(t, "srv")
	victim.initialize("victim", "")
	attacker.initialize("attacker", "")
	victim.call("1", "sleep_echo", `{"ms":1500,"text":"real answer"}`)
	var poolID uint64
	eventually(t, "the victim's call in flight", func() bool {
		s := tp.Snapshot()
		if len(s.InFlight) == 1 && s.InFlight[0].WrittenToChild {
			poolID = s.InFlight[0].PoolID
			return true
		}
		return false
	})
	for i, smuggled := range []string{
		fmt.Sprintf(`{"jsonrpc":"2.0","method":"tools/call","ID":%d,"params":{"name":"echo","arguments":{"text":"pwned"}}}`, poolID),
		fmt.Sprintf(`{"jsonrpc":"2.0","method":"tools/call","I\u0044":%d,"params":{"name":"echo","arguments":{"text":"pwned"}}}`, poolID),
		fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","Method":"notifications/cancelled","params":{"requestId":%d}}`, poolID),
		fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/x","Params":{"requestId":%d},"meth\u017fod":"notifications/cancelled"}`, poolID),
	} {
		attacker.send(smuggled)
		if m := attacker.recv(); m.Error == nil || m.Error.Code != -32600 {
			t.Errorf("smuggle %d: want -32600 for the attacker, got %s", i, m.raw)
		}
	}
	m, other := victim.recvID("1")
	if m.text() != "real answer" || len(other) > 0 {
		t.Fatalf("the victim got %s (and %d other messages)", m.raw, len(other))
	}
	if o := tp.Snapshot().Counters.Orphaned; o != 0 {
		t.Errorf("%d orphaned answers: something answered the victim's id", o)
	}
}

// Duplicate keys: the pool's codec read the first, children the last. Two
// _meta objects, the last with another session's pool token, injected
// progress into that session; two "name"s recorded and retried the wrong
// tool. Now the attacker alone gets -32600, and nothing reaches the child.
func TestDuplicateKeysAreRefused(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	victim, attacker := tp.dial(t, "srv"), tp.dial(t, "srv")
	victim.initialize("victim", "")
	attacker.initialize("attacker", "")
	victim.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","arguments":{"steps":3,"ms":200},"_meta":{"progressToken":"mine"}}}`)
	first := victim.recv()
	if first.Method != "notifications/progress" {
		t.Fatalf("victim: %s", first.raw)
	}
	for i, dup := range []string{
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"progress","arguments":{"steps":1,"ms":0},"_meta":{"progressToken":"a"},"_meta":{"progressToken":1}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"progress","arguments":{"steps":1,"ms":0},"_meta":{"progressToken":"a","progressToken":1}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ro_count","name":"count","arguments":{}}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"\xc3\x28\"}}}",
	} {
		attacker.send(dup)
		if m := attacker.recv(); m.Error == nil || m.Error.Code != -32600 {
			t.Errorf("case %d: want -32600, got %s", i, m.raw)
		}
	}
	m, other := victim.recvID("1")
	if m.text() != "done" {
		t.Fatalf("victim's call: %s", m.raw)
	}
	for _, o := range append([]msg{first}, other...) {
		if o.Method == "notifications/progress" && !strings.Contains(o.raw, `"progressToken":"mine"`) {
			t.Errorf("foreign progress reached the victim: %s", o.raw)
		}
	}
	if n := len(other) + 1; n != 3 {
		t.Errorf("victim got %d progress notifications, want its 3", n)
	}
}

// One session flooding a server with calls gets -32004 past its own
// limit; the server's other sessions are all answered. On the first
// edition the queue was per server: one client with 70,000 pending calls
// left every other session of that server with -32004 (0 of 800 answered).
func TestFloodingSessionDoesNotStarveOthers(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts pool.Options
		n    int // calls the flood sends
	}{
		// A small queue: the limit is 800/8 = 100.
		{"small queue", pool.Options{MaxPending: 800}, 1000},
		// The attack as it was reported, against the defaults: 70,000
		// calls into a 65,536-request queue, the session limit 8,192.
		{"70000 calls, defaults", pool.Options{}, 70000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.n > 1000 {
				t.Skip("70,000 calls")
			}
			tp := newTestPool(t, &tc.opts, fake("srv"))
			limit := max(cmp.Or(tc.opts.MaxPending, 1<<16)/8, 1)
			flood := tp.dial(t, "srv")
			flood.initialize("flood", "")
			others := make([]*client, 4)
			for i := range others {
				others[i] = tp.dial(t, "srv")
				others[i].initialize(fmt.Sprint("other-", i), "")
			}
			// The refusals are read while the flood is sent. A flooding
			// client that does not keep up with reading its 61,808
			// refusals is evicted (its queue of 4,096 fills): that is
			// another rule, and an outcome as good as the refusals.
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				for i := range tc.n {
					line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":600000}}}`, i)
					if flood.trySend(line) != nil {
						return // evicted
					}
				}
			}()
			refused, evicted := 0, false
			deadline := time.After(time.Minute)
			for refused < tc.n-limit && !evicted {
				select {
				case m, ok := <-flood.in:
					if !ok {
						evicted = true
						break
					}
					if m.Error == nil || m.Error.Code != -32004 {
						t.Fatalf("the flood got %s", m.raw)
					}
					refused++
				case <-deadline:
					t.Fatalf("the flood got %d refusals, want %d", refused, tc.n-limit)
				}
			}
			<-sent
			if evicted && tc.n-limit < 4096 {
				t.Fatalf("the flood was evicted after %d refusals, fewer than its queue holds", refused)
			}
			t.Logf("the flood: %d refusals, evicted %v", refused, evicted)
			each := min(200, limit/2) // 800 calls in all with the defaults, as reported
			for i, c := range others {
				for j := range each {
					c.call(fmt.Sprint(j), "echo", fmt.Sprintf(`{"text":"o%d-%d"}`, i, j))
				}
			}
			for i, c := range others {
				got := map[string]string{} // answers come in any order
				for len(got) < each {
					m := c.recv()
					if m.Error != nil {
						t.Fatalf("other session %d: %s", i, m.raw)
					}
					got[string(m.ID)] = m.text()
				}
				for j := range each {
					if got[fmt.Sprint(j)] != fmt.Sprintf("o%d-%d", i, j) {
						t.Fatalf("other session %d call %d: %q", i, j, got[fmt.Sprint(j)])
					}
				}
			}
			select {
			case m, ok := <-flood.in:
				if ok {
					t.Errorf("the flood got more than its refusals: %s", m.raw)
				}
			default:
			}
		})
	}
}

// A session's requests in flight may hold only so many bytes in the pool:
// past that only that session is refused, with the reason, and what it
// frees (an answer, a cancel) it may use again. A single request larger
// than the limit is still admitted when nothing else is in flight.
func TestSessionBytesInFlightAreBounded(t *testing.T) {
	const limit = 64 << 10
	tp := newTestPool(t, &pool.Options{MaxSessionBytes: limit}, fake("srv"))
	greedy, other := tp.dial(t, "srv"), tp.dial(t, "srv")
	greedy.initialize("greedy", "")
	other.initialize("other", "")
	pad := strings.Repeat("p", 20<<10)
	big := fmt.Sprintf(`{"ms":600000,"text":%q}`, pad)
	for i := range 3 { // 3 x ~20 KiB: within the limit
		greedy.call(fmt.Sprint(i), "sleep", big)
	}
	greedy.call("3", "sleep", big) // ~80 KiB: past it
	m, _ := greedy.recvID("3")
	if m.Error == nil || m.Error.Code != -32004 || !strings.Contains(m.Error.Message, "bytes") {
		t.Fatalf("the fourth large call: %s", m.raw)
	}
	// Another session's budget is its own.
	for i := range 3 {
		other.call(fmt.Sprint(i), "sleep", big)
	}
	other.call("9", "echo", `{"text":"still here"}`)
	if m, _ := other.recvID("9"); m.text() != "still here" {
		t.Fatalf("the other session: %s", m.raw)
	}
	// Cancelling frees the bytes for the greedy session's next call.
	greedy.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0}}`)
	eventually(t, "the cancelled call's bytes to be freed", func() bool {
		greedy.call("4", "sleep_echo", fmt.Sprintf(`{"ms":0,"text":%q}`, pad))
		m, _ := greedy.recvID("4")
		return m.Error == nil && m.text() == pad
	})
	// Alone, a request larger than the limit passes.
	lone := tp.dial(t, "srv")
	lone.initialize("lone", "")
	huge := strings.Repeat("h", 2*limit)
	lone.call("1", "echo", fmt.Sprintf(`{"text":%q}`, huge))
	if m, _ := lone.recvID("1"); m.text() != huge {
		t.Fatalf("a lone large call was not answered: %.200s", m.raw)
	}
}

// TestSessionSubscriptionsAreBounded: a session that subscribes to ever
// more resources, or opens ever more listens, is refused past its share
// (-32004), and only it: another session subscribes as before, and the
// greedy one may subscribe again once it lets go of one.
func TestSessionSubscriptionsAreBounded(t *testing.T) {
	const limit = 3
	tp := newTestPool(t, &pool.Options{MaxSessionSubscriptions: limit}, fake("srv"))
	greedy, other := tp.dial(t, "srv"), tp.dial(t, "srv")
	greedy.initialize("greedy", "")
	other.initialize("other", "")
	subscribe := func(c *client, method, id, uri string) msg {
		c.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"` + method + `","params":{"uri":"` + uri + `"}}`)
		m, _ := c.recvID(`"` + id + `"`)
		return m
	}
	for i := range limit {
		if m := subscribe(greedy, "resources/subscribe", fmt.Sprint(i), fmt.Sprintf("fake://r%d", i)); m.Error != nil {
			t.Fatalf("subscription %d within the limit: %s", i, m.raw)
		}
	}
	if m := subscribe(greedy, "resources/subscribe", "again", "fake://r0"); m.Error != nil {
		t.Fatalf("subscribing again to a held resource adds nothing, and was refused: %s", m.raw)
	}
	m := subscribe(greedy, "resources/subscribe", "over", "fake://r9")
	if m.Error == nil || m.Error.Code != -32004 || !strings.Contains(m.Error.Message, "subscriptions") {
		t.Fatalf("a subscription past the limit: %s", m.raw)
	}
	greedy.send(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`)
	if m, _ := greedy.recvID(`"L"`); m.Error == nil || m.Error.Code != -32004 {
		t.Fatalf("a listen past the limit, even one without resources: %s", m.raw)
	}
	for i := range limit { // another session's share is its own
		if m := subscribe(other, "resources/subscribe", fmt.Sprint(i), fmt.Sprintf("fake://r%d", i)); m.Error != nil {
			t.Fatalf("the other session's subscription %d: %s", i, m.raw)
		}
	}
	if m := subscribe(greedy, "resources/unsubscribe", "un", "fake://r1"); m.Error != nil {
		t.Fatalf("unsubscribe: %s", m.raw)
	}
	if m := subscribe(greedy, "resources/subscribe", "room", "fake://r9"); m.Error != nil {
		t.Fatalf("a subscription after letting go of one: %s", m.raw)
	}
}

// A session's refused subscription changes nothing it or anyone holds:
// a subscribe refused by the pool (here a duplicate id) or by the child
// (a resource it does not have) leaves the session holding nothing, so
// its unsubscribe that follows cannot take away the stake of a session
// that still holds the resource, and a later subscribe by someone else
// still reaches a child that refused the first.
func TestRefusedSubscriptionsReleaseNoOnesStake(t *testing.T) {
	log := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", log, "-refuse-subscribe", "fake://later"))
	sub := func(c *client, method, id, uri string) msg {
		c.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"` + method + `","params":{"uri":"` + uri + `"}}`)
		m, _ := c.recvID(`"` + id + `"`)
		return m
	}
	holder, attacker := tp.dial(t, "srv"), tp.dial(t, "srv")
	holder.initialize("holder", "")
	attacker.initialize("attacker", "")
	if m := sub(holder, "resources/subscribe", "1", "fake://counter"); m.Error != nil {
		t.Fatalf("subscribe: %s", m.raw)
	}

	attacker.call(`"busy"`, "sleep", `{"ms":60000}`)
	if m := sub(attacker, "resources/subscribe", "busy", "fake://counter"); m.Error == nil || m.Error.Code != -32600 {
		t.Fatalf("a subscribe under an id in flight: want -32600, got %s", m.raw)
	}
	if m := sub(attacker, "resources/unsubscribe", "2", "fake://counter"); m.Error != nil {
		t.Fatalf("unsubscribe: %s", m.raw)
	}
	holder.call(`"n"`, "notify", `{"kind":"updated"}`)
	if _, other := holder.recvID(`"n"`); !slices.ContainsFunc(other, func(m msg) bool { return m.Method == "notifications/resources/updated" }) {
		t.Errorf("the holder got no resources/updated after another session's refused subscribe and its unsubscribe")
	}

	if m := sub(attacker, "resources/subscribe", "3", "fake://later"); m.Error == nil {
		t.Fatalf("the child's refusal did not reach the client: %s", m.raw)
	}
	if m := sub(holder, "resources/subscribe", "4", "fake://later"); m.Error == nil {
		t.Fatalf("a subscribe after another's was refused by the child was answered by the pool, not the child: %s", m.raw)
	}
	if got := countMethod(childLog(t, log), "resources/unsubscribe"); got != 0 {
		t.Errorf("the child heard %d unsubscribes; nobody let go of anything it held", got)
	}
}

// A secret the configuration expanded into a child's arguments is in no
// snapshot and no event (events become history): they show the line as
// configured.
func TestExpandedSecretsAreNotShown(t *testing.T) {
	var mu sync.Mutex
	var started []pool.Event
	cfg := fake("srv", "-stderr", "s3cret")
	cfg.Shown = []string{cfg.Command, "-stderr", "${TOKEN}"}
	tp := newTestPool(t, &pool.Options{Record: func(e pool.Event) {
		if e.Kind == pool.EventBackendStarted {
			mu.Lock()
			started = append(started, e)
			mu.Unlock()
		}
	}}, cfg)
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	eventually(t, "the child's start recorded", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(started) == 1
	})
	mu.Lock()
	ev := fmt.Sprint(started[0].Command, started[0].ResolvedCommand)
	mu.Unlock()
	shown := fmt.Sprint(tp.Snapshot().Backends[0].Command)
	for what, s := range map[string]string{"the event": ev, "the snapshot": shown} {
		if strings.Contains(s, "s3cret") || !strings.Contains(s, "${TOKEN}") {
			t.Errorf("%s shows %s", what, s)
		}
	}
}

// A client's message that spans lines reaches the child as one line. A
// line break between its tokens must not let a request the pool never
// classified (its own id, no limits, no history, perhaps another session's
// pool id, whose answer would then be forged) reach the child: each case
// sends a call whose params hold, after a line break, a whole tools/call
// of the count tool, whose side effect must not happen, and the child must
// hear one line per message, with no CR in it (some readers end a line
// there).
func TestAMessageSpanningLinesIsOneLineAtTheChild(t *testing.T) {
	smuggle := func(brk, effect string) string {
		return `"z":` + brk + `{"jsonrpc":"2.0","id":"smuggled","method":"tools/call","params":{"name":"count","arguments":{"file":"` +
			effect + `"}}}` + brk + `,`
	}
	withParams := func(call, extra string) string {
		return strings.Replace(call, `"params":{`, `"params":{`+extra, 1)
	}
	legacyCall := `{"jsonrpc":"2.0","id":"real","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	for _, tc := range []struct {
		name string
		brk  string
		send func(t *testing.T, tp *testPool, body string) msg
	}{
		{"stdio, CR", "\r", sendStdio},
		{"stdio, CR before the newline", "\r", func(t *testing.T, tp *testPool, body string) msg {
			return sendStdio(t, tp, body+"\r")
		}},
		{"HTTP legacy session, LF", "\n", sendHTTPLegacy},
		{"HTTP legacy session, CRLF", "\r\n", sendHTTPLegacy},
		{"HTTP 2026-07-28, LF", "\n", sendHTTPModern},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortTempDir(t)
			logPath, effect := filepath.Join(dir, "child.log"), filepath.Join(dir, "effect")
			tp := newTestPool(t, nil, fake("srv", "-era", "both", "-log", logPath))
			call := legacyCall
			if tc.name == "HTTP 2026-07-28, LF" {
				call = modernCall(`"real"`, "", "c", "echo", `{"text":"hi"}`)
			}
			m := tc.send(t, tp, withParams(call, smuggle(tc.brk, effect)))
			if m.Error != nil || !strings.Contains(m.raw, "hi") {
				t.Fatalf("the call was not answered as itself: %s", m.raw)
			}
			if _, err := os.Stat(effect); err == nil {
				t.Errorf("a tools/call the pool never saw ran at the child")
			}
			raw, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.Lines(string(raw)) {
				var got struct {
					ID json.RawMessage `json:"id"`
				}
				if err := json.Unmarshal([]byte(line), &got); err != nil {
					t.Errorf("the child read a line that is no message (%v): %q", err, line)
				}
				if strings.Contains(line, "\r") {
					t.Errorf("the child read a line with a CR in it: %q", line)
				}
				if string(got.ID) == `"smuggled"` {
					t.Errorf("the child read a request the pool never classified: %q", line)
				}
			}
		})
	}
}

// sendStdio sends one line on a new stdio session and returns the answer
// to id "real".
func sendStdio(t *testing.T, tp *testPool, line string) msg {
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	c.send(line)
	m, _ := c.recvID(`"real"`)
	return m
}

// sendHTTPLegacy posts body on a new legacy HTTP session.
func sendHTTPLegacy(t *testing.T, tp *testPool, body string) msg {
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	c.initialize("c")
	return postWithin(t, c.url, body, "Mcp-Session-Id", c.sid)
}

// sendHTTPModern posts body as a 2026-07-28 request.
func sendHTTPModern(t *testing.T, tp *testPool, body string) msg {
	return postWithin(t, newHTTPFront(t, tp)+"/mcp/srv", body)
}

// postWithin posts body and decodes its JSON answer, failing the test if
// none comes within 15 s (a smuggled line can leave the real one without
// an answer).
func postWithin(t *testing.T, url, body string, header ...string) msg {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	mirrorModernHeaders(req.Header, body)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m msg
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer %s %q: %v", resp.Status, b, err)
	}
	m.raw = string(b)
	return m
}
