package pool_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

const modernToolsList = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`

// A 2026-07-28-only child that answers the pool's server/discover probe
// only after the probe's wait ran out, and refuses at once the initialize
// the pool then sent: its refusal is no failed handshake while
// server/discover may still answer. The first child is the modern child it
// says it is, started once, and neither answer is an orphan.
func TestSlowDiscoverModernChildStarts(t *testing.T) {
	t.Cleanup(pool.SetProbeTimeout(100 * time.Millisecond)) // registered first: restored after the pool closed
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record},
		fake("modern", "-era", "modern", "-discover-delay", "500ms"))
	c := tp.dial(t, "modern")
	c.send(modernToolsList)
	if m, _ := c.recvID("1"); m.Error != nil {
		t.Fatalf("tools/list: %s", m.raw)
	}
	checkOneModernChild(t, tp, &rec, "modern")
}

// A 2026-07-28-only child that refuses the pool's first server/discover
// (not ready yet) and then the initialize the pool falls back to, naming
// 2026-07-28 alone as what it supports: it is modern, asked server/discover
// again, and started as such.
func TestModernChildRefusingInitializeIsProbedAgain(t *testing.T) {
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record},
		fake("modern", "-era", "modern", "-discover-refusals", "1"))
	c := tp.dial(t, "modern")
	c.send(modernToolsList)
	if m, _ := c.recvID("1"); m.Error != nil {
		t.Fatalf("tools/list: %s", m.raw)
	}
	checkOneModernChild(t, tp, &rec, "modern")
}

// checkOneModernChild checks that server's child is modern, that it is the
// only one started, and that no answer of its handshake was an orphan.
func checkOneModernChild(t *testing.T, tp *testPool, rec *recorder, server string) {
	t.Helper()
	if b := backendInfo(tp, server); b.Era != pool.EraModern || b.Restarts != 0 || b.Orphaned != 0 {
		t.Errorf("backend: era %q, %d restarts, %d orphaned; want modern, none, none", b.Era, b.Restarts, b.Orphaned)
	}
	started := func(e pool.Event) bool { return e.Kind == pool.EventBackendStarted }
	rec.waitFor(t, "the child's start to be recorded", started) // in the background
	if n := len(rec.find(started)); n != 1 {
		t.Errorf("%d children started, want 1", n)
	}
	if n := tp.Snapshot().Counters.Orphaned; n != 0 {
		t.Errorf("%d orphans, want none", n)
	}
}

// A 2026-07-28-only child that refuses initialize and never answers
// server/discover fails at the handshake timeout, not at once, with an
// error that says both: what did not answer, and what was refused.
func TestModernChildSilentOnDiscoverFailsAtTheHandshakeTimeout(t *testing.T) {
	t.Cleanup(pool.SetProbeTimeout(100 * time.Millisecond))
	const timeout = 500 * time.Millisecond
	tp := newTestPool(t, &pool.Options{HandshakeTimeout: timeout, Restart: pool.RestartPolicy{MaxRestarts: 1}},
		fake("modern", "-era", "modern", "-discover-delay", "1h"))
	c := tp.dial(t, "modern")
	began := time.Now()
	c.send(modernToolsList)
	m := c.recv()
	if m.Error == nil {
		t.Fatalf("tools/list answered: %s", m.raw)
	}
	for _, want := range []string{"no answer to server/discover within 500ms", "initialize failed", "speaks only 2026-07-28"} {
		if !strings.Contains(m.Error.Message, want) {
			t.Errorf("error %q does not say %q", m.Error.Message, want)
		}
	}
	if took := time.Since(began); took < timeout {
		t.Errorf("failed after %v, before the handshake timeout %v", took, timeout)
	}
}

// A 2026-07-28-only child that refuses server/discover twice and
// initialize between them fails at once, saying why each failed.
func TestModernChildRefusingBothFailsWithBothReasons(t *testing.T) {
	tp := newTestPool(t, &pool.Options{HandshakeTimeout: time.Hour, Restart: pool.RestartPolicy{MaxRestarts: 1}},
		fake("modern", "-era", "modern", "-discover-refusals", "2"))
	c := tp.dial(t, "modern")
	c.send(modernToolsList)
	m := c.recv()
	if m.Error == nil {
		t.Fatalf("tools/list answered: %s", m.raw)
	}
	for _, want := range []string{"server/discover failed", "not ready to answer server/discover", "initialize failed", "speaks only 2026-07-28"} {
		if !strings.Contains(m.Error.Message, want) {
			t.Errorf("error %q does not say %q", m.Error.Message, want)
		}
	}
}

// A child of both eras that answers server/discover only after it
// answered the initialize the pool sent once the probe's wait ran out is
// a legacy child for its life: initialized, it has a legacy session
// (modern clients are served through the pool's bridge); its late
// DiscoverResult is no orphan.
func TestSlowDiscoverDualEraChildIsLegacy(t *testing.T) {
	t.Cleanup(pool.SetProbeTimeout(100 * time.Millisecond))
	logs := &logBuffer{}
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		fake("both", "-era", "both", "-discover-delay", "500ms"))
	c := tp.dial(t, "both")
	c.send(modernToolsList)
	if m, _ := c.recvID("1"); m.Error != nil {
		t.Fatalf("tools/list: %s", m.raw)
	}
	eventually(t, "the child's late answer to server/discover", func() bool {
		return tp.Snapshot().Counters.Orphaned > 0 || logs.count("late answer to its handshake probe") > 0
	})
	if b := backendInfo(tp, "both"); b.Era != pool.EraLegacy || b.Orphaned != 0 {
		t.Errorf("backend: era %q, %d orphaned; want legacy, none", b.Era, b.Orphaned)
	}
	if n := len(rec.find(func(e pool.Event) bool { return e.Kind == pool.EventOrphan })); n != 0 {
		t.Errorf("%d orphans recorded, want none", n)
	}
}
