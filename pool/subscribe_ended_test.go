//go:build unix

package pool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// askSubscribe sends c's subscribe of fake://counter as request id,
// answered later (subscribeCounter waits for its answer).
func askSubscribe(c *client, id string) {
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
}

// subscribedNow checks that c's subscribe with id was answered {} and
// that c, subscribed, gets an update made now (through c).
func subscribedNow(t *testing.T, c *client, name, id, call string) {
	t.Helper()
	if m, _ := c.recvID(id); m.Error != nil || string(m.Result) != "{}" {
		t.Fatalf("%s's subscribe: %s, want {}", name, m.raw)
	}
	c.call(call, "notify", `{"kind":"updated"}`)
	if _, before := c.recvID(call); !slices.Contains(notificationsIn(before), "notifications/resources/updated ") {
		t.Errorf("%s, told it is subscribed, got %q, want the update", name, notificationsIn(before))
	}
}

// handled returns once c's reader has handled what c sent before: the
// pool answers a ping itself, in order.
func handled(c *client, id string) {
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
	c.recvID(id)
}

// cancelAroundAnothersSubscribe starts a pool whose child (given flags)
// logs to logPath, has session a subscribe ("a1") and cancel it once the
// child has it, and session b subscribe ("b1") while a's is on its way
// (meanwhile) or after the cancel; b must be told {} and get the updates.
func cancelAroundAnothersSubscribe(t *testing.T, meanwhile bool, flags ...string) (a *client, logPath string) {
	t.Helper()
	logPath = filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", append([]string{"-log", logPath}, flags...)...))
	a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
	a.initialize("a", "")
	b.initialize("b", "")
	askSubscribe(a, `"a1"`)
	eventually(t, "the child to have a's subscribe", func() bool { return countInLog(t, logPath, "resources/subscribe") == 1 })
	if meanwhile {
		askSubscribe(b, `"b1"`)
		handled(b, `"bp"`) // counted: it relies on a's
	}
	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a1","reason":"changed my mind"}}`)
	handled(a, `"ap"`) // the cancel ended a's subscribe
	if !meanwhile {
		askSubscribe(b, `"b1"`)
	}
	subscribedNow(t, b, "b", `"b1"`, `"b2"`)
	return a, logPath
}

// A subscribe its client cancelled holds nothing, and takes nothing from
// another session's subscribe of the same resource, whether that one
// relied on it (sent while it was on its way) or came after: the child,
// told to drop it, hears a subscribe for the others (the pool's own in
// its place, or the next one's own), and each session told {} gets the
// updates. (The pool counted the cancelled one as held: the others were
// answered {} and never reached the child, and got no update.)
func TestSubscribeCancelledByItsClientHoldsNothing(t *testing.T) {
	for _, meanwhile := range []bool{true, false} {
		name := map[bool]string{true: "another subscribes meanwhile", false: "another subscribes after"}[meanwhile]
		t.Run(name, func(t *testing.T) {
			a, logPath := cancelAroundAnothersSubscribe(t, meanwhile, "-subscribe-delay", "1s")
			askSubscribe(a, `"a2"`) // a holds nothing: this one is no "no change"
			subscribedNow(t, a, "a", `"a2"`, `"a3"`)
			if n := countInLog(t, logPath, "notifications/cancelled"); n != 1 {
				t.Errorf("the child was told of %d cancellations, want a's", n)
			}
		})
	}
}

// A subscribe that timed out holds nothing: its client was told it
// failed, the child to drop it. Another session's subscribe after it
// reaches the child, and so does its own client's again.
func TestSubscribeThatTimedOutHoldsNothing(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	cfg := fake("srv", "-log", logPath, "-subscribe-delay", "1s")
	tp := newTestPool(t, nil, cfg)
	a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
	a.initialize("a", "")
	b.initialize("b", "")
	tp.applyRequestTimeout(t, &cfg, 300*time.Millisecond)
	askSubscribe(a, `"a1"`)
	if m, _ := a.recvID(`"a1"`); m.Error == nil || m.Error.Code != -32001 {
		t.Fatalf("a's subscribe: %s, want the timeout", m.raw)
	}
	tp.applyRequestTimeout(t, &cfg, 30*time.Second) // for the subscribes from here on
	askSubscribe(b, `"b1"`)
	subscribedNow(t, b, "b", `"b1"`, `"b2"`)
	askSubscribe(a, `"a2"`)
	subscribedNow(t, a, "a", `"a2"`, `"a3"`)
	if n := countInLog(t, logPath, "resources/subscribe"); n != 2 {
		t.Errorf("the child had %d subscribes, want 2 (a's that timed out, b's)", n)
	}
}

// The subscribe the pool sends in place of a cancelled one, for the
// sessions that relied on that one, is not sent again if it times out
// too: those sessions' subscribes get the timeout, and they hold
// nothing, so that their next subscribe reaches the child.
func TestSubscribeSentInAnothersPlaceThatTimesOutFailsThoseWaiting(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	cfg := fake("srv", "-log", logPath, "-subscribe-delay", "1m") // every subscribe outlives its timeout but the first's
	tp := newTestPool(t, nil, cfg)
	a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
	a.initialize("a", "")
	b.initialize("b", "")
	askSubscribe(a, `"a1"`)
	eventually(t, "the child to have a's subscribe", func() bool { return countInLog(t, logPath, "resources/subscribe") == 1 })
	askSubscribe(b, `"b1"`)
	handled(b, `"bp"`) // counted: it relies on a's
	// The subscribe sent in a's place times out.
	cfg.RequestTimeout = 300 * time.Millisecond
	if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a1"}}`)
	if m, _ := b.recvID(`"b1"`); m.Error == nil || m.Error.Code != -32001 {
		t.Fatalf("b's subscribe: %s, want the timeout of the one sent in a's place", m.raw)
	}
	askSubscribe(b, `"b2"`)
	eventually(t, "b's subscribe again to reach the child", func() bool {
		return countInLog(t, logPath, "resources/subscribe") == 3 // a's, the pool's in its place, b's own
	}, func() string { return fmt.Sprint(countInLog(t, logPath, "resources/subscribe"), " subscribes") })
}

// A listen's subscribe on a legacy child that timed out is not promised
// in its acknowledgement, and holds nothing: the next listen's subscribe
// reaches the child.
func TestListensSubscribeThatTimedOutIsNotPromised(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	cfg := fake("srv", "-log", logPath, "-subscribe-delay", "1s")
	tp := newTestPool(t, nil, cfg)
	l1, l2 := tp.dial(t, "srv"), tp.dial(t, "srv")
	// The child starts under the default timeout: the test's is the
	// subscribe's (applyRequestTimeout).
	l1.send(`{"jsonrpc":"2.0","id":"up","method":"tools/call","params":{"name":"echo","arguments":{"text":"up"},` + modernMeta + `}}`)
	if m, _ := l1.recvID(`"up"`); m.text() != "up" {
		t.Fatalf("the call that starts the child: %s", m.raw)
	}
	tp.applyRequestTimeout(t, &cfg, 300*time.Millisecond)
	const listen = `{"jsonrpc":"2.0","id":%q,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://counter"]},` + modernMeta + `}}`
	l1.sendf(listen, "L1")
	if ack := l1.recv(); ack.Method != "notifications/subscriptions/acknowledged" || strings.Contains(ack.raw, "fake://counter") {
		t.Fatalf("L1: %s, want an acknowledgement without the resource whose subscribe timed out", ack.raw)
	}
	tp.applyRequestTimeout(t, &cfg, 30*time.Second)
	l2.sendf(listen, "L2")
	if ack := l2.recv(); ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(ack.raw, "fake://counter") {
		t.Fatalf("L2: %s", ack.raw)
	}
	if n := countInLog(t, logPath, "resources/subscribe"); n != 2 {
		t.Errorf("the child had %d subscribes, want 2 (L1's that timed out, L2's)", n)
	}
}

// A session whose stake the child's refusal took back, and which let it
// go and subscribed again before the pool forgot the lost one, keeps the
// new stake: the late drop of the lost one forgets nothing the session
// holds now. On the first edition it forgot the new subscription (the
// session got no updates though told {} and subscribed at the child), and
// the session's unsubscribe then changed nothing, so the child never
// heard it while the backend counted the stake for ever.
func TestLateDropKeepsANewerStake(t *testing.T) {
	a, logPath, gate, release := refusedStakeHeld(t) // the first refusal's drop waits for the session's new stake
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	a.send(`{"jsonrpc":"2.0","id":"let-go","method":"resources/unsubscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := a.recvID(`"let-go"`); m.Error != nil {
		t.Fatalf("the unsubscribe: %s", m.raw)
	}
	askSubscribe(a, `"again"`)
	eventually(t, "the new subscribe at the child", func() bool { return countInLog(t, logPath, "resources/subscribe") == 2 })
	close(release)
	if m, _ := a.recvID(`"refused"`); m.Error == nil {
		t.Fatalf("the first subscribe: %s, want the child's refusal", m.raw)
	}
	subscribedNow(t, a, "a", `"again"`, `"n"`)
	a.send(`{"jsonrpc":"2.0","id":"u","method":"resources/unsubscribe","params":{"uri":"fake://counter"}}`)
	a.recvID(`"u"`)
	eventually(t, "the child to hear the unsubscribe of its only holder", func() bool {
		return countInLog(t, logPath, "resources/unsubscribe") == 1
	})
}

// refusedStakeHeld dials session "a" to a child that refuses subscribes of
// fake://counter while gate exists, has it subscribe ("refused"), and
// holds the pool's drop of the refused stake at the losing-stakes hook
// until release is closed, so the test can act before the drop.
func refusedStakeHeld(t *testing.T) (a *client, logPath, gate string, release chan struct{}) {
	t.Helper()
	dir := t.TempDir()
	logPath = filepath.Join(dir, "child.log")
	gate = filepath.Join(dir, "refuse")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	t.Cleanup(pool.SetLosingStakesHook(func() {
		once.Do(func() {
			close(reached)
			<-release
		})
	}))
	tp := newTestPool(t, nil, fake("srv", "-log", logPath, "-refuse-subscribe", "fake://counter", "-refuse-while", gate))
	a = tp.dial(t, "srv")
	a.initialize("a", "")
	askSubscribe(a, `"refused"`)
	select {
	case <-reached:
	case <-time.After(15 * time.Second):
		t.Fatal("the child did not refuse the subscribe")
	}
	return a, logPath, gate, release
}
