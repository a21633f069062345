package pool_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestThousandSessionsOneChild: 1,000 sessions on one child, each with a
// call in flight at once under the same id: every one gets its own answer.
func TestThousandSessionsOneChild(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	const n = 1000
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = tp.dial(t, "srv")
		clients[i].initialize(fmt.Sprint("c", i), "")
	}
	for i, c := range clients {
		c.call("1", "echo", fmt.Sprintf(`{"text":"c%d"}`, i))
	}
	for i, c := range clients {
		if m, _ := c.recvID("1"); m.text() != fmt.Sprint("c", i) {
			t.Fatalf("session %d got %s", i, m.raw)
		}
	}
	if b := tp.Snapshot().Backends; len(b) != 1 || b[0].Sessions != n {
		t.Fatalf("backends: %+v", b)
	}
}

// TestFiftyServersTenSessionsEach: 50 configured servers, 10 sessions on
// each, all calling at once: 50 children, every answer from the right one.
func TestFiftyServersTenSessionsEach(t *testing.T) {
	var servers []pool.ServerConfig
	for i := range 50 {
		servers = append(servers, fake(fmt.Sprint("srv", i)))
	}
	tp := newTestPool(t, nil, servers...)
	var wg sync.WaitGroup
	for i := range 50 {
		for j := range 10 {
			c := tp.dial(t, fmt.Sprint("srv", i))
			wg.Go(func() {
				c.initialize(fmt.Sprintf("c%d-%d", i, j), "")
				c.call("7", "echo", fmt.Sprintf(`{"text":"srv%d/%d"}`, i, j))
				if m, _ := c.recvID("7"); m.text() != fmt.Sprintf("srv%d/%d", i, j) {
					t.Errorf("srv%d session %d got %s", i, j, m.raw)
				}
			})
		}
	}
	wg.Wait()
	snap := tp.Snapshot()
	pids := map[int]bool{}
	for _, b := range snap.Backends {
		pids[b.PID] = true
	}
	if len(snap.Backends) != 50 || len(pids) != 50 || len(snap.Sessions) != 500 {
		t.Fatalf("%d backends, %d distinct PIDs, %d sessions; want 50, 50, 500", len(snap.Backends), len(pids), len(snap.Sessions))
	}
}

// TestSixteenMiBResult: a 16 MiB tool result reaches its client whole,
// and the pool allocates a small multiple of it, not a quadratic amount.
func TestSixteenMiBResult(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := tp.dial(t, "srv")
	c.patience = time.Minute // 16 MiB through two processes under -race
	c.initialize("big", "")
	const size = 16 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c.call("1", "big", fmt.Sprintf(`{"bytes":%d}`, size))
	m, _ := c.recvID("1")
	runtime.ReadMemStats(&after)
	if got := len(m.text()); got != size {
		t.Fatalf("result text of %d bytes, want %d (%.200s)", got, size, m.raw)
	}
	// The test's own client decodes the line (about 3 copies); the pool
	// reads, rewrites and writes it (a few more). Quadratic copying would
	// be terabytes.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16*size {
		t.Fatalf("allocated %d MiB for one %d MiB message", alloc>>20, size>>20)
	} else {
		t.Logf("allocated %d MiB (pool and test client together) for one %d MiB message", alloc>>20, size>>20)
	}
}

// TestMessagesAtTheSizeLimit: an answer just under the limit passes, one
// just over fails with -32005 naming the limit, and the session goes on.
func TestMessagesAtTheSizeLimit(t *testing.T) {
	const limit = 64 << 10
	tp := newTestPool(t, &pool.Options{MaxMessageBytes: limit}, fake("srv"))
	c := tp.dial(t, "srv")
	c.initialize("edge", "")
	// The fake's envelope around the text is under 200 bytes.
	c.call("1", "big", fmt.Sprintf(`{"bytes":%d}`, limit-300))
	if m, _ := c.recvID("1"); len(m.text()) != limit-300 {
		t.Fatalf("just under the limit: %.200s", m.raw)
	}
	c.call("2", "big", fmt.Sprintf(`{"bytes":%d}`, limit+1))
	if m, _ := c.recvID("2"); m.Error == nil || m.Error.Code != -32005 {
		t.Fatalf("just over the limit: %.300s", m.raw)
	}
	c.call("3", "echo", `{"text":"still here"}`)
	if m, _ := c.recvID("3"); m.text() != "still here" {
		t.Fatalf("after the oversize answer: %s", m.raw)
	}
}
