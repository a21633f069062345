package pool_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/mcptest"
)

func TestMain(m *testing.M) {
	if sock := os.Getenv(puppetEnv); sock != "" {
		os.Exit(runPuppet(sock)) // a routing case's child (routing_cases_test.go)
	}
	if sock := os.Getenv(otherShimEnv); sock != "" {
		os.Exit(runOtherShim(sock)) // a shim in a process of its own (resumepeer_test.go)
	}
	dir, err := os.MkdirTemp("", "fakemcp")
	if err != nil {
		panic(err)
	}
	fakeBin, err = mcptest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build fake MCP server:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// goleak exits from inside VerifyTestMain, so the directory goes in
	// its cleanup, which must then exit itself.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// Problem 1 of DESIGN.md: every client numbers its requests from 1. With
// 64 sessions x 8 in flight, ids colliding across sessions, numeric and
// string ids mixed, every answer must reach the session that asked, under
// its exact original id, once.
func TestCollidingIDsRouteToTheirSession(t *testing.T) {
	tp := newTestPool(t, nil, fake("echo"))
	const sessions, inflight, rounds = 64, 8, 3
	clients := make([]*client, sessions)
	for i := range clients {
		clients[i] = tp.dial(t, "echo")
		clients[i].initialize(fmt.Sprintf("client-%d", i), "")
	}
	idForms := []func(int) string{
		func(k int) string { return fmt.Sprint(k) },          // 1
		func(k int) string { return fmt.Sprintf(`"%d"`, k) }, // "1"
		func(k int) string { return fmt.Sprintf("%d.0", k) }, // 1.0
		func(k int) string { return fmt.Sprintf(`"req-%d"`, k) },
	}
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			for r := range rounds {
				want := map[string]string{}
				for k := 1; k <= inflight; k++ {
					id := idForms[(k+i)%len(idForms)](k)
					payload := fmt.Sprintf("s%d-r%d-k%d", i, r, k)
					want[id] = payload
					if k%2 == 0 {
						c.call(id, "sleep_echo", fmt.Sprintf(`{"ms":%d,"text":%q}`, rand.IntN(20), payload))
					} else {
						c.call(id, "echo", fmt.Sprintf(`{"text":%q}`, payload))
					}
				}
				for range inflight {
					m := c.recv()
					want1, ok := want[string(m.ID)]
					if !ok {
						t.Errorf("session %d got a response with id %s it did not send or already got: %s", i, m.ID, m.raw)
						return
					}
					delete(want, string(m.ID))
					if got := m.text(); got != want1 {
						t.Errorf("session %d id %s: got %q, want %q (misrouted)", i, m.ID, got, want1)
					}
				}
			}
		})
	}
	wg.Wait()
	// Nothing extra arrives: a ping is answered next, with nothing before it.
	for i, c := range clients {
		c.send(`{"jsonrpc":"2.0","id":"barrier","method":"ping"}`)
		if _, extra := c.recvID(`"barrier"`); len(extra) > 0 {
			t.Errorf("session %d got %d unexpected messages: %s", i, len(extra), extra[0].raw)
		}
	}
	snap := tp.Snapshot()
	if len(snap.Backends) != 1 {
		t.Fatalf("want one shared child, got %d backends", len(snap.Backends))
	}
	if snap.Counters.Orphaned != 0 {
		t.Errorf("orphaned responses: %d", snap.Counters.Orphaned)
	}
}

// The pool initializes each child once and answers every client's
// initialize from the cached result.
func TestInitializeOncePerChild(t *testing.T) {
	log := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", log))
	for i := range 5 {
		c := tp.dial(t, "srv")
		res := c.initialize(fmt.Sprintf("c%d", i), "")
		var r struct {
			ProtocolVersion string         `json:"protocolVersion"`
			ServerInfo      map[string]any `json:"serverInfo"`
		}
		if err := json.Unmarshal(res.Result, &r); err != nil || r.ProtocolVersion != "2025-11-25" || r.ServerInfo["name"] != "fakemcp" {
			t.Fatalf("initialize result: %s", res.raw)
		}
		c.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if m, _ := c.recvID("1"); m.Error != nil {
			t.Fatalf("ping: %s", m.raw)
		}
	}
	eventually(t, "the child to see notifications/initialized", func() bool {
		return countMethod(childLog(t, log), "notifications/initialized") > 0
	})
	got := childLog(t, log)
	if n := countMethod(got, "initialize"); n != 1 {
		t.Errorf("child saw %d initialize requests, want 1", n)
	}
	if n := countMethod(got, "notifications/initialized"); n != 1 {
		t.Errorf("child saw %d initialized notifications, want 1", n)
	}
	if n := countMethod(got, "ping"); n != 0 {
		t.Errorf("child saw %d pings; the pool answers them", n)
	}
}

// Two sessions using the same progress token each receive only their own
// progress, with their own token restored.
func TestProgressTokensDoNotCross(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	const n = 16
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = tp.dial(t, "srv")
		clients[i].initialize("c", "")
	}
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			steps := 3 + i%4
			c.sendf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"progress","arguments":{"steps":%d,"ms":1},"_meta":{"progressToken":"tok"}}}`, steps)
			res, other := c.recvID("7")
			if res.Error != nil {
				t.Errorf("session %d: %s", i, res.raw)
				return
			}
			if len(other) != steps {
				t.Errorf("session %d: got %d progress notifications, want %d", i, len(other), steps)
			}
			for _, m := range other {
				var p struct {
					Token json.RawMessage `json:"progressToken"`
					Total float64         `json:"total"`
				}
				_ = json.Unmarshal(m.Params, &p)
				if m.Method != "notifications/progress" || string(p.Token) != `"tok"` || int(p.Total) != steps {
					t.Errorf("session %d got foreign or rewritten progress: %s", i, m.raw)
				}
			}
		})
	}
	wg.Wait()
}

// A cancelled request is cancelled at the child under the pool's id, and
// the client gets nothing for it.
func TestClientCancelReachesChild(t *testing.T) {
	log := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", log))
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	c.call(`"slow"`, "sleep", `{"ms":30000}`)
	eventually(t, "the call to reach the child", func() bool {
		s := tp.Snapshot()
		return len(s.InFlight) == 1 && s.InFlight[0].WrittenToChild
	})
	poolID := tp.Snapshot().InFlight[0].PoolID
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"user"}}`)
	eventually(t, "the child to see the cancellation", func() bool {
		for _, m := range childLog(t, log) {
			if m["method"] == "notifications/cancelled" {
				p := m["params"].(map[string]any)
				return p["requestId"] == float64(poolID)
			}
		}
		return false
	})
	c.send(`{"jsonrpc":"2.0","id":"barrier","method":"ping"}`)
	if _, extra := c.recvID(`"barrier"`); len(extra) > 0 {
		t.Errorf("cancelled request was answered: %s", extra[0].raw)
	}
	if n := len(tp.Snapshot().InFlight); n != 0 {
		t.Errorf("%d requests still in flight", n)
	}
}

// A session that disconnects mid-call causes notifications/cancelled at the
// child, and the child's late answer reaches nobody: in particular it is
// never broadcast to the other sessions.
func TestDisconnectCancelsAndLateAnswersGoNowhere(t *testing.T) {
	log := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", log))
	const n = 16
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = tp.dial(t, "srv")
		clients[i].initialize("c", "")
	}
	// Half the sessions start calls the child answers late, even after a
	// cancellation, then vanish.
	for i := range n / 2 {
		clients[i].call("1", "sleep", `{"ms":300,"ignoreCancel":true}`)
	}
	eventually(t, "8 calls written", func() bool {
		w := 0
		for _, r := range tp.Snapshot().InFlight {
			if r.WrittenToChild {
				w++
			}
		}
		return w == n/2
	})
	for i := range n / 2 {
		clients[i].close()
	}
	eventually(t, "8 cancellations at the child", func() bool { return countMethod(childLog(t, log), "notifications/cancelled") == n/2 })
	eventually(t, "8 late answers counted as orphans", func() bool { return tp.Snapshot().Counters.Orphaned == n/2 })
	for i := n / 2; i < n; i++ {
		c := clients[i]
		c.call("1", "echo", fmt.Sprintf(`{"text":"mine-%d"}`, i))
		m, extra := c.recvID("1")
		if m.text() != fmt.Sprintf("mine-%d", i) || len(extra) > 0 {
			t.Errorf("session %d got %s (and %d others): a late answer leaked", i, m.raw, len(extra))
		}
	}
}

// Notifications without an id are never broadcast blindly: log messages go
// only to sessions that asked for them, progress only to its owner.
func TestLogMessagesOnlyToSessionsThatAsked(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
	a.initialize("a", "")
	b.initialize("b", "")
	a.send(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`)
	if m, _ := a.recvID("1"); m.Error != nil {
		t.Fatal(m.raw)
	}
	b.call("2", "log", `{"level":"info","data":"hello"}`)
	if m, extra := b.recvID("2"); m.Error != nil || len(extra) > 0 {
		t.Fatalf("b got %s and %d notifications it did not ask for", m.raw, len(extra))
	}
	m := a.recv()
	if m.Method != "notifications/message" {
		t.Fatalf("a: want the log message, got %s", m.raw)
	}
}

// list_changed goes to every session of the server.
func TestListChangedFansOut(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"), fake("other"))
	a, b, o := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "other")
	for _, c := range []*client{a, b, o} {
		c.initialize("c", "")
	}
	a.call("1", "notify", `{"kind":"tools"}`)
	_, got := a.recvID("1")
	if len(got) != 1 || got[0].Method != "notifications/tools/list_changed" {
		t.Fatalf("a: %v", got)
	}
	if m := b.recv(); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("b: %s", m.raw)
	}
	o.send(`{"jsonrpc":"2.0","id":"barrier","method":"ping"}`)
	if _, extra := o.recvID(`"barrier"`); len(extra) > 0 {
		t.Errorf("a session of another server got %s", extra[0].raw)
	}
}

// A server-to-client request goes to the session whose call asks, when it
// can answer it, under a pool id, and the answer returns to the child
// under the child's id; another session, whose client declared nothing,
// is not in the way.
func TestServerToClientRequestRoundTrip(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	plain, sampler := tp.dial(t, "srv"), tp.dial(t, "srv")
	plain.initialize("plain", "")
	sampler.initialize("sampler", `{"sampling":{}}`)
	sampler.call("1", "ask", `{"kind":"sampling"}`)
	req := sampler.recv()
	if req.Method != "sampling/createMessage" {
		t.Fatalf("sampler got %s", req.raw)
	}
	if strings.Contains(string(req.ID), "srv-") {
		t.Errorf("the child's id leaked to the client: %s", req.ID)
	}
	sampler.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`, req.ID)
	res, _ := sampler.recvID("1")
	if !strings.Contains(res.text(), "forty-two") {
		t.Fatalf("tool result: %s", res.raw)
	}
}

// With no session able to answer, the child gets an error at once.
func TestServerToClientRequestWithoutClient(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	c.call("1", "ask", `{"kind":"elicitation"}`)
	res, _ := c.recvID("1")
	if !strings.Contains(res.raw, "no connected client") {
		t.Fatalf("want the child to report the pool's error, got %s", res.raw)
	}
}

// A malformed line gets a parse error for that client only; an oversize
// message is refused with a clear error; the pool keeps serving.
func TestMalformedAndOversizeInput(t *testing.T) {
	tp := newTestPool(t, &pool.Options{MaxMessageBytes: 4096}, fake("srv"))
	bad, good := tp.dial(t, "srv"), tp.dial(t, "srv")
	bad.initialize("bad", "")
	good.initialize("good", "")
	bad.send(`{"jsonrpc":"2.0","id":1,"method":`)
	m := bad.recv()
	if m.Error == nil || m.Error.Code != -32700 || string(m.ID) != "null" {
		t.Fatalf("want -32700 with id null, got %s", m.raw)
	}
	bad.send(`{"jsonrpc":"1.0","id":2,"method":"ping"}`)
	if m := bad.recv(); m.Error == nil || m.Error.Code != -32600 || string(m.ID) != "2" {
		t.Fatalf("want -32600 for id 2, got %s", m.raw)
	}
	bad.call("3", "echo", fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", 10000)))
	if m := bad.recv(); m.Error == nil || m.Error.Code != -32005 || string(m.ID) != "3" || !strings.Contains(m.Error.Message, "limit") {
		t.Fatalf("want -32005 for id 3, got %s", m.raw)
	}
	bad.call("4", "echo", `{"text":"still here"}`)
	if m, _ := bad.recvID("4"); m.text() != "still here" {
		t.Fatalf("after bad input: %s", m.raw)
	}
	good.send(`{"jsonrpc":"2.0","id":"barrier","method":"ping"}`)
	if _, extra := good.recvID(`"barrier"`); len(extra) > 0 {
		t.Errorf("another session saw %s", extra[0].raw)
	}
}

// A duplicate id in flight within one session is refused, not overwritten.
func TestDuplicateInFlightIDRefused(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	c.call("9", "sleep", `{"ms":200}`)
	c.call("9", "echo", `{"text":"dup"}`)
	first := c.recv()
	if first.Error == nil || first.Error.Code != -32600 {
		t.Fatalf("want the duplicate refused first, got %s", first.raw)
	}
	if m := c.recv(); m.text() != "slept 200" {
		t.Fatalf("the original call: %s", m.raw)
	}
}

// The per-request timeout answers the client and cancels at the child.
func TestRequestTimeout(t *testing.T) {
	log := filepath.Join(shortTempDir(t), "child.log")
	cfg := fake("srv", "-log", log)
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	tp.applyRequestTimeout(t, &cfg, 200*time.Millisecond)
	c.call("1", "sleep", `{"ms":20000}`)
	m := c.recv()
	if m.Error == nil || m.Error.Code != -32001 {
		t.Fatalf("want a timeout error, got %s", m.raw)
	}
	eventually(t, "the child to see the cancellation", func() bool { return countMethod(childLog(t, log), "notifications/cancelled") == 1 })
	if tp.Snapshot().Counters.Timeouts != 1 {
		t.Errorf("timeouts counter: %+v", tp.Snapshot().Counters)
	}
}

// The timeouts share one timer per child: a call answered at once leaves
// it set for its own deadline, and a slow call made after it must still
// time out, at its own deadline, not the answered call's.
func TestTimeoutOfACallMadeAfterAnAnsweredOne(t *testing.T) {
	cfg := fake("srv")
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	tp.applyRequestTimeout(t, &cfg, 400*time.Millisecond)
	c.call(`"fast"`, "echo", `{"text":"ok"}`)
	if m, _ := c.recvID(`"fast"`); m.text() != "ok" {
		t.Fatalf("the fast call: %s", m.raw)
	}
	c.call(`"early"`, "sleep", `{"ms":20000}`)
	<-time.After(200 * time.Millisecond) // the second slow call starts half a timeout later
	start := time.Now()
	c.call(`"late"`, "sleep", `{"ms":20000}`)
	for _, id := range []string{`"early"`, `"late"`} {
		m, _ := c.recvID(id)
		if m.Error == nil || m.Error.Code != -32001 {
			t.Fatalf("call %s: want a timeout error, got %s", id, m.raw)
		}
	}
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Errorf("the late call timed out after %v, before its own 400ms", waited)
	}
	if n := tp.Snapshot().Counters.Timeouts; n != 2 {
		t.Errorf("timeouts counter %d, want 2", n)
	}
}

// A stuck child does not slow another server: while one server's calls
// hang, another server's calls are answered.
func TestStuckServerDoesNotBlockAnother(t *testing.T) {
	tp := newTestPool(t, nil, fake("stuck"), fake("fine"))
	s, f := tp.dial(t, "stuck"), tp.dial(t, "fine")
	s.initialize("s", "")
	f.initialize("f", "")
	for i := range 8 {
		s.call(fmt.Sprint(i), "sleep", `{"ms":60000}`)
	}
	for i := range 50 {
		f.call(fmt.Sprint(i), "echo", `{"text":"ok"}`)
		if m, _ := f.recvID(fmt.Sprint(i)); m.text() != "ok" {
			t.Fatalf("fine server: %s", m.raw)
		}
	}
	if n := len(tp.Snapshot().InFlight); n != 8 {
		t.Fatalf("the stuck calls should still be in flight, have %d", n)
	}
}

// A session that stops reading is evicted; the others on the same child
// keep being served.
func TestStalledReaderIsEvictedOthersUnaffected(t *testing.T) {
	tp := newTestPool(t, &pool.Options{SessionQueue: 8, EvictAfter: 300 * time.Millisecond}, fake("srv"))
	stalled := tp.dial(t, "srv")
	stalled.initialize("stalled", "")
	// From here on nothing reads the stalled client's socket.
	stalled.pause()
	others := make([]*client, 8)
	for i := range others {
		others[i] = tp.dial(t, "srv")
		others[i].initialize("other", "")
	}
	stalledSession := tp.Snapshot().Sessions[0].ID
	for i := range 64 {
		stalled.call(fmt.Sprint(i), "big", `{"bytes":262144}`)
	}
	var wg sync.WaitGroup
	for i, c := range others {
		wg.Go(func() {
			for k := range 20 {
				c.call(fmt.Sprint(k), "echo", fmt.Sprintf(`{"text":"o%d-%d"}`, i, k))
				if m, _ := c.recvID(fmt.Sprint(k)); m.text() != fmt.Sprintf("o%d-%d", i, k) {
					t.Errorf("session %d: %s", i, m.raw)
				}
			}
		})
	}
	wg.Wait()
	eventually(t, "the stalled session to be evicted", func() bool {
		for _, s := range tp.Snapshot().Sessions {
			if s.ID == stalledSession {
				return false
			}
		}
		return true
	})
	if tp.Snapshot().Counters.Evicted == 0 {
		t.Error("evicted counter not incremented")
	}
}

// An unknown server is refused at hello, naming the configured ones.
func TestUnknownServerRefused(t *testing.T) {
	tp := newTestPool(t, nil, fake("a"), fake("b"))
	_, err := tp.tryDial(t, "nope")
	if err == nil || !strings.Contains(err.Error(), `no such server \"nope\" (configured: a, b)`) {
		t.Fatalf("got %v", err)
	}
}

// A session refused for a server the pool does not run, while the config
// file does not load, is told so: the server it names may be in the file.
// (A pool that started on a broken file runs no servers: "no such server"
// alone sent the user looking in the wrong place.)
func TestUnknownServerRefusedNamesABrokenConfig(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	tp := newTestPool(t, &pool.Options{ConfigProblem: func() error {
		if broken.Load() {
			return errors.New(`config.json:3: expected a quoted key`)
		}
		return nil
	}})
	_, err := tp.tryDial(t, "memory")
	if err == nil || !strings.Contains(err.Error(), `no such server \"memory\" (no servers are configured)`) ||
		!strings.Contains(err.Error(), "the config file does not load") || !strings.Contains(err.Error(), "expected a quoted key") {
		t.Fatalf("got %v", err)
	}
	broken.Store(false)
	if _, err := tp.tryDial(t, "memory"); err == nil || strings.Contains(err.Error(), "does not load") {
		t.Fatalf("with the file fixed: %v", err)
	}
}

// A modern (2026-07-28) child: the pool discovers it once, presents it to
// a legacy client through initialize and adds the _meta each forwarded
// request needs; a modern client's server/discover is answered from cache.
func TestModernChildServesBothEras(t *testing.T) {
	log := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", log))
	legacy := tp.dial(t, "srv")
	res := legacy.initialize("old-client", "")
	if !strings.Contains(string(res.Result), `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize from a modern child: %s", res.raw)
	}
	legacy.call("1", "echo", `{"text":"hi"}`)
	if m, _ := legacy.recvID("1"); m.text() != "hi" {
		t.Fatalf("call: %s", m.raw)
	}
	modern := tp.dial(t, "srv")
	modern.send(`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	if m, _ := modern.recvID(`"d"`); !strings.Contains(string(m.Result), `"supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2024-11-05"]`) {
		t.Fatalf("discover: %s", m.raw)
	}
	var call map[string]any
	for _, m := range childLog(t, log) {
		if m["method"] == "tools/call" {
			call = m
		}
	}
	meta, _ := call["params"].(map[string]any)["_meta"].(map[string]any)
	if meta["io.modelcontextprotocol/protocolVersion"] != "2026-07-28" || meta["io.modelcontextprotocol/clientInfo"] == nil {
		t.Fatalf("the child got no modern _meta: %v", call)
	}
	if n := countMethod(childLog(t, log), "server/discover"); n != 1 {
		t.Errorf("child saw %d discovers, want 1", n)
	}
	if tp.Snapshot().Backends[0].Era != "modern" {
		t.Errorf("era: %+v", tp.Snapshot().Backends[0])
	}
}
