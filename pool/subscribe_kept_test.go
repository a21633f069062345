//go:build unix

package pool_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// keptAtFarewell reads a's shim connection to the Farewell, keeping the
// subscriptions its State lines tell as the shim does (app/shim's
// kept.note), from kept, and returns what it keeps then, and the client's
// initialize.
func keptAtFarewell(t *testing.T, a *attached, kept ...string) (subs []string, init []byte) {
	t.Helper()
	held := map[string]bool{}
	for _, uri := range kept {
		held[uri] = true
	}
	_ = a.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		line, err := a.shim.ReadBytes('\n')
		if err != nil {
			t.Fatalf("the shim's connection ended before the Farewell: %v", err)
		}
		var st struct {
			End *string `json:"end"`
			wire.State
		}
		if err := json.Unmarshal(line, &st); err != nil {
			t.Fatalf("the shim was sent %q: %v", line, err)
		}
		switch {
		case st.End != nil:
			return slices.Sorted(maps.Keys(held)), init
		case st.Initialize != nil:
			init = st.Initialize
		case st.Unsubscribed != nil:
			delete(held, *st.Unsubscribed)
		case st.Subscribed != nil:
			held[*st.Subscribed] = true
		}
	}
}

// stopKept closes tp, as a stop does, and returns what a's shim keeps then.
func stopKept(t *testing.T, tp *testPool, a *attached, kept ...string) (subs []string, init []byte) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tp.Close()
	}()
	defer func() { <-done }()
	return keptAtFarewell(t, a, kept...)
}

// A subscribe the child refused is not kept by the shim, and the next
// pool does not subscribe the session to it: its client gets no update
// of a resource whose subscribe it was told failed. (The shim was told
// of it before the child's answer, and never told it was not held.)
func TestRefusedSubscribeIsNotKeptForAResume(t *testing.T) {
	gate := filepath.Join(shortTempDir(t), "refuse")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fake("srv", "-refuse-subscribe", "fake://counter", "-refuse-while", gate)
	tp := newTestPool(t, &pool.Options{StopGrace: time.Second, RunID: "run1"}, cfg)
	a := tp.attach(t, "srv")
	a.initialize()
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if got := a.roundTrip(`{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":"fake://counter"}}`); !strings.Contains(got, `"error"`) {
		t.Fatalf("the subscribe got %s, want the child's refusal", got)
	}
	kept, init := stopKept(t, tp, a)
	if len(kept) > 0 {
		t.Errorf("the shim keeps %q, whose subscribe the child refused", kept)
	}
	os.Remove(gate) // the resource exists now

	tp2 := newTestPool(t, &pool.Options{RunID: "run2"}, cfg)
	hello, _ := json.Marshal(pool.Hello{Server: "srv", Attach: true,
		Resume: &wire.Resume{Run: "run1", Session: "1", Initialize: init, Subscriptions: kept}})
	b := tp2.attachHello(t, hello, nil, nil)
	b.send(`{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"name":"notify","arguments":{"kind":"updated"}}}`)
	for {
		m := b.next(t)
		if m.Method == "notifications/resources/updated" {
			t.Errorf("after the resume the client got %s, of a resource whose subscribe was refused", m.raw)
		}
		if string(m.ID) == `"n"` {
			break
		}
	}
}

// A resume that takes up only some of the session's subscriptions (past
// its share) tells the shim it keeps the others no longer: the client's
// unsubscribe of one, no change for the pool, would not, and the shim
// would carry it into every later resume.
func TestResumeTellsTheShimWhatItDidNotTakeUp(t *testing.T) {
	tp := newTestPool(t, &pool.Options{StopGrace: time.Second, MaxSessionSubscriptions: 1}, fake("srv"))
	init := []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"1"}}`)
	resumed := []string{"fake://a", "fake://b"}
	hello, _ := json.Marshal(pool.Hello{Server: "srv", Attach: true,
		Resume: &wire.Resume{Run: "earlier", Session: "s1", Initialize: init, Subscriptions: resumed}})
	a := tp.attachHello(t, hello, nil, nil)
	if got := a.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"resources/unsubscribe","params":{"uri":"fake://b"}}`); !strings.Contains(got, `"result":{}`) {
		t.Fatalf("the unsubscribe got %s", got)
	}
	if kept, _ := stopKept(t, tp, a, resumed...); !slices.Equal(kept, []string{"fake://a"}) {
		t.Errorf("the shim keeps %q, want only the subscription the resume took up", kept)
	}
}

// A subscribe that timed out is not kept by the shim: the session holds
// nothing of it, and the next pool does not subscribe it.
func TestSubscribeThatTimedOutIsNotKeptForAResume(t *testing.T) {
	cfg := fake("srv", "-subscribe-delay", "1m")
	tp := newTestPool(t, &pool.Options{StopGrace: time.Second}, cfg)
	a := tp.attach(t, "srv")
	a.initialize()
	tp.applyRequestTimeout(t, &cfg, 300*time.Millisecond)
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if got := a.roundTrip(`{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":"fake://counter"}}`); !strings.Contains(got, `"code":-32001`) {
		t.Fatalf("the subscribe got %s, want the timeout", got)
	}
	if kept, _ := stopKept(t, tp, a); len(kept) > 0 {
		t.Errorf("the shim keeps %q, whose subscribe timed out", kept)
	}
}

// A subscription the pool drops (the child refused it) and the client's
// subscribe of it again, made while the drop is being told to the shim,
// reach the shim in the order they were made: it keeps what the session
// holds. (Each was told after the session's lock was released: the
// drop's line could follow the subscribe's, and a resume after a crash
// lose the subscription.)
func TestShimHearsSubscriptionChangesInTheirOrder(t *testing.T) {
	for _, shim := range []string{"attached", "relayed"} {
		t.Run(shim, func(t *testing.T) {
			dir := shortTempDir(t)
			logPath := filepath.Join(dir, "child.log")
			gate := filepath.Join(dir, "refuse")
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			reached, unblock := make(chan struct{}), make(chan struct{})
			release := sync.OnceFunc(func() { close(unblock) })
			var once sync.Once
			t.Cleanup(pool.SetKeptHook(func(st wire.State) {
				if st.Unsubscribed != nil {
					once.Do(func() { // the drop waits for the client's subscribe again
						close(reached)
						<-unblock
					})
				}
			}))
			cfg := fake("srv", "-log", logPath, "-refuse-subscribe", "fake://counter", "-refuse-while", gate)
			tp := newTestPool(t, &pool.Options{StopGrace: time.Second}, cfg)
			t.Cleanup(release) // before the pool closes
			var send func(string)
			var kept func() []string // what the shim keeps once both subscribes are answered
			if shim == "attached" {
				a := tp.attach(t, "srv")
				a.initialize()
				send = a.send
				kept = func() []string {
					answered(t, a.next)
					subs, _ := stopKept(t, tp, a)
					return subs
				}
			} else {
				send, kept = relayedKept(t, tp)
			}
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			send(`{"jsonrpc":"2.0","id":"refused","method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
			select {
			case <-reached:
			case <-time.After(15 * time.Second):
				t.Fatal("the child's refusal was not dropped")
			}
			if err := os.Remove(gate); err != nil {
				t.Fatal(err)
			}
			send(`{"jsonrpc":"2.0","id":"again","method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
			eventually(t, "the subscribe again at the child", func() bool { return countInLog(t, logPath, "resources/subscribe") == 2 })
			release()
			if got := kept(); !slices.Equal(got, []string{"fake://counter"}) {
				t.Errorf("the shim keeps %q, want the subscription the session holds", got)
			}
		})
	}
}

// answered reads the client's messages from next until the subscribes
// "refused" (the child's refusal) and "again" ({}) are answered.
func answered(t *testing.T, next func(*testing.T) msg) {
	t.Helper()
	for n := 0; n < 2; {
		m := next(t)
		switch string(m.ID) {
		case `"refused"`:
			if m.Error == nil {
				t.Fatalf("the first subscribe got %s, want the child's refusal", m.raw)
			}
			n++
		case `"again"`:
			if m.Error != nil {
				t.Fatalf("the subscribe again got %s, want {}", m.raw)
			}
			n++
		}
	}
}

// relayedKept starts an initialized session with tp's "srv" whose shim
// relays, and returns how to send it a line and what its shim keeps (the
// subscriptions its stream's State lines tell) once the subscribes
// "refused" and "again" are answered.
func relayedKept(t *testing.T, tp *testPool) (send func(string), kept func() []string) {
	conn, err := net.Dial("unix", tp.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	br := bufio.NewReader(conn)
	send = func(line string) {
		if _, err := conn.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	held := map[string]bool{}
	next := func(t *testing.T) msg {
		t.Helper()
		for {
			_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
			line, err := br.ReadBytes('\n')
			if err != nil {
				t.Fatalf("the stream ended: %q, %v", line, err)
			}
			if len(line) > 0 && line[0] == wire.Control {
				var st wire.State
				if err := json.Unmarshal(line[1:], &st); err != nil {
					t.Fatalf("the stream carried %q: %v", line, err)
				}
				switch {
				case st.Unsubscribed != nil:
					delete(held, *st.Unsubscribed)
				case st.Subscribed != nil:
					held[*st.Subscribed] = true
				}
				continue
			}
			m := msg{raw: string(bytes.TrimSpace(line))}
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatalf("the client got %q: %v", line, err)
			}
			return m
		}
	}
	send(`{"server":"srv","resumable":true}`)
	if line, err := br.ReadBytes('\n'); err != nil || !strings.Contains(string(line), `"session"`) {
		t.Fatalf("welcome: %q, %v", line, err)
	}
	send(`{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":` + keptInitParams + `}`)
	if m := next(t); string(m.ID) != `"init-1"` || m.Error != nil {
		t.Fatalf("initialize answered %s", m.raw)
	}
	return send, func() []string {
		answered(t, next)
		return slices.Sorted(maps.Keys(held))
	}
}
