package pool_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// The one session able to answer a child's question closes between its
// pick and the question's record: its close has dropped its questions
// already, so the child must get the pool's error at once, not wait for
// ever (and the call that asked with it).
func TestQuestionToASessionClosingAsPickedIsAnswered(t *testing.T) {
	closed, restore := pool.CloseAskedSessions(1)
	t.Cleanup(restore) // after the pool closed: cleanups run last first
	tp := newTestPool(t, nil, fake("srv"))
	plain, sampler := tp.dial(t, "srv"), tp.dial(t, "srv")
	plain.initialize("plain", "")
	sampler.initialize("sampler", `{"sampling":{}}`)
	plain.call("1", "ask", `{"kind":"sampling"}`)
	res, _ := plain.recvID("1")
	if got := pickedAndClosed(t, closed); got != "sampler" {
		t.Fatalf("the pool picked %q to ask, want sampler", got)
	}
	if !strings.Contains(res.raw, "no connected client") {
		t.Fatalf("want the child to report the pool's error, got %s", res.raw)
	}
}

// With another session able to answer, the question goes to it instead.
func TestQuestionToASessionClosingAsPickedGoesToAnother(t *testing.T) {
	closed, restore := pool.CloseAskedSessions(1)
	t.Cleanup(restore)
	tp := newTestPool(t, nil, fake("srv"))
	plain := tp.dial(t, "srv")
	plain.initialize("plain", "")
	samplers := map[string]*client{"a": tp.dial(t, "srv"), "b": tp.dial(t, "srv")}
	for name, c := range samplers {
		c.initialize(name, `{"sampling":{}}`)
	}
	plain.call("1", "ask", `{"kind":"sampling"}`)
	var other *client
	switch got := pickedAndClosed(t, closed); got {
	case "a":
		other = samplers["b"]
	case "b":
		other = samplers["a"]
	default:
		t.Fatalf("the pool picked %q to ask, want a sampler", got)
	}
	req := other.recv()
	if req.Method != "sampling/createMessage" {
		t.Fatalf("the sampler left got %s", req.raw)
	}
	other.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`, req.ID)
	res, _ := plain.recvID("1")
	if !strings.Contains(res.text(), "forty-two") {
		t.Fatalf("tool result: %s", res.raw)
	}
}

// pickedAndClosed is the name of the client whose session the pool closed
// as it picked it to ask.
func pickedAndClosed(t *testing.T, closed <-chan string) string {
	t.Helper()
	select {
	case name := <-closed:
		return name
	case <-time.After(15 * time.Second):
		t.Fatal("the pool picked no session to ask within 15s")
	}
	return ""
}
