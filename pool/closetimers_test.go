package pool_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// The pool's timers (time.AfterFunc) run in goroutines that are none of
// the pool's. What one does once Close waits for the pool's goroutines,
// Close does not wait for: a goroutine it starts then (the session's
// writer, for an answer to a held request) is one Close does not wait
// for, or, added as the WaitGroup's Wait returns, a misuse of it. Once
// Close waits, a timer that fires does nothing: Close has closed the
// sessions and stopped the children.

// A session's roots ask whose timer fires after Close returned replays
// none of the requests held for the answer.
func TestRootsAskTimeoutAfterCloseDoesNothing(t *testing.T) {
	const wait = time.Second
	defer pool.SetRootsAskTimeout(wait)()
	var closed, late atomic.Bool
	defer pool.OnReplaying(func() {
		if closed.Load() {
			late.Store(true)
		}
	})()
	tp := newTestPool(t, nil, fake("srv"))
	c := tp.dial(t, "srv")
	c.initialize("c", `{"roots":{"listChanged":true}}`)
	if ask := c.recv(); ask.Method != "roots/list" {
		t.Fatalf("want the pool's roots/list, got %s", ask.raw)
	}
	due := time.Now().Add(wait) // the ask's timer fires by then
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	eventually(t, "the request held", func() bool { return len(tp.Snapshot().InFlight) == 1 })
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	closed.Store(true)
	if time.Now().After(due) {
		t.Skip("Close took longer than the roots ask's timeout: its timer fired before Close returned")
	}
	for time.Now().Before(due.Add(wait)) && !late.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	if late.Load() {
		t.Fatal("the roots ask's timer replayed a held request after Close returned")
	}
}
