package pool_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestLongSubscriptionURIsAreRefused: a subscription is kept for the
// session's life and sent again to the child (as its unsubscribe at the
// session's end, and to a restarted child), outside the bytes of its
// requests in flight, so a URI as long as a message may be would let one
// session hold the pool's memory and slow the child every other session
// shares. A subscribe (either era) of a URI past pool.MaxSubscriptionURI
// is refused, that client only, and the child never hears it; one at the
// limit is taken.
func TestLongSubscriptionURIsAreRefused(t *testing.T) {
	log := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", log))
	c := tp.dial(t, "srv")
	c.initialize("long", "")
	long := "fake://" + strings.Repeat("x", pool.MaxSubscriptionURI-len("fake://")+1)
	refused := func(what string, m msg) {
		t.Helper()
		if m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, "limit") {
			t.Fatalf("%s of a URI past the limit: want -32602 naming the limit, got %.300s", what, m.raw)
		}
	}
	c.send(`{"jsonrpc":"2.0","id":"long","method":"resources/subscribe","params":{"uri":"` + long + `"}}`)
	m, _ := c.recvID(`"long"`)
	refused("resources/subscribe", m)

	c.send(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://counter","` + long + `"]},` + modernMeta + `}}`)
	m, _ = c.recvID(`"L"`)
	refused("subscriptions/listen", m)

	atLimit := long[:pool.MaxSubscriptionURI]
	c.send(`{"jsonrpc":"2.0","id":"ok","method":"resources/subscribe","params":{"uri":"` + atLimit + `"}}`)
	if m, _ := c.recvID(`"ok"`); m.Error != nil {
		t.Fatalf("a subscribe of a URI at the limit: %.300s", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	c.recvID(`"p"`)
	for _, e := range childLog(t, log) {
		if e["method"] != "resources/subscribe" {
			continue
		}
		p, _ := e["params"].(map[string]any)
		if uri, _ := p["uri"].(string); len(uri) > pool.MaxSubscriptionURI {
			t.Fatalf("the child was sent a subscribe of a URI past the limit")
		}
	}
	if got := countMethod(childLog(t, log), "resources/subscribe"); got != 1 {
		t.Errorf("the child heard %d subscribes, want the one at the limit", got)
	}
}
