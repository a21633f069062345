package pool_test

import (
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestSessionChildrenAreBounded: a server with share "session" starts a
// child for each session, each a process (and an OS thread in the pool),
// so a local process opening session after session could start child
// after child. Past the server's share of children (MaxRootsChildren) a
// new session's requests are refused (-32004, saying why) while the
// sessions that have a child go on; once one of them ends, its place is
// free again.
func TestSessionChildrenAreBounded(t *testing.T) {
	cfg := fake("srv")
	cfg.Share = pool.ShareSession
	tp := newTestPool(t, &pool.Options{MaxRootsChildren: 2}, cfg)
	first, second := tp.dial(t, "srv"), tp.dial(t, "srv")
	first.initialize("first", "")
	second.initialize("second", "")
	askPID := func(c *client, id string) msg {
		c.call(id, "pid", `{}`)
		m, _ := c.recvID(id)
		return m
	}
	firstPID, secondPID := askPID(first, "1").text(), askPID(second, "1").text()
	if firstPID == "" || secondPID == "" {
		t.Fatalf("no pid from the sessions' children: %q, %q", firstPID, secondPID)
	}
	if firstPID == secondPID {
		t.Fatalf("share \"session\" gave two sessions one child: %s", firstPID)
	}
	third := tp.dial(t, "srv")
	third.initialize("third", "") // answered from the server's handshake: no child of its own yet
	if m := askPID(third, "1"); m.Error == nil || m.Error.Code != -32004 || !strings.Contains(m.Error.Message, "session") {
		t.Fatalf("a third session past the limit of children: %.300s", m.raw)
	}
	if n := len(tp.Snapshot().Backends); n > 2 {
		t.Fatalf("the server runs %d children, past its limit of 2", n)
	}
	if got := askPID(second, "2").text(); got != secondPID {
		t.Fatalf("the second session after the refusal: child %s, want %s", got, secondPID)
	}
	first.close()
	eventually(t, "the third session's child once the first session ended", func() bool {
		return askPID(third, "2").Error == nil
	})
}
