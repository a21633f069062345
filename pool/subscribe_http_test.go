//go:build unix

package pool_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// An HTTP client's concurrent POSTs subscribing to and unsubscribing from
// one resource in one session, then one more that leaves a known state:
// the child is subscribed exactly when the session holds the resource,
// and the session's GET stream gets the resource's update exactly then.
// (The session decided each change under its lock and its child's
// backend counted it later: a subscribe and an unsubscribe counted the
// other way round left the session holding the resource with its child
// unsubscribed, its updates lost, or the child subscribed for a session
// that held nothing, which its next unsubscribe took for no change.)
func TestHTTPConcurrentSubscriptionChangesKeepTheChildInStep(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/srv"}
	c.initialize("c")
	st := openedGetStream(t, c.url, c.sid)
	const rounds, burst = 300, 8
	change := func(id string, add bool) msg {
		method := "resources/unsubscribe"
		if add {
			method = "resources/subscribe"
		}
		return c.call(`{"jsonrpc":"2.0","id":"` + id + `","method":"` + method + `","params":{"uri":"fake://counter"}}`)
	}
	for round := range rounds {
		var wg sync.WaitGroup
		for i := range burst {
			wg.Go(func() {
				if m := change(fmt.Sprintf("r%d-%d", round, i), i%2 == 0); m.Error != nil {
					t.Errorf("round %d: a change: %s", round, m.raw)
				}
			})
		}
		wg.Wait()
		holds := round%2 == 0
		if m := change(fmt.Sprintf("r%d-last", round), holds); m.Error != nil {
			t.Fatalf("round %d: the last change: %s", round, m.raw)
		}
		// Every change the child hears is answered by it before its POST
		// is: what the child was told is in its log by now.
		told := subscriptionLog(t, logPath)
		if childHolds := len(told) > 0 && told[len(told)-1] == "subscribe"; childHolds != holds {
			t.Fatalf("round %d: the session holds the resource: %v, the child is subscribed: %v (told %d changes)",
				round, holds, childHolds, len(told))
		}
		if got := updatedBeforeListChange(t, c, st, round); got != holds {
			t.Fatalf("round %d: the session holds the resource: %v, its stream got its update: %v", round, holds, got)
		}
	}
}

// updatedBeforeListChange has the child send the resource's update, then
// a tools/list_changed (which every session gets), and says whether st
// carried the update before the list change.
func updatedBeforeListChange(t *testing.T, c *httpClient, st *getStream, round int) bool {
	t.Helper()
	for _, kind := range []string{"updated", "tools"} {
		if m := c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":"n%d-%s","method":"tools/call","params":{"name":"notify","arguments":{"kind":%q}}}`, round, kind, kind)); m.Error != nil {
			t.Fatalf("notify %s: %s", kind, m.raw)
		}
	}
	updated := false
	for {
		_, m := st.event()
		switch m.Method {
		case "notifications/resources/updated":
			updated = true
		case "notifications/tools/list_changed":
			return updated
		}
	}
}
