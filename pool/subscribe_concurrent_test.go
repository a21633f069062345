package pool

import (
	"fmt"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// One session's subscribes and unsubscribes of one URI, sent at once (an
// HTTP client's concurrent POSTs): whatever order they are decided in,
// the backend counts them in that order, so that what the session holds
// and the stake the backend counts for it agree once they are all done.
// (Decided under the session's lock and counted later under the
// backend's, two changes could be counted the other way round: a
// subscribe decided first and counted last left the child subscribed
// for a session holding nothing, and an unsubscribe counted last left a
// session holding a URI its child was no longer subscribed to.)
func TestConcurrentChangesOfOneURIKeepSessionAndBackendInStep(t *testing.T) {
	r := newEndingRig(t)
	s, b := r.s, r.b // the child is not ready: every change is counted and answered by the pool
	const uri, rounds = "fake://x", 2000
	send := func(method, id string) {
		msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{"uri":"` + uri + `"}}`))
		if err != nil {
			t.Error(err)
			return
		}
		s.subscription(&msg, []byte(id), msg.Params.Of(msg.Raw), nil, nil)
	}
	for i := range rounds {
		var wg sync.WaitGroup
		wg.Go(func() { send("resources/subscribe", fmt.Sprintf(`"s%d"`, i)) })
		wg.Go(func() { send("resources/unsubscribe", fmt.Sprintf(`"u%d"`, i)) })
		wg.Wait()
		if sessionHolds, backendHolds := subscriptionStateOf(s, b, uri); sessionHolds != backendHolds {
			t.Fatalf("round %d: after a subscribe and an unsubscribe at once the session holds %s: %v, its backend counts it: %v", i, uri, sessionHolds, backendHolds)
		}
	}
}

// subscriptionStateOf says whether s holds uri and whether b counts s's
// stake in it.
func subscriptionStateOf(s *session, b *backend, uri string) (sessionHolds, backendHolds bool) {
	s.mu.Lock()
	_, sessionHolds = s.subs[uri]
	s.mu.Unlock()
	b.mu.Lock()
	_, backendHolds = b.holds[subHold{uri: uri, holder: s}]
	b.mu.Unlock()
	return sessionHolds, backendHolds
}
