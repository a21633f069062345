//go:build unix

package pool_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A request keeps the timeout it started with when requestTimeout is
// raised while it is in flight: it times out at the old value, and its
// error and its history say that value. (They said the new one: "did not
// answer tools/call within 30s" of a call that ended after 1 s.)
func TestTimeoutRaisedInFlightNamesTheTimeoutItRanUnder(t *testing.T) {
	var rec recorder
	cfg := fake("srv")
	tp := newTestPool(t, &pool.Options{Record: rec.record}, cfg)
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	tp.applyRequestTimeout(t, &cfg, time.Second)
	c.call("1", "sleep", `{"ms":60000}`)
	eventually(t, "the call written", func() bool {
		s := tp.Snapshot()
		return len(s.InFlight) == 1 && s.InFlight[0].WrittenToChild
	})
	cfg.RequestTimeout = 30 * time.Second
	if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	const want = `server "srv" did not answer tools/call within 1s`
	m, _ := c.recvID("1")
	if m.Error == nil || m.Error.Code != -32001 || m.Error.Message != want {
		t.Fatalf("the call got %s, want error -32001 %q", m.raw, want)
	}
	call := rec.waitFor(t, "the call in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestReceived && e.OriginalID == "1"
	})
	done := rec.waitFor(t, "the call's end in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestDone && e.PoolID == call.PoolID
	})
	if done.Status != pool.StatusTimeout || done.Err != want {
		t.Errorf("history: status %q, error %q; want %q, %q", done.Status, done.Err, pool.StatusTimeout, want)
	}
}

// Lowering requestTimeout spares the requests in flight, which keep the
// one they started with; requests that start after the change get the
// new one.
func TestTimeoutLoweredInFlightSparesTheCallsStarted(t *testing.T) {
	cfg := fake("srv")
	cfg.RequestTimeout = 30 * time.Second
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	c.call("1", "sleep", `{"ms":1500}`)
	eventually(t, "the first call written", func() bool {
		s := tp.Snapshot()
		return len(s.InFlight) == 1 && s.InFlight[0].WrittenToChild
	})
	cfg.RequestTimeout = 200 * time.Millisecond
	if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	c.call("2", "sleep", `{"ms":60000}`)
	m, _ := c.recvID("2")
	if m.Error == nil || !strings.Contains(m.Error.Message, "did not answer tools/call within 200ms") {
		t.Fatalf("the call made after the change got %s, want a timeout after 200ms", m.raw)
	}
	if m, _ := c.recvID("1"); m.Error != nil || m.text() != "slept 1500" {
		t.Errorf("the call in flight during the change got %s, want its answer", m.raw)
	}
}
