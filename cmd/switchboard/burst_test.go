//go:build linux

package main

import (
	"fmt"
	"testing"
	"time"
)

// A client that stops reading while 64 MiB of answers pile up for it is
// evicted, and the pool gives the memory back: its resident size returns
// to within twice its resting size within a minute. The answers are
// 512 KiB each, under the size at which a single message already makes
// the pool hand memory back, so only the eviction can.
func TestStalledClientsBacklogIsHandedBack(t *testing.T) {
	if testing.Short() {
		t.Skip("queues 64 MiB in the pool")
	}
	// Long enough for the child to answer all of it on a loaded machine
	// before the eviction (2 s was not, once: the peak was 12 MiB).
	cfg := fmt.Sprintf(`{"evictSlowClientsAfter": "6s", "history": {"disabled": true}, "mcpServers":{"fake":{"command":%q}}}`, fakeBin)
	in := servePlain(t, cfg) // its RSS is measured: no race detector
	pid := in.cmd.Process.Pid

	healthy := in.connect(t, "fake")
	healthy.initialize("healthy")
	call := func(id string) {
		t.Helper()
		healthy.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{"name":"echo","arguments":{"text":"` + id + `"}}}`)
		if got := toolText(healthy.recvID(`"` + id + `"`)); got != id {
			t.Fatalf("echo %s answered %q", id, got)
		}
	}
	for i := range 50 {
		call(fmt.Sprint("warm-", i))
	}
	resting := rssKB(t, pid)

	const answers, size = 128, 512 << 10
	stalled := in.connect(t, "fake")
	stalled.initialize("stalled")
	for i := range answers {
		stalled.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{"bytes":%d}}}`, i, size))
	}
	peak := 0
	waitFor(t, "the stalled client to be evicted", func() bool {
		peak = max(peak, rssKB(t, pid))
		return in.status().Counters.Evicted > 0
	})
	call("after the eviction") // the others never noticed

	start := time.Now()
	var now int
	waitForWithin(t, time.Minute, fmt.Sprintf("the pool's RSS back within twice its resting %d KiB (peak %d KiB)", resting, peak), func() bool {
		now = rssKB(t, pid)
		return now <= 2*resting
	})
	t.Logf("pool RSS: resting %d KiB, peak %d KiB, %d KiB %s after the eviction",
		resting, peak, now, time.Since(start).Round(10*time.Millisecond))
	if peak < resting+32<<10 {
		t.Errorf("the peak (%d KiB over %d resting) shows the backlog never built up: the test proves nothing", peak, resting)
	}
}
