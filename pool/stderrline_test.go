package pool_test

import (
	"strings"
	"testing"
)

// One stderr line over 64 KiB (a logged payload) does not silence the
// lines after it: the failure status shows quotes the real cause, and
// status shows the long line cut.
func TestStderrAfterAnOverlongLine(t *testing.T) {
	tp := newTestPool(t, nil, fake("bad", "-stderr-long", "100000", "-stderr", "cannot open database", "-exit-at-start", "1"))
	c := tp.dial(t, "bad")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	m := c.recv()
	if m.Error == nil || !strings.Contains(m.Error.Message, `server "bad" failed`) {
		t.Fatalf("want the failure, got %.600s", m.raw)
	}
	if why := tp.Snapshot().Servers[0].Error; !strings.Contains(why, "cannot open database") {
		t.Fatalf("want the failure with the stderr after the long line, got %.600s", why)
	}
	var tail []string
	eventually(t, "the stderr tail in status", func() bool {
		for _, be := range tp.Snapshot().Backends {
			tail = be.StderrTail
		}
		return len(tail) >= 2
	})
	long, last := tail[len(tail)-2], tail[len(tail)-1]
	if last != "cannot open database" || !strings.HasPrefix(long, "zzz") || !strings.HasSuffix(long, "…") || len(long) > 1024 {
		t.Fatalf("stderr tail ends %.80q (%d bytes), %q", long, len(long), last)
	}
}
