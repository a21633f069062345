//go:build unix

package pool_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// childGot reports whether the fake's -log at path shows a tools/call
// whose arguments' text is text.
func childGot(t *testing.T, path, text string) bool {
	t.Helper()
	for _, m := range childLog(t, path) {
		params, _ := m["params"].(map[string]any)
		args, _ := params["arguments"].(map[string]any)
		if m["method"] == "tools/call" && args["text"] == text {
			return true
		}
	}
	return false
}

// pausedReplayPool starts a pool of server whose replay of what a roots
// answer held stops after it takes its first message, until resume;
// taken is closed when it stops. Held messages wait rootsAsk for the
// client's answer.
func pausedReplayPool(t *testing.T, rootsAsk time.Duration, rec *recorder, server pool.ServerConfig) (tp *testPool, taken <-chan struct{}, resume func()) {
	t.Helper()
	t.Cleanup(pool.SetRootsAskTimeout(rootsAsk))
	taken, resume, restore := pool.PauseReplaying()
	t.Cleanup(restore)
	tp = newTestPool(t, &pool.Options{Record: rec.record}, server)
	t.Cleanup(resume) // before the pool closes: the replay must not stay paused
	return tp, taken, resume
}

// cancelAsReplayTakes cancels the held request id (what names it in
// failures: "call", "request") as the user does, at the moment the replay
// that c's answer to ask starts has taken it, then lets the replay go on
// and checks id's answer: -32007, mayHaveExecuted false. It returns the
// request as it was in flight.
func cancelAsReplayTakes(t *testing.T, tp *testPool, taken <-chan struct{}, resume func(), c *client, ask msg, id, what string) pool.RequestInfo {
	t.Helper()
	var held pool.RequestInfo
	eventually(t, "the held "+what+" in flight", func() (ok bool) { held, ok = heldInFlight(tp, id); return ok })

	c.answerRootsAsk(ask)
	select { // the replay took the request, and waits
	case <-taken:
	case <-time.After(15 * time.Second):
		t.Fatalf("the held %s was not replayed", what)
	}
	if err := tp.Cancel(held.PoolID); err != nil {
		t.Errorf("cancel of the %s the replay has in hand: %v", what, err)
	}
	resume()

	m, _ := c.recvID(id)
	if code, data := errorData(t, m); code != -32007 || *data.MayHaveExecuted {
		t.Errorf("the cancelled %s's answer: %s; want -32007, mayHaveExecuted false", what, m.raw)
	}
	return held
}

// A user's cancel (the dashboard's Cancel on an In flight row) of a call
// held for its client's roots answer, coming as the answer's replay has
// taken the call from the held messages and before the call is in a
// request table, ends it as a cancel of a held call does: once, -32007,
// mayHaveExecuted false, never written to the child. Before, the cancel
// found the call in neither place and answered "not found", and the
// call then ran.
func TestUserCancelsACallAsItsHoldEnds(t *testing.T) {
	var rec recorder
	logPath := filepath.Join(shortTempDir(t), "child.log")
	// The hold ends when the client answers.
	tp, taken, resume := pausedReplayPool(t, time.Minute, &rec, fake("fs", "-log", logPath))

	c := tp.dial(t, "fs")
	ask := c.initRootsAsked("a")
	c.call(`"c"`, "echo", `{"text":"cancelled"}`)
	held := cancelAsReplayTakes(t, tp, taken, resume, c, ask, `"c"`, "call")
	if err := tp.Cancel(held.PoolID); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("a second cancel of the call: %v, want not found", err)
	}
	// A call behind it runs: the child, which reads in order, would have
	// had the cancelled one before it.
	c.call(`"d"`, "echo", `{"text":"after"}`)
	m, other := c.recvID(`"d"`)
	if m.text() != "after" {
		t.Fatalf("the call after the cancelled one: %s", m.raw)
	}
	for _, o := range other {
		if string(o.ID) == `"c"` {
			t.Errorf("the cancelled call was answered again: %s", o.raw)
		}
	}
	if childGot(t, logPath, "cancelled") {
		t.Error("the child was written the cancelled call")
	}
	rec.waitFor(t, "the call after it in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestDone && e.Method == "tools/call" && e.Status == pool.StatusOK
	})
	done := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.PoolID == held.PoolID })
	if len(done) != 1 || done[0].Status != pool.StatusCancelled || done[0].Written || done[0].ErrCode != -32007 {
		t.Errorf("the cancelled call's ends in history: %+v; want one, cancelled, not written, -32007", done)
	}
	if w := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestWritten && e.PoolID == held.PoolID }); len(w) != 0 {
		t.Errorf("history says the cancelled call was written: %+v", w)
	}
}

// The same cancel of a request that goes on to wait for its child's
// handshake (a logging/setLevel, for a child still starting) ends its
// wait as it would begin: -32007, mayHaveExecuted false, one end in
// history.
func TestUserCancelsAWaitAsItsHoldEnds(t *testing.T) {
	var rec recorder
	gate := filepath.Join(t.TempDir(), "starting")
	// The hold ends when the client answers.
	tp, taken, resume := pausedReplayPool(t, time.Minute, &rec, fake("fs", "-start-while", gate))

	c := tp.dial(t, "fs")
	ask := c.initRootsAsked("a") // on a child that starts at once
	// The next child is held in its start: the request waits for it.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tp.Stop("fs"); err != nil {
		t.Fatal(err)
	}
	c.send(`{"jsonrpc":"2.0","id":"l","method":"logging/setLevel","params":{"level":"debug"}}`)
	held := cancelAsReplayTakes(t, tp, taken, resume, c, ask, `"l"`, "request")
	rec.waitFor(t, "the request's end in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestDone && e.PoolID == held.PoolID
	})
	if _, still := heldInFlight(tp, `"l"`); still {
		t.Errorf("the cancelled request is still in flight: %+v", tp.Snapshot().InFlight)
	}
	done := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.PoolID == held.PoolID })
	if len(done) != 1 || done[0].Status != pool.StatusCancelled || done[0].ErrCode != -32007 {
		t.Errorf("the cancelled request's ends in history: %+v; want one, cancelled, -32007", done)
	}
}

// A client's notifications/cancelled of a call held for its roots answer
// ends it, never written to the child, whether the call is still held or
// the replay of what was held (here on the ask's timer, the reader
// reading on) has taken it and not yet sent it on. Its client gets no
// answer (MCP: a cancelled request is not answered); history records one
// end, cancelled. Before, the cancel waited behind the call, which went
// on to the child, ran, and was answered before the cancel came to it.
func TestClientCancelsACallHeldForRoots(t *testing.T) {
	var rec recorder
	logPath := filepath.Join(shortTempDir(t), "child.log")
	tp, taken, resume := pausedReplayPool(t, 500*time.Millisecond, &rec, fake("fs", "-log", logPath))

	c := tp.dial(t, "fs")
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"a","version":"1"}}}`)
	c.recvID(`"init"`)
	// One write: the reader holds the calls and h's cancel at once, well
	// before the ask that initialized starts times out.
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"echo","arguments":{"text":"taken"}}}`,
		`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"echo","arguments":{"text":"held"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"h","reason":"gave up"}}`)
	c.rootsAsk()
	select { // the ask timed out; the replay took w, and waits
	case <-taken:
	case <-time.After(15 * time.Second):
		t.Fatal("the held call was not replayed")
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"w","reason":"gave up"}}`,
		`{"jsonrpc":"2.0","id":"p","method":"ping"}`) // answered at once: the cancel before it was read
	c.recvID(`"p"`)
	resume()

	var ids []uint64
	for _, id := range []string{`"w"`, `"h"`} {
		r := rec.waitFor(t, "the call's arrival in history", func(e pool.Event) bool {
			return e.Kind == pool.EventRequestReceived && e.OriginalID == id
		})
		e := rec.waitFor(t, "the cancelled call's end in history", func(e pool.Event) bool {
			return e.Kind == pool.EventRequestDone && e.PoolID == r.PoolID
		})
		if e.Status != pool.StatusCancelled || e.Written {
			t.Errorf("the call %s ended %+v; want cancelled, not written", id, e)
		}
		ids = append(ids, r.PoolID)
	}
	// A call behind them runs: the child, which reads in order, would
	// have had the cancelled ones before it.
	c.call(`"d"`, "echo", `{"text":"after"}`)
	m, other := c.recvID(`"d"`)
	if m.text() != "after" {
		t.Fatalf("the call after the cancelled ones: %s", m.raw)
	}
	for _, o := range other {
		if string(o.ID) == `"w"` || string(o.ID) == `"h"` {
			t.Errorf("a call its client cancelled was answered: %s", o.raw)
		}
	}
	for _, text := range []string{"taken", "held"} {
		if childGot(t, logPath, text) {
			t.Errorf("the child was written the cancelled call %q", text)
		}
	}
	for _, id := range ids {
		if done := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.PoolID == id }); len(done) != 1 {
			t.Errorf("the call %d ended %d times in history: %+v", id, len(done), done)
		}
	}
}
