package pool

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A child becoming ready is subscribed to what its sessions held, and an
// unsubscribe made the moment it is ready reaches it after that
// subscribe, never before: else the child would stay subscribed with
// nobody left to hear it. The test stops becomeReady just after the child
// is marked ready (its state event waits on the hub's lock) and
// unsubscribes the last subscriber there.
func TestUnsubscribeAsTheChildBecomesReadyFollowsItsSubscribe(t *testing.T) {
	p := New(&Options{})
	defer p.Close()
	if err := p.Apply([]ServerConfig{{Name: "x", Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	s, err := p.newSession("x", sessionSetup{transport: "test"})
	if err != nil {
		t.Fatal(err)
	}
	b := buildBackend(s.srv, s.srv.config(), nil, nil, clientCaps{}, nil)
	const uri = "fake://x"
	if b.subscribe(uri) {
		t.Fatal("a child that is not ready was told of a subscription")
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
	if !b.unsubscribe(uri) {
		t.Fatal("the last unsubscribe from a ready child is not forwarded")
	}
	if err := b.send(b.newInternal("resources/unsubscribe", subscribeParams(uri))); err != nil {
		t.Fatal(err)
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

	b.mu.Lock()
	var order []string
	for _, it := range b.queue {
		if it.p != nil && (it.p.method == "resources/subscribe" || it.p.method == "resources/unsubscribe") {
			order = append(order, it.p.method)
		}
	}
	b.mu.Unlock()
	if want := []string{"resources/subscribe", "resources/unsubscribe"}; !slices.Equal(order, want) {
		t.Errorf("the child would hear %v, want %v", order, want)
	}
}
