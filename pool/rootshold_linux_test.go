//go:build linux

package pool_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A call the pool holds while it waits for the client's answer to its
// roots/list is owed from the moment it is read: the shim's ledger lists
// it, not written to any child, so that a pool killed during the hold
// leaves it for the next pool to answer (as not run) instead of losing
// it. A hand-back takes it back to the shim unanswered and out of the
// ledger: the next pool reads it as the client's input, and does not
// answer it as owed too. Before, a held call was in no ledger until it
// was replayed: a kill during the hold lost it, and its client waited
// for an answer that never came.
func TestLedgerOwesACallHeldForRoots(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(time.Minute)) // the hold lasts until the hand-back
	tp := newTestPool(t, &pool.Options{StopGrace: 300 * time.Millisecond}, fake("fs"))
	file, ledger := newLedger(t)
	a := tp.attachLedger(t, "fs", file)
	a.initRootsAsked(t)
	const call = `{"jsonrpc":"2.0","id":"held","method":"tools/call","params":{"name":"echo","arguments":{"text":"held"}}}`
	a.send(call)

	eventually(t, "the held call in the ledger", func() bool { return lists(ledger(), `"held"`) })
	for _, l := range ledger() {
		if l.ID == `"held"` && l.Written {
			t.Errorf("the ledger says the held call was written to a child: %+v", l)
		}
	}

	closeExpectingHandBack(t, tp, a, 10*time.Second, call+"\n")
	if lost := ledger(); lists(lost, `"held"`) {
		t.Errorf("the call went back to the shim and is still owed in the ledger (%+v): the next pool would answer it twice", lost)
	}
}

// Held calls leave the ledger once answered, whoever answers them: a call
// the child answers (its pending took the held call's slot over) and a
// request the pool answers itself (server/discover, from the child's
// handshake). One left there would be answered again, with an error, by
// the next pool after a kill.
func TestLedgerForgetsHeldRequestsOnceAnswered(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(time.Minute)) // the hold ends when the client answers
	tp := newTestPool(t, nil, fake("fs"))
	file, ledger := newLedger(t)
	a := tp.attachLedger(t, "fs", file)
	ask := a.initRootsAsked(t)
	a.send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"echo","arguments":{"text":"held"}}}`)
	a.send(`{"jsonrpc":"2.0","id":"discover","method":"server/discover","params":{` + modernMeta + `}}`)
	eventually(t, "both held requests in the ledger", func() bool {
		return lists(ledger(), `"call"`) && lists(ledger(), `"discover"`)
	})

	a.send(`{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"roots":[]}}`)
	got := map[string]msg{}
	for len(got) < 2 {
		line, err := a.out.ReadString('\n')
		var m msg
		if err != nil || json.Unmarshal([]byte(line), &m) != nil {
			t.Fatalf("want the held requests' answers, got %q, %v", line, err)
		}
		got[string(m.ID)] = m
	}
	if got[`"call"`].Error != nil || got[`"discover"`].Error != nil {
		t.Fatalf("the held requests' answers: %+v", got)
	}
	// Released once the answers' writes returned, maybe after the client read them.
	eventually(t, "the answered requests to leave the ledger", func() bool { return len(ledger()) == 0 },
		func() string { return fmt.Sprintf("it still lists %+v", ledger()) })
}
