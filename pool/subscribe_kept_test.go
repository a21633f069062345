//go:build unix

package pool_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
