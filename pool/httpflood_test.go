package pool_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A child flooding a million tiny log messages (floodSteps) (a few bytes of data each,
// where each message held costs the pool more than its bytes) at an HTTP
// session whose client has no GET stream open, or one it stopped
// reading: what the pool holds for the client stays bounded by count
// (the session queue), not only by bytes, and the heap does not grow
// with the flood.
func TestHTTPLogFloodForAnAbsentOrStalledClientIsBounded(t *testing.T) {
	const queue = 4096 // Options.SessionQueue's default
	for _, stream := range []string{"none", "stalled"} {
		t.Run(stream, func(t *testing.T) {
			tp := newTestPool(t, nil, fake("srv"))
			h, base := newStallFront(t, tp)
			c := &httpClient{t: t, url: base + "/mcp/srv"}
			c.initialize("c")
			if m := c.call(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`); m.Error != nil {
				t.Fatalf("setLevel: %s", m.raw)
			}
			if stream == "stalled" {
				openStalledStream(t, c.url, c.sid) // never read
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			// The child writes its answer after the flood, and the pool
			// reads its lines in order: answered, the flood was routed.
			flood := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"flood","arguments":{"steps":%d}}}`, floodSteps)
			if m := c.call(flood); m.Error != nil || m.text() != fmt.Sprintf("flooded %d", floodSteps) {
				t.Fatalf("flood: %s", m.raw)
			}
			waiting := pool.HTTPStreamWaiting(h, c.sid)
			runtime.GC()
			runtime.ReadMemStats(&after)
			grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("%d log messages flooded: %d wait for the GET stream, the heap grew by %d KiB", floodSteps, waiting, grew>>10)
			if waiting > queue {
				t.Errorf("%d messages wait for the GET stream, want at most %d", waiting, queue)
			}
			if stream == "none" && waiting != 0 {
				t.Errorf("%d log messages wait for a GET stream that is not open, want them dropped", waiting)
			}
			if grew > 8<<20 { // the flood is 85 bytes a message, 20 MiB and more

				t.Errorf("the heap grew by %d MiB for a flood nobody reads", grew>>20)
			}
		})
	}
}
