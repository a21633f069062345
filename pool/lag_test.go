package pool_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// subscriptionGoroutines counts the goroutines of live subscriptions.
func subscriptionGoroutines() int {
	buf := make([]byte, 1<<22)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "pool.(*Pool).Subscribe.func1")
}

// TestLaggedSubscriptionsLetGoOfTheirGoroutines: a subscriber that falls
// behind and subscribes again under the same long-lived context (the
// UI's loop does) leaves nothing behind: the goroutine of a subscription
// the hub dropped ends with it, not with the context.
func TestLaggedSubscriptionsLetGoOfTheirGoroutines(t *testing.T) {
	tp := newTestPool(t, nil, fake("f"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := subscriptionGoroutines()
	for i := range 20 {
		_, events := tp.Subscribe(ctx, 1)
		c := tp.dial(t, "f") // a session's opening is more than one event
		c.initialize("c", "")
		c.call("1", "echo", `{"text":"a"}`)
		c.recvID("1")
		lagged := false
		timeout := time.After(15 * time.Second)
	read:
		for {
			select {
			case e, ok := <-events:
				if !ok {
					break read
				}
				lagged = lagged || e.Kind == pool.EventLagged
			case <-timeout:
				t.Fatalf("round %d: the lagging subscription's channel never closed", i)
			}
		}
		if !lagged {
			t.Fatalf("round %d: the channel closed without an EventLagged", i)
		}
		c.close()
	}
	eventually(t, "the lagged subscriptions' goroutines to end", func() bool { return subscriptionGoroutines() == before },
		func() string { return fmt.Sprintf("%d still running", subscriptionGoroutines()-before) })

	// A subscription that did not lag still ends with its context.
	sctx, scancel := context.WithCancel(ctx)
	_, events := tp.Subscribe(sctx, 0)
	scancel()
	for range events {
	}
	eventually(t, "a cancelled subscription's goroutine to end", func() bool { return subscriptionGoroutines() == before })
}
