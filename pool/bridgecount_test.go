package pool_test

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestBridgedCallEndsAsAnyCall: a legacy client's call whose 2026-07-28
// child asked its client a question ends as any call does, in the pool's
// counters and in history: at its timeout (the client did not answer), a
// timeout and an error; cancelled by the user, a cancel and an error;
// cancelled by its client, a cancel. Each is checked against a plain call
// that ends the same way. On the first edition the bridged call's end was
// its round's own: its timeout counted nothing, the user's cancel no
// error, and its client's cancel nothing.
func TestBridgedCallEndsAsAnyCall(t *testing.T) {
	type counts struct{ errors, timeouts, cancelled uint64 }
	ends := []struct {
		name   string
		end    func(t *testing.T, tp *testPool, c *client) // ends the call "call"
		code   int                                         // the client's error; 0: no answer
		status string
		want   counts
	}{
		{"timed out", func(*testing.T, *testPool, *client) {}, -32001, pool.StatusTimeout, counts{errors: 1, timeouts: 1}},
		{"cancelled by the user", func(t *testing.T, tp *testPool, _ *client) {
			in := tp.Snapshot().InFlight
			if len(in) != 1 {
				t.Fatalf("in flight %+v, want the call", in)
			}
			if err := tp.Cancel(in[0].PoolID); err != nil {
				t.Fatal(err)
			}
		}, -32007, pool.StatusCancelled, counts{errors: 1, cancelled: 1}},
		{"cancelled by its client", func(_ *testing.T, _ *testPool, c *client) {
			c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call","reason":"user"}}`)
		}, 0, pool.StatusCancelled, counts{cancelled: 1}},
	}
	calls := []struct {
		name  string
		start func(t *testing.T, tp *testPool, c *client) // starts the call "call"
	}{
		{"plain", func(t *testing.T, tp *testPool, c *client) {
			c.call(`"call"`, "sleep", `{"ms":60000}`)
			eventually(t, "the call in flight", func() bool { return len(tp.Snapshot().InFlight) == 1 })
		}},
		{"bridged", func(_ *testing.T, _ *testPool, c *client) { c.question(`"call"`, "elicitation") }},
	}
	for _, end := range ends {
		for _, call := range calls {
			t.Run(call.name+" "+end.name, func(t *testing.T) {
				keep, timeout := time.Minute, time.Duration(0) // the default: a minute or more
				if end.code == -32001 {
					keep, timeout = 100*time.Millisecond, time.Second
				}
				t.Cleanup(pool.SetHoldKeep(keep)) // restored once the pool has closed
				var rec recorder
				cfg := fake("srv", "-era", "modern")
				tp := newTestPool(t, &pool.Options{Record: rec.record}, cfg)
				c := tp.dial(t, "srv")
				c.initialize("person", `{"elicitation":{}}`)
				if timeout != 0 {
					tp.applyRequestTimeout(t, &cfg, timeout)
				}
				call.start(t, tp, c)
				end.end(t, tp, c)
				if end.code != 0 {
					if m, _ := c.recvID(`"call"`); m.Error == nil || m.Error.Code != end.code {
						t.Fatalf("want %d, got %s", end.code, m.raw)
					}
				}
				done := rec.waitFor(t, "the call's end in history", func(e pool.Event) bool {
					return e.Kind == pool.EventRequestDone && e.Method == "tools/call"
				})
				// Counted before its end is recorded: now or never.
				n := tp.Snapshot().Counters
				if got := (counts{n.Errors, n.Timeouts, n.Cancelled}); got != end.want {
					t.Errorf("counters %+v, want %+v", got, end.want)
				}
				if done.Status != end.status || done.ErrCode != end.code || !done.Written {
					t.Errorf("its end in history %+v; want %s, code %d, written", done, end.status, end.code)
				}
				c.call(`"after"`, "echo", `{"text":"after"}`)
				if m, _ := c.recvID(`"after"`); m.text() != "after" {
					t.Fatalf("the call after: %s", m.raw)
				}
				rec.waitFor(t, "the call after in history", func(e pool.Event) bool {
					return e.Kind == pool.EventRequestDone && e.Name == "echo"
				})
				if all := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.Name == done.Name }); len(all) != 1 {
					t.Errorf("the call's ends in history %+v; want one", all)
				}
			})
		}
	}
}
