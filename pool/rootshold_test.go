//go:build unix

package pool_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// heldInFlight is the request with originalID among the snapshot's
// requests in flight, if it is there.
func heldInFlight(tp *testPool, originalID string) (pool.RequestInfo, bool) {
	for _, r := range tp.Snapshot().InFlight {
		if r.OriginalID == originalID {
			return r, true
		}
	}
	return pool.RequestInfo{}, false
}

// A call the pool holds while it waits for the client's answer to its
// roots/list is in flight from the moment it is read: the snapshot (status
// --json, hangs, the dashboard) lists it, at no child, with why it waits,
// and its session counts it; once the client answers, the call's history
// counts from its arrival, under the same pool id, so its duration counts
// the hold. Before, a held call was in no snapshot while it waited, and
// its history began as it was replayed: received late, answered in a
// blink, while its client had waited the whole hold.
func TestHeldCallIsInFlightFromItsArrival(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(time.Minute)) // the hold ends when the client answers
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record}, fake("fs"))
	c := tp.dial(t, "fs")
	ask := c.initRootsAsked("slow-roots")
	sent := time.Now()
	c.call("1", "echo", `{"text":"held"}`)

	var held pool.RequestInfo
	eventually(t, "the held call in the snapshot's requests in flight", func() (ok bool) {
		held, ok = heldInFlight(tp, "1")
		return ok
	})
	if held.Method != "tools/call" || held.Name != "echo" || held.WrittenToChild || held.PID != 0 ||
		!strings.Contains(held.StateReason, "roots/list") || held.ReceivedAt.Before(sent) || held.PoolID == 0 {
		t.Errorf("the held call in flight: %+v; want tools/call echo, at no child, waiting for roots/list, received after %v",
			held, sent)
	}
	for _, s := range tp.Snapshot().Sessions {
		if s.ClientName == "slow-roots" && s.InFlight != 1 {
			t.Errorf("the session counts %d requests in flight, want the held call", s.InFlight)
		}
	}
	const hold = 300 * time.Millisecond
	eventually(t, "the call held for a while", func() bool {
		r, ok := heldInFlight(tp, "1")
		return ok && time.Duration(r.AgeMs)*time.Millisecond >= hold
	})

	c.answerRootsAsk(ask)
	if m, _ := c.recvID("1"); m.text() != "held" {
		t.Fatalf("the held call's answer: %s", m.raw)
	}
	received := rec.waitFor(t, "the call's arrival in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestReceived && e.OriginalID == "1"
	})
	done := rec.waitFor(t, "the call's end in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestDone && e.PoolID == received.PoolID
	})
	if received.PoolID != held.PoolID || !received.Time.Equal(held.ReceivedAt) {
		t.Errorf("history received the call as %d at %v; the snapshot showed it held as %d since %v",
			received.PoolID, received.Time, held.PoolID, held.ReceivedAt)
	}
	if took := done.Time.Sub(received.Time); took < hold {
		t.Errorf("history says the call took %v; its client waited at least %v", took, hold)
	}
}
