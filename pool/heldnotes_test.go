//go:build unix

package pool_test

import (
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// heapInUse is the heap the program's live objects hold, after a GC.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// logText is what l holds so far.
func logText(l *logBuffer) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A client that does not answer the pool's roots/list cannot pile up
// tiny notifications without end while the pool holds what it sends:
// past 4,096 held, one is dropped, as one past the session's bytes is,
// and the pool says so once; its requests are still held, and all goes
// on once it answers. Before, they were bounded by their bytes alone
// (128 MiB by default), and each 30-byte one cost the pool 96 bytes: a
// client could make the pool hold 400 MB. Here 100,000 more than the
// bound would hold about 10 MB.
func TestHeldNotificationsAreBoundedInNumber(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(10 * time.Minute)) // the hold ends when the client answers
	logs := &logBuffer{}
	tp := newTestPool(t, &pool.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}, fake("fs"))
	c := tp.dial(t, "fs")
	c.patience = time.Minute // 100,000 lines under -race
	c.initialize("flood", `{"roots":{"listChanged":true}}`)
	ask := c.recv() // left unanswered until the flood is in
	if ask.Method != "roots/list" {
		t.Fatalf("want the pool's roots/list, got %s", ask.raw)
	}
	const bound, past = 4096, 100000
	note := `{"jsonrpc":"2.0","method":"x"}` + "\n"
	before := heapInUse()
	c.send(strings.Repeat(note, bound+past) + `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	c.recvID(`"p"`) // the flood is read: held or dropped
	grew := heapInUse() - before
	t.Logf("%d tiny notifications held or dropped: the heap grew by %d bytes", bound+past, grew)
	if limit := int64(2 << 20); grew > limit {
		t.Errorf("holding %d tiny notifications grew the heap by %d bytes (%.0f a notification), want at most %d",
			bound+past, grew, float64(grew)/(bound+past), limit)
	}
	const said = "refusing what a client sends while it does not answer the pool's roots/list"
	if n := logs.count(said); n != 1 {
		t.Errorf("the pool said %d times that it dropped notifications past the bound, want once:\n%s", n, logText(logs))
	}
	if want := fmt.Sprintf("this session sent %d notifications that wait", bound); logs.count(want) != 1 {
		t.Errorf("the log does not say why (%q):\n%s", want, logText(logs))
	}

	c.call(`"held"`, "echo", `{"text":"held"}`) // a request is held still: it has its own bound
	eventually(t, "the call held", func() bool { _, ok := heldInFlight(tp, `"held"`); return ok })
	c.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[]}}`, ask.ID)
	if m, _ := c.recvID(`"held"`); m.text() != "held" {
		t.Fatalf("the held call once the client answered: %s", m.raw)
	}
}
