//go:build unix

package pool_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestModernChildRootsAnsweredByThePool: a modern child's roots/list,
// asked as an input_required entry of a legacy client's call, is
// answered by the pool from the session's roots partition, as a legacy
// child's roots/list is: the client (which declared roots) is never
// asked, and gets the call's result, not -32006. Each partition's child
// is told only its own roots; a session's own child, its session's.
func TestModernChildRootsAnsweredByThePool(t *testing.T) {
	for _, share := range []pool.Share{pool.ShareShared, pool.ShareSession} {
		t.Run(string(share), func(t *testing.T) { modernChildRoots(t, share) })
	}
}

func modernChildRoots(t *testing.T, share pool.Share) {
	cfg := fake("srv", "-era", "modern")
	cfg.Share = share
	tp := newTestPool(t, nil, cfg)
	a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
	a.initRoots("a", "file:///work/a")
	b.initRoots("b", "file:///work/b")

	for _, tc := range []struct {
		c         *client
		want, not string
	}{{a, "file:///work/a", "file:///work/b"}, {b, "file:///work/b", "file:///work/a"}} {
		tc.c.call(`"r"`, "ask", `{"kind":"roots"}`)
		m, other := tc.c.recvID(`"r"`)
		for _, o := range other {
			if o.Method != "" {
				t.Errorf("the child's question reached the client: %s", o.raw)
			}
		}
		if m.Error != nil {
			t.Fatalf("ask roots of a modern child: %s", m.raw)
		}
		if got := m.text(); !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
			t.Errorf("the child was given roots %s, want only %s", got, tc.want)
		}
	}

	// The other questions still go to the client.
	s := tp.dial(t, "srv")
	s.initialize("sampler", `{"sampling":{}}`)
	s.call(`"s"`, "ask", `{"kind":"sampling"}`)
	if q := s.recv(); q.Method != "sampling/createMessage" {
		t.Fatalf("want the child's sampling question, got %s", q.raw)
	} else {
		s.send(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`)
	}
	if m, _ := s.recvID(`"s"`); m.Error != nil || !strings.Contains(m.text(), "forty-two") {
		t.Fatalf("sampling through a modern child: %s", m.raw)
	}
}

// A 2026-07-28 child that answers a call with input_required round after
// round is given up after 32 rounds: the client gets the error, and the
// child hears nothing more of the call. Here each round asks only
// roots/list, which the pool answers itself, so no client paces the
// rounds; unbounded, the pool and the child would retry each other for
// ever.
func TestInputRoundsOfACallAreBounded(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-era", "modern", "-log", logPath))
	c := tp.dial(t, "srv")
	c.initRoots("a", "file:///work/a")

	c.call(`"r"`, "ask", `{"kind":"roots","again":true}`)
	m, other := c.recvID(`"r"`)
	for _, o := range other {
		t.Errorf("the client was sent %s", o.raw)
	}
	if m.Error == nil || m.Error.Code != -32603 || !strings.Contains(m.Error.Message, "asked for input 32 times") {
		t.Fatalf("a call asked for input without end: %s, want -32603 after 32 rounds", m.raw)
	}
	// A call after the error: the log then holds all the child heard of
	// the first, the call and its 32 retries.
	c.call(`"e"`, "echo", `{"text":"after"}`)
	c.recvID(`"e"`)
	asks := 0
	for _, l := range childLog(t, logPath) {
		if params, _ := l["params"].(map[string]any); l["method"] == "tools/call" && params["name"] == "ask" {
			asks++
		}
	}
	if asks != 1+32 {
		t.Errorf("the child heard the call %d times, want once and 32 retries", asks)
	}
}
