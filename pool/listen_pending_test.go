package pool_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A second listener for a resource whose subscribe (a first listener's)
// the legacy child has not answered yet is acknowledged once the child
// answered it, not before: an update made right after its acknowledgement
// reaches it.
func TestSecondListenerOfAPendingSubscribe(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath, "-subscribe-delay", "2s"))
	l1, l2, other := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	l1.send(`{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://counter"]},` + modernMeta + `}}`)
	eventually(t, "the child to have the subscribe", func() bool { return countInLog(t, logPath, "resources/subscribe") == 1 })
	l2.send(`{"jsonrpc":"2.0","id":"L2","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://counter"]},` + modernMeta + `}}`)
	ack := l2.recv()
	if ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(ack.raw, `"fake://counter"`) {
		t.Fatalf("L2: %s", ack.raw)
	}
	// L2 is acknowledged: the change made now is promised to it.
	callModern(other, `"n"`, "notify", `{"kind":"updated"}`)
	other.recvID(`"n"`)
	if a := l1.recv(); a.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(a.raw, `"L1"`) {
		t.Fatalf("L1: %s", a.raw)
	}
	if got := notifiedBefore(l2, `"s"`); !slices.Equal(got, []string{`notifications/resources/updated "L2"`}) {
		t.Errorf("an update made after L2's acknowledgement: L2 got %q, want it", got)
	}
}

// A second listener whose resource relied on a first listener's subscribe
// that the legacy child refuses is acknowledged without it, and holds no
// stake in it: the next listener's subscribe reaches the child.
func TestSecondListenerOfARefusedPendingSubscribe(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath, "-subscribe-delay", "1s", "-refuse-subscribe", "fake://gone"))
	l1, l2, l3 := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	l1.send(`{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://gone"]},` + modernMeta + `}}`)
	eventually(t, "the child to have the subscribe", func() bool { return countInLog(t, logPath, "resources/subscribe") == 1 })
	l2.send(`{"jsonrpc":"2.0","id":"L2","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://gone"]},` + modernMeta + `}}`)
	for _, c := range []*client{l1, l2} {
		if ack := c.recv(); ack.Method != "notifications/subscriptions/acknowledged" || strings.Contains(ack.raw, "fake://gone") {
			t.Errorf("ack: %s, want one without the refused resource", ack.raw)
		}
	}
	// Nobody holds it now: a third listener's subscribe reaches the child.
	l3.send(`{"jsonrpc":"2.0","id":"L3","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://gone"]},` + modernMeta + `}}`)
	if ack := l3.recv(); ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("L3: %s", ack.raw)
	}
	if n := countInLog(t, logPath, "resources/subscribe"); n != 2 {
		t.Errorf("the child had %d subscribes, want 2 (the refused one held nothing)", n)
	}
}

// Isolation: a session's listen for prompts waits for the upstream listen
// that adds prompts; another session's listen for a resource the child
// refuses replaces it with one the child refuses. The first listen still
// gets its prompts (the pool asks again without the resource that was
// new), and the other is acknowledged without the resource.
func TestAnotherSessionsRefusedResourceLeavesAListenItsKinds(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath, "-subscribe-delay", "1s", "-refuse-subscribe", "fake://gone"))
	a, b, other := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	a.send(`{"jsonrpc":"2.0","id":"a","method":"subscriptions/listen","params":{"notifications":{"promptsListChanged":true},` + modernMeta + `}}`)
	eventually(t, "the child to have the pool's listen", func() bool { return countInLog(t, logPath, "subscriptions/listen") == 1 })
	b.send(`{"jsonrpc":"2.0","id":"b","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://gone"]},` + modernMeta + `}}`)
	ack := a.recv()
	if ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(ack.raw, `"promptsListChanged":true`) {
		t.Errorf("a's ack: %s, want prompts promised (b's refused resource is not a's)", ack.raw)
	}
	if ack := b.recv(); ack.Method != "notifications/subscriptions/acknowledged" || strings.Contains(ack.raw, "fake://gone") {
		t.Errorf("b's ack: %s, want one without the refused resource", ack.raw)
	}
	callModern(other, `"n"`, "notify", `{"kind":"prompts"}`)
	other.recvID(`"n"`)
	if got := notifiedBefore(a, `"s"`); !slices.Equal(got, []string{`notifications/prompts/list_changed "a"`}) {
		t.Errorf("a prompts change after a's acknowledgement: a got %q", got)
	}
}
