package pool

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// A child becoming ready is subscribed to what its sessions held, and an
// unsubscribe made the moment it is ready reaches it after that
// subscribe, never before: else the child would stay subscribed with
// nobody left to hear it. The test stops becomeReady just after the child
// is marked ready (its state event waits on the hub's lock) and
// unsubscribes the last subscriber there.
func TestUnsubscribeAsTheChildBecomesReadyFollowsItsSubscribe(t *testing.T) {
	r := newEndingRig(t)
	p, b := r.p, r.b
	const uri = "fake://x"
	if err := b.send(b.newSubscriptionChange("holder", uri, true)); !errors.Is(err, errNotForChild) {
		t.Fatalf("a child that is not ready was told of a subscription (send: %v)", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, events := p.Subscribe(ctx, 16) // so that the state event takes the hub's lock

	p.events.mu.Lock()
	ready := make(chan struct{})
	go func() {
		defer close(ready)
		b.becomeReady(newChildState(&child{pid: 1}), &handshake{era: EraLegacy, protocolVersion: "2025-06-18"})
	}()
	waitUntil(t, "the child marked ready", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.state == StateReady
	})
	if err := b.send(b.newSubscriptionChange("holder", uri, false)); err != nil {
		t.Fatalf("the last unsubscribe from a ready child is not forwarded: %v", err)
	}
	p.events.mu.Unlock()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("becomeReady did not return")
	}
	cancel()
	for range events { // until the hub lets go of it
	}

	if got, want := subscriptionsQueued(b), []string{"resources/subscribe", "resources/unsubscribe"}; !slices.Equal(got, want) {
		t.Errorf("the child would hear %v, want %v", got, want)
	}
}

// Sessions subscribing to and unsubscribing from one URI at once: the
// child hears a subscribe exactly when the count goes from 0 to 1 and an
// unsubscribe when it goes back, in that order, so it ends subscribed
// exactly when someone still holds the URI. (Counted first and queued
// after, as the pool once did, the last unsubscribe and the next first
// subscribe could reach the child the wrong way round.)
func TestConcurrentSubscriptionChangesReachTheChildInOrder(t *testing.T) {
	b := newEndingRig(t).b
	b.mu.Lock()
	b.state = StateReady // no child: everything sent waits in the queue
	b.mu.Unlock()
	const uri, holders, rounds = "fake://x", 8, 200
	var wg sync.WaitGroup
	for h := range holders {
		wg.Go(func() {
			for i := range rounds {
				_ = b.send(b.newSubscriptionChange(h, uri, i%2 == 0)) // ends with an unsubscribe
			}
		})
	}
	wg.Wait()
	held := 0
	for i, m := range subscriptionsQueued(b) {
		switch {
		case m == "resources/subscribe" && held == 0:
			held = 1
		case m == "resources/unsubscribe" && held == 1:
			held = 0
		default:
			t.Fatalf("change %d: the child hears %s while subscribed=%d", i, m, held)
		}
	}
	if held != 0 {
		t.Error("the child ends subscribed, and nobody holds the URI")
	}
}

// subscriptionsQueued lists the subscribes and unsubscribes queued for
// b's child, in order.
func subscriptionsQueued(b *backend) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var order []string
	for _, it := range b.queue {
		if it.p != nil && (it.p.method == "resources/subscribe" || it.p.method == "resources/unsubscribe") {
			order = append(order, it.p.method)
		}
	}
	return order
}

// Each holder counts once: a second subscribe, or an unsubscribe of what
// a holder does not hold, changes nothing, so no holder can release
// another's stake. The child hears the first subscribe and the last
// unsubscribe only.
func TestSubscriptionHoldersCountOnce(t *testing.T) {
	b := newEndingRig(t).b
	b.mu.Lock()
	b.state = StateReady
	b.mu.Unlock()
	const uri = "fake://x"
	steps := []struct {
		holder string
		add    bool
		tell   bool
		count  int
	}{
		{"a", true, true, 1},
		{"b", true, false, 2},
		{"a", true, false, 2},  // again: nothing changes
		{"a", false, false, 1}, // b still holds it
		{"a", false, false, 1}, // a holds nothing: nothing changes
		{"c", false, false, 1}, // never held: nothing changes
		{"b", false, true, 0},  // the last holder
		{"b", false, false, 0}, // nothing held
		{"c", true, true, 1},   // a fresh first holder
		{"c", false, true, 0},
	}
	for i, st := range steps {
		b.mu.Lock()
		tell := b.countLocked(&subChange{uri: uri, add: st.add, holder: st.holder})
		count := b.subs[uri]
		b.mu.Unlock()
		if tell != st.tell || count != st.count {
			t.Fatalf("step %d (%s add=%v): tell %v count %d, want tell %v count %d", i, st.holder, st.add, tell, count, st.tell, st.count)
		}
	}
}

// A child that dies with subscription changes queued or written is not
// sent them again: they are counted, the next child is told what is held
// when it is ready, once for each URI, and the clients are answered.
func TestADeadChildsSubscriptionsAreToldOnceToTheNext(t *testing.T) {
	r := newEndingRig(t)
	b := r.b
	b.mu.Lock()
	b.state = StateReady // no child: what is sent waits in the queue
	b.mu.Unlock()
	msg, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":"fake://x"}}`))
	r.s.subscription(&msg, []byte(`"s"`), msg.Params.Of(msg.Raw), nil, nil)
	if got := subscriptionsQueued(b); !slices.Equal(got, []string{"resources/subscribe"}) {
		t.Fatalf("queued for the child: %v", got)
	}
	b.reap(deadChild(t), nil)
	if got := r.answers(); len(got) != 1 || !strings.Contains(got[0], `"id":"s","result":{}`) {
		t.Fatalf("the client's subscribe at the child's death: %q", got)
	}
	b.becomeReady(newChildState(&child{pid: 1}), &handshake{era: EraLegacy, protocolVersion: "2025-06-18"})
	if got := subscriptionsQueued(b); !slices.Equal(got, []string{"resources/subscribe"}) {
		t.Errorf("the next child would hear %v, want one subscribe", got)
	}
}
