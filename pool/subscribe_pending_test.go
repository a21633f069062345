//go:build unix

package pool_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A legacy session's subscribe of a resource whose subscribe (another
// session's) the child has not answered yet is answered once the child
// answered that one, not before: an update made right after its {}
// reaches it.
func TestSecondSubscribeOfAPendingSubscribe(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath, "-subscribe-delay", "2s"))
	a, b, other := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	a.initialize("a", "")
	b.initialize("b", "")
	other.initialize("other", "")
	a.send(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	eventually(t, "the child to have a's subscribe", func() bool { return countInLog(t, logPath, "resources/subscribe") == 1 })
	b.send(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := b.recvID("1"); m.Error != nil || string(m.Result) != "{}" {
		t.Fatalf("b's subscribe: %s", m.raw)
	}
	// b was told it is subscribed: the change made now is its.
	other.call("2", "notify", `{"kind":"updated"}`)
	other.recvID("2")
	if m, _ := a.recvID("1"); m.Error != nil {
		t.Fatalf("a's subscribe: %s", m.raw)
	}
	b.call("3", "echo", `{"text":"s"}`)
	_, before := b.recvID("3")
	if got := notificationsIn(before); !slices.Contains(got, "notifications/resources/updated ") {
		t.Errorf("an update made after b's subscribe was answered: b got %q, want it", got)
	}
}

// A legacy session's subscribe that relied on another session's the
// child refuses gets the child's refusal, not the pool's {}, and holds
// nothing: its next subscribe reaches the child.
func TestSecondSubscribeOfARefusedPendingSubscribe(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath, "-subscribe-delay", "1s", "-refuse-subscribe", "fake://gone"))
	a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
	a.initialize("a", "")
	b.initialize("b", "")
	a.send(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"fake://gone"}}`)
	eventually(t, "the child to have a's subscribe", func() bool { return countInLog(t, logPath, "resources/subscribe") == 1 })
	b.send(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"fake://gone"}}`)
	mb, _ := b.recvID("1")
	ma, _ := a.recvID("1")
	if ma.Error == nil {
		t.Fatalf("a's subscribe: %s, want the child's refusal", ma.raw)
	}
	if mb.Error == nil || mb.Error.Code != ma.Error.Code || mb.Error.Message != ma.Error.Message {
		t.Fatalf("b's subscribe: %s, want the child's refusal %s", mb.raw, ma.raw)
	}
	b.send(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"fake://gone"}}`)
	if m, _ := b.recvID("2"); m.Error == nil {
		t.Errorf("b's next subscribe: %s, want the child's refusal", m.raw)
	}
	if n := countInLog(t, logPath, "resources/subscribe"); n != 2 {
		t.Errorf("the child had %d subscribes, want 2 (b's refused one held nothing)", n)
	}
}

// A session that lets a stake go while it moves to the child made after
// a stop (takeStakes), then subscribes again just as moveStakes releases
// what it let go, holds it: the new child hears its subscribe, and the
// session gets its updates. (Decided before the subscribe and released
// after it, the release took the stake the subscribe's {} relied on.)
func TestResubscribeAsAMovedStakeIsReleasedKeepsIt(t *testing.T) {
	var carrying, releasing atomic.Bool
	var a *client
	// Installed before the pool starts, restored after it closed.
	t.Cleanup(pool.SetCarryingHook(func(name string) {
		if name == "a" && carrying.CompareAndSwap(true, false) {
			// read while a's stake is recorded at the new child but not yet counted there
			a.send(`{"jsonrpc":"2.0","id":3,"method":"resources/unsubscribe","params":{"uri":"fake://counter"}}`)
			a.recvID("3")
		}
	}))
	t.Cleanup(pool.SetReleasingHook(func(name string) {
		if name == "a" && releasing.CompareAndSwap(true, false) {
			a.send(`{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
			if m, _ := a.recvID("4"); m.Error != nil {
				t.Errorf("a's subscribe again: %s", m.raw)
			}
		}
	}))
	_, b, logPath := subscribedThenStopped(t, func(c *client) { a = c; carrying.Store(true); releasing.Store(true) })
	if carrying.Load() || releasing.Load() {
		t.Fatal("a's stake was not let go and taken again as it moved")
	}
	eventually(t, "the new child to hear a's subscribe", func() bool {
		return countMethod(childLog(t, logPath), "resources/subscribe") == 2
	}, func() string {
		log := childLog(t, logPath)
		return fmt.Sprintf("the children heard %d subscribes and %d unsubscribes",
			countMethod(log, "resources/subscribe"), countMethod(log, "resources/unsubscribe"))
	})
	b.call("5", "notify", `{"kind":"updated"}`)
	b.recvID("5")
	a.call("6", "echo", `{"text":"s"}`)
	if _, before := a.recvID("6"); !slices.Contains(notificationsIn(before), "notifications/resources/updated ") {
		t.Errorf("a, subscribed, got %q, want the update", notificationsIn(before))
	}
}
