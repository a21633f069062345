package pool_test

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestQuietStatelessSessionIdlesItsChildFromItsLastExchange: a server's
// stateless HTTP session stays after its last exchange as long as the
// child would run without it (the server's idleTimeout), and when it
// ends for being quiet its child's idle time counts from that last
// exchange, not from the session's end: the child stops idleTimeout after
// the last 2026-07-28 request, as it would after a legacy client's last
// session, rather than twice that.
func TestQuietStatelessSessionIdlesItsChildFromItsLastExchange(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	h := tp.HTTPHandler()
	c := &httpClient{t: t, url: newHTTPFrontOf(t, h) + "/mcp/srv"}
	if m := c.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},` + modernMeta + `}}`); m.text() != "x" {
		t.Fatalf("the call: %+v", m)
	}
	var last time.Time
	eventually(t, "the exchange to end", func() bool {
		last = pool.StatelessLastUsed(h, "srv")
		return !last.IsZero() && len(tp.Snapshot().InFlight) == 0 && pool.HTTPStatelessExchanges(h, "srv") == 0
	})

	pool.ExpireHTTPIdle(h, last.Add(pool.DefaultIdleTimeout-time.Second))
	if len(tp.Snapshot().Sessions) != 1 {
		t.Fatal("the stateless session ended before its server's idleTimeout had passed since its last exchange")
	}
	pool.ExpireHTTPIdle(h, last.Add(pool.DefaultIdleTimeout))
	eventually(t, "the quiet stateless session to end", func() bool { return len(tp.Snapshot().Sessions) == 0 })
	if got := pool.IdleSince(tp.Pool, "srv"); !got.Equal(last) {
		t.Fatalf("the child is idle since %v, %v after the last exchange; want since the last exchange", got, got.Sub(last))
	}
	if s := tp.Snapshot(); len(s.Backends) != 1 || s.Backends[0].PID == 0 {
		t.Fatalf("the child was stopped before its idleTimeout: %+v", s.Backends)
	}
}
