//go:build unix

package pool_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

const initializeLine = `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`

// A client's initialize that waits for its child to start is in flight
// like any request: the snapshot (status, hangs, the dashboard) lists it
// on the starting child, not written to it, and history records it and
// how it ended. (It was answered from the child's handshake unseen: a
// client stuck at initialize showed "nothing in flight".)
func TestInitializeWaitingForItsChildIsInFlight(t *testing.T) {
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record}, fake("slow", "-startup-delay", "2s"))
	c := tp.dial(t, "slow")
	c.send(initializeLine)
	var r pool.RequestInfo
	eventually(t, "the initialize in flight on the starting child", func() bool {
		snap := tp.Snapshot()
		if len(snap.InFlight) != 1 || len(snap.Backends) != 1 {
			return false
		}
		r = snap.InFlight[0]
		return r.PID != 0 && r.PID == snap.Backends[0].PID
	}, func() string { return fmt.Sprintf("%+v", tp.Snapshot().InFlight) })
	if sess := tp.Snapshot().Sessions[0].ID; r.Method != "initialize" || r.OriginalID != "7" || r.WrittenToChild ||
		r.Session != sess || r.Server != "slow" {
		t.Errorf("in flight: %+v; want session %s's initialize 7 on server slow, not written", r, sess)
	}
	if m, _ := c.recvID("7"); m.Error != nil || !strings.Contains(string(m.Result), `"protocolVersion"`) {
		t.Fatalf("initialize: %s", m.raw)
	}
	eventually(t, "nothing in flight once it is answered", func() bool { return len(tp.Snapshot().InFlight) == 0 })
	got := rec.waitFor(t, "the initialize received, in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestReceived && e.PoolID == r.PoolID
	})
	if got.Method != "initialize" || got.OriginalID != "7" {
		t.Errorf("received: %+v", got)
	}
	done := rec.waitFor(t, "the initialize's end, in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestDone && e.PoolID == r.PoolID
	})
	if done.Status != pool.StatusOK || done.Written || done.Method != "initialize" {
		t.Errorf("done: %+v; want ok, not written", done)
	}
	// The next session's initialize has the handshake at once: nothing
	// waits, nothing is recorded.
	c2 := tp.dial(t, "slow")
	c2.initialize("c2", "")
	if n := len(rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestReceived })); n != 1 {
		t.Errorf("%d requests received in history, want the first initialize alone", n)
	}
}

// A child that never answers its handshake: the client's initialize ends
// at the request timeout (-32001) and history records it as timed out,
// while the backend still says it waits for its handshake, and since
// when, until the handshake timeout (here an hour) restarts it. (Its
// lastError says nothing until then: the status showed a "starting"
// child and no reason.)
func TestHandshakeWaitIsShownAndItsInitializeTimesOut(t *testing.T) {
	var rec recorder
	cfg := fake("mute", "-no-init")
	cfg.RequestTimeout = time.Second
	tp := newTestPool(t, &pool.Options{Record: rec.record, HandshakeTimeout: time.Hour}, cfg)
	c := tp.dial(t, "mute")
	c.send(initializeLine)
	m := c.recv()
	if m.Error == nil || m.Error.Code != -32001 || !strings.Contains(m.Error.Message, "did not finish starting") {
		t.Fatalf("want -32001 did not finish starting, got %s", m.raw)
	}

	// status --json's backend, as the client's error sends the user to it.
	var b struct {
		State           string `json:"state"`
		StateReason     string `json:"stateReason"`
		HandshakeWaitMs *int64 `json:"handshakeWaitMs"`
	}
	var raw []byte
	eventually(t, "the backend waiting for its handshake for a second", func() bool {
		raw, _ = json.Marshal(backendInfo(tp, "mute"))
		b.HandshakeWaitMs = nil
		return json.Unmarshal(raw, &b) == nil && b.HandshakeWaitMs != nil && *b.HandshakeWaitMs >= 1000
	}, func() string { return string(raw) })
	if b.State != pool.StateStarting || !strings.Contains(b.StateReason, "handshake") || !strings.Contains(b.StateReason, "1h0m0s") {
		t.Errorf("backend: %s; want starting, with a stateReason naming the handshake and its timeout", raw)
	}

	done := rec.waitFor(t, "the initialize's end, in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestDone && e.Method == "initialize"
	})
	if done.Status != pool.StatusTimeout || done.ErrCode != -32001 || done.Written {
		t.Errorf("done: %+v; want timeout -32001, not written", done)
	}
	if in := tp.Snapshot().InFlight; len(in) != 0 {
		t.Errorf("in flight after its timeout: %+v", in)
	}
}

// A legacy child that answers the pool's server/discover probe only after
// the initialize the pool sent once the probe's wait ran out: its late
// answer is the pool's own affair, not an orphan (late answers to
// clients' calls that ended): neither counted nor recorded.
func TestLateAnswerToTheHandshakeProbeIsNoOrphan(t *testing.T) {
	t.Cleanup(pool.SetProbeTimeout(100 * time.Millisecond)) // registered first: restored after the pool closed
	logs := &logBuffer{}
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		fake("legacy", "-discover-delay", "500ms"))
	c := tp.dial(t, "legacy")
	c.initialize("c", "")
	eventually(t, "the child's late answer to server/discover", func() bool {
		return tp.Snapshot().Counters.Orphaned > 0 || logs.count("late answer to its handshake probe") > 0
	})
	snap := tp.Snapshot()
	if snap.Counters.Orphaned != 0 || snap.Backends[0].Orphaned != 0 {
		t.Errorf("orphaned: pool %d, backend %d; want 0", snap.Counters.Orphaned, snap.Backends[0].Orphaned)
	}
	if n := len(rec.find(func(e pool.Event) bool { return e.Kind == pool.EventOrphan })); n != 0 {
		t.Errorf("%d orphans recorded, want none", n)
	}
}

// The user cancels a client's initialize that waits for a starting child
// (the tray's cancel of a hung request): the client gets the cancel's
// error, once; the wait's own end, when the child is up, answers nothing
// more, and the session goes on.
func TestCancelledWaitingInitializeIsAnsweredOnce(t *testing.T) {
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record}, fake("slow", "-startup-delay", "1s"))
	c := tp.dial(t, "slow")
	c.send(initializeLine)
	var id uint64
	eventually(t, "the initialize in flight", func() bool {
		in := tp.Snapshot().InFlight
		if len(in) == 1 {
			id = in[0].PoolID
		}
		return id != 0
	})
	if err := tp.Cancel(id); err != nil {
		t.Fatal(err)
	}
	if m, _ := c.recvID("7"); m.Error == nil || !strings.Contains(m.Error.Message, "cancelled") {
		t.Fatalf("want the cancel's error, got %s", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`) // handled once the wait ended
	if _, other := c.recvID("8"); len(other) != 0 {
		t.Fatalf("answered again: %+v", other)
	}
	done := rec.waitFor(t, "the initialize's end, in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestDone && e.PoolID == id
	})
	if done.Status != pool.StatusCancelled {
		t.Errorf("done: %+v; want cancelled", done)
	}
	if n := len(rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone })); n != 1 {
		t.Errorf("%d ends recorded, want 1", n)
	}
}

// A stopping pool hands an attached session's waiting initialize back to
// its shim unanswered (handback.go); its history row ends too, so that
// the next pool's look at what this run owed the client does not find it
// (the next pool answers it, as the client's input).
func TestHandedBackInitializeEndsInHistory(t *testing.T) {
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record, StopGrace: 300 * time.Millisecond}, fake("slow", "-startup-delay", "5s"))
	a := tp.attach(t, "slow")
	if _, err := a.in.WriteString(handBackInit + "\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the initialize in flight", func() bool { return len(tp.Snapshot().InFlight) == 1 })
	stopped := closeInBackground(tp)
	bye := a.goodbye(10 * time.Second)
	<-stopped // every event is recorded once Close returns
	if string(bye.Pending) != handBackInit+"\n" {
		t.Fatalf("Pending %q, want the initialize", bye.Pending)
	}
	if got := a.rest(t); got != "" {
		t.Fatalf("the stopped pool answered %q, and handed it back too", got)
	}
	done := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.Method == "initialize" })
	if len(done) != 1 || done[0].Status != pool.StatusCancelled || done[0].Written || !strings.Contains(done[0].Err, "handed back") {
		t.Fatalf("ends recorded: %+v; want one, cancelled, handed back", done)
	}
}

// A session whose initialize waits for its child's handshake counts it in
// its own inFlight, as the pool's inFlight lists it (and the text status
// counts it): the two used to disagree, the session showing 0.
func TestWaitingInitializeCountsInItsSession(t *testing.T) {
	cfg := fake("mute", "-no-init")
	tp := newTestPool(t, &pool.Options{HandshakeTimeout: time.Hour}, cfg)
	c := tp.dial(t, "mute")
	c.send(initializeLine)
	var snap pool.Snapshot
	eventually(t, "the initialize in flight", func() bool {
		snap = tp.Snapshot()
		return len(snap.InFlight) == 1 && len(snap.Sessions) == 1
	}, func() string { return fmt.Sprintf("%+v", snap) })
	if r := snap.InFlight[0]; r.Method != "initialize" || r.Session != snap.Sessions[0].ID {
		t.Fatalf("in flight: %+v; want the session's initialize", r)
	}
	if n := snap.Sessions[0].InFlight; n != 1 {
		t.Errorf("session %+v: inFlight %d, want 1, its initialize", snap.Sessions[0], n)
	}
}
