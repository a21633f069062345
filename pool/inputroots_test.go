//go:build unix

package pool_test

import (
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
