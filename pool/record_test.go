package pool_test

import (
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestRecordGetsEveryEventByClose: a request's events reach
// Options.Record in order, off the hot path but without waiting for
// Close, and everything the pool emitted is there when Close returns.
func TestRecordGetsEveryEventByClose(t *testing.T) {
	var mu sync.Mutex
	var got []pool.Event
	recorded := func(kind pool.EventKind) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range got {
			if e.Kind == kind {
				return true
			}
		}
		return false
	}
	tp := newTestPool(t, &pool.Options{Record: func(e pool.Event) {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	}}, fake("f", "-inline-echo"))
	c := tp.dial(t, "f")
	c.initialize("c", "{}")
	c.call("1", "echo", `{"text":"hi"}`)
	if m, _ := c.recvID("1"); m.text() != "hi" {
		t.Fatalf("answer %s", m.raw)
	}
	eventually(t, "the request's end in Record before Close", func() bool { return recorded(pool.EventRequestDone) })
	c.close()
	tp.Close()

	mu.Lock()
	defer mu.Unlock()
	var kinds []pool.EventKind
	for _, e := range got {
		if e.PoolID != 0 && e.Method == "tools/call" || e.Kind == pool.EventRequestWritten {
			kinds = append(kinds, e.Kind)
		}
	}
	want := []pool.EventKind{pool.EventRequestReceived, pool.EventRequestWritten, pool.EventRequestDone}
	if len(kinds) != len(want) || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] {
		t.Fatalf("the call's events: %v, want %v", kinds, want)
	}
	if last := got[len(got)-1]; last.Kind != pool.EventBackendExited && last.Kind != pool.EventBackendState {
		t.Fatalf("the last event recorded is %v: Close returned before the child's exit was recorded", last.Kind)
	}
}
