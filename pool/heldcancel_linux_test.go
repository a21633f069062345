//go:build linux

package pool_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A user's cancel (the dashboard's Cancel on an In flight row) of a call
// held while the pool waits for its client's answer to roots/list ends
// it as a cancel ends a call queued for a starting child: its client gets
// the same error (the request did not run), it leaves the snapshot and
// the shim's ledger, history records it once, cancelled, and the calls
// held behind and before it go on, in order, once the client answers.
// Before, Pool.Cancel looked only in the children's request tables, and
// a held call's row answered "not found".
func TestUserCancelsACallHeldForRoots(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(time.Minute)) // the hold ends when the client answers
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record}, fake("fs"), fake("slow", "-startup-delay", "30s"))

	// The cancel of a call queued for a starting child, to compare with.
	q := tp.dial(t, "slow")
	q.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"queued"},` + modernMeta + `}}`) // no initialize: it waits for the child's handshake
	var queued pool.RequestInfo
	eventually(t, "the call queued for the starting child", func() (ok bool) { queued, ok = heldInFlight(tp, "7"); return ok })
	if err := tp.Cancel(queued.PoolID); err != nil {
		t.Fatal(err)
	}
	want, _ := q.recvID("7")

	file, ledger := newLedger(t)
	a := tp.attachLedger(t, "fs", file)
	ask := a.initRootsAsked(t)
	for _, id := range []string{"a", "b", "c"} {
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, id, id))
	}
	eventually(t, "the three calls held, in the ledger", func() bool {
		l := ledger()
		return lists(l, `"a"`) && lists(l, `"b"`) && lists(l, `"c"`)
	})
	b, ok := heldInFlight(tp, `"b"`)
	if !ok {
		t.Fatalf("the held call b is not in flight: %+v", tp.Snapshot().InFlight)
	}

	if err := tp.Cancel(b.PoolID); err != nil {
		t.Fatalf("cancel of the held call: %v", err)
	}
	got := a.next(t)
	if string(got.ID) != `"b"` || got.Error == nil {
		t.Fatalf("want the cancel's error for b, got %s", got.raw)
	}
	// The same error as the queued call's, but for its server's name.
	gotErr, _ := json.Marshal(got.Error)
	wantErr, _ := json.Marshal(want.Error)
	if strings.NewReplacer(`\"fs\"`, `\"slow\"`, `"fs"`, `"slow"`).Replace(string(gotErr)) != string(wantErr) {
		t.Errorf("the held call's cancel answered %s; a queued call's answers %s", gotErr, wantErr)
	}
	if code, data := errorData(t, got); code != -32007 || *data.MayHaveExecuted {
		t.Errorf("the held call's cancel: %s; want -32007, mayHaveExecuted false", got.raw)
	}
	if _, still := heldInFlight(tp, `"b"`); still {
		t.Errorf("the cancelled call is still in flight: %+v", tp.Snapshot().InFlight)
	}
	for _, s := range tp.Snapshot().Sessions {
		if s.Server == "fs" && s.InFlight != 2 {
			t.Errorf("the session counts %d requests in flight, want the two still held", s.InFlight)
		}
	}
	if err := tp.Cancel(b.PoolID); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("a second cancel of the held call: %v, want not found", err)
	}
	eventually(t, "the cancelled call to leave the ledger, the others to stay", func() bool {
		l := ledger()
		return !lists(l, `"b"`) && lists(l, `"a"`) && lists(l, `"c"`)
	}, func() string { return fmt.Sprintf("it lists %+v", ledger()) })

	a.send(`{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"roots":[]}}`)
	answers := map[string]msg{}
	for len(answers) < 2 {
		m := a.next(t)
		answers[string(m.ID)] = m
	}
	if answers[`"a"`].text() != "a" || answers[`"c"`].text() != "c" {
		t.Fatalf("the held calls a and c once the client answered: %+v", answers)
	}
	eventually(t, "the answered calls to leave the ledger", func() bool { return len(ledger()) == 0 },
		func() string { return fmt.Sprintf("it still lists %+v", ledger()) })

	received := rec.waitFor(t, "the cancelled call's arrival in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestReceived && e.PoolID == b.PoolID
	})
	if received.OriginalID != `"b"` || received.Method != "tools/call" || !received.Time.Equal(b.ReceivedAt) {
		t.Errorf("history received the cancelled call as %+v; the snapshot showed it held since %v", received, b.ReceivedAt)
	}
	calls := func(kind pool.EventKind) []pool.Event {
		return rec.find(func(e pool.Event) bool { return e.Kind == kind && e.Server == "fs" && e.Method == "tools/call" })
	}
	eventually(t, "the calls' ends in history", func() bool { return len(calls(pool.EventRequestDone)) == 3 })
	var order []string
	for _, r := range calls(pool.EventRequestReceived) {
		order = append(order, r.OriginalID)
	}
	if strings.Join(order, " ") != `"b" "a" "c"` {
		t.Errorf("history received the calls %v; want the cancelled one, then a and c in the order sent", order)
	}
	done := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.PoolID == b.PoolID })
	if len(done) != 1 || done[0].Status != pool.StatusCancelled || done[0].Written || done[0].ErrCode != -32007 {
		t.Errorf("the cancelled call's ends in history: %+v; want one, cancelled, not written, -32007", done)
	}
}
