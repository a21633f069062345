package pool

import (
	"context"
	"testing"
)

// TestLaggingSubscriberHasEveryEventBeforeEventLagged: a reader that
// falls behind reads the buffer's worth of events, in order and none
// missing, then EventLagged, then the close: the gap starts exactly at
// the EventLagged.
func TestLaggingSubscriberHasEveryEventBeforeEventLagged(t *testing.T) {
	p := New(nil)
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const buffer = 8
	_, events := p.Subscribe(ctx, buffer)
	for i := range buffer + 5 {
		p.events.emit(&Event{Kind: EventRequestReceived, PoolID: uint64(i + 1)})
	}
	var got []uint64
	lagged := 0
	for e := range events {
		switch {
		case e.Kind == EventLagged:
			lagged++
		case lagged > 0:
			t.Fatalf("event %v after EventLagged", e.Kind)
		default:
			got = append(got, e.PoolID)
		}
	}
	if lagged != 1 {
		t.Fatalf("%d EventLagged, want 1", lagged)
	}
	if len(got) != buffer {
		t.Fatalf("read %v before EventLagged, want the first %d", got, buffer)
	}
	for i, id := range got {
		if id != uint64(i+1) {
			t.Fatalf("read %v before EventLagged, want 1..%d in order", got, buffer)
		}
	}
}
