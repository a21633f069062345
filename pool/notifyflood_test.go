package pool_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A client that floods a child that stopped reading with notifications
// cannot grow the pool's memory without bound: past its share, its
// notifications are dropped. It is not refused or evicted for it, another
// session's notification to the same child still has room, and other
// children's sessions are served as ever.
func TestNotificationFloodIsBounded(t *testing.T) {
	tp := newTestPool(t, nil, fake("stuck", "-stop-reading-after", "2"), fake("ok"))
	flood := tp.dial(t, "stuck")
	flood.initialize("flood", "") // the child read the pool's initialize and initialized, and reads no more

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	line := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/flood","params":{"pad":%q}}`, strings.Repeat("n", 4<<10))
	batch := make([]string, 1000)
	for i := range batch {
		batch[i] = line
	}
	for range 20 { // 20,000 notifications, 80 MiB
		flood.send(batch...)
	}
	flood.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	if m, _ := flood.recvID(`"p"`); m.Error != nil { // the pool has handled every notification before it
		t.Fatalf("the flooding session's ping: %s", m.raw)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)

	queued := pool.QueuedNotificationBytes(tp.Pool, "stuck")
	if queued > 2<<20 {
		t.Errorf("the stuck child's queue holds %d bytes of notifications, want at most 2 MiB", queued)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 32<<20 {
		t.Errorf("the heap grew by %d MiB for 80 MiB of notifications nobody reads", grew>>20)
	}

	for _, b := range tp.Snapshot().Backends {
		if b.Server == "stuck" && b.DroppedNotifications < 19000 {
			t.Errorf("status shows %d dropped notifications, want the flood's (at least 19,000)", b.DroppedNotifications)
		}
	}

	other := tp.dial(t, "stuck")
	other.initialize("other", "")
	other.send(`{"jsonrpc":"2.0","method":"notifications/other","params":{}}`,
		`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	other.recvID(`"p"`)
	if now := pool.QueuedNotificationBytes(tp.Pool, "stuck"); now <= queued {
		t.Errorf("another session's notification was not queued: %d bytes queued before it, %d after", queued, now)
	}

	ok := tp.dial(t, "ok")
	ok.initialize("ok", "")
	ok.call("1", "echo", `{"text":"hi"}`)
	if m, _ := ok.recvID("1"); m.Error != nil || m.text() != "hi" {
		t.Fatalf("another server's call: %s", m.raw)
	}
}
