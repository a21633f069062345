package pool

import (
	"slices"
	"testing"
)

// A child's question is during a request the child has: askers lists,
// oldest first, the sessions of the requests that may have reached the
// child, not those of requests it never got. A client's initialize that
// waits in flight for the child's handshake (registerWait) is answered by
// the pool, never written: while it lingers in the table as the child,
// ready, asks its first question during another session's call, that
// question is not its session's. Before, that session came first, and a
// question for a client that had closed its input was put to it instead
// (TestClosedInputQuestionIsNotAskedOfAnotherSession failed under load).
func TestAskersAreSessionsOfRequestsTheChildHas(t *testing.T) {
	tab := newRequestTable(nil)
	waiting, calling, queued := &session{id: "waiting"}, &session{id: "calling"}, &session{id: "queued"}
	wait := &pending{id: 1, sess: waiting, method: "initialize"} // no line: a wait for the handshake
	call := &pending{id: 2, sess: calling, method: "tools/call", line: []byte("{}")}
	later := &pending{id: 3, sess: queued, method: "tools/call", line: []byte("{}")}
	for _, p := range []*pending{wait, call, later} {
		if r, _, _ := tab.register(p, 100, 0); r != registered {
			t.Fatalf("register %d: %v", p.id, r)
		}
	}
	tab.update(func(*inFlight) { call.state = stWritten })
	var got []string
	for _, s := range tab.askers() {
		got = append(got, s.id)
	}
	if want := []string{"calling"}; !slices.Equal(got, want) {
		t.Fatalf("askers %v, want %v: only a request the child has can be what its question is for", got, want)
	}
}
