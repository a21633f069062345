package pool

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// What the pool holds for an HTTP client that does not read, per tiny
// notification: a GET stream's backlog (bounded by count, the session
// queue, and by bytes) and a POST stream's (bounded by bytes: the client
// that falls past them is let go). Each message held costs the pool its
// line and the entry that queues it; this pins that at a small multiple
// of its bytes, so that the byte bounds bound the memory too, and the
// GET backlog at the session queue's count whatever the flood.
func TestHTTPHeldNotificationCost(t *testing.T) {
	const maxRatio = 3.0 // measured: 2.1 (GET backlog), 1.4 (POST stream) for 85-byte logs
	// note is a log message of a few bytes of data, as a child's flood sends.
	note := func(i int) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}`, i%10)
	}
	t.Run("GET backlog", func(t *testing.T) {
		// A session queue (Options.SessionQueue) of 65,536: a backlog the
		// heap measures well. Its stream is open, and never read.
		const limit, flood = 1 << 16, 200_000
		hs := &httpSession{limit: limit, bound: 64 << 20, wake: make(chan struct{}, 1), stream: true, lastUsed: time.Now()}
		before := heapInUse()
		for i := range flood {
			hs.toStream(note(i), notice("notifications/message"))
		}
		held := heapInUse() - before
		hs.mu.Lock()
		n, size := len(hs.waiting), hs.size
		hs.mu.Unlock()
		t.Logf("%d notes sent, %d held (%d bytes): %d bytes of heap, %.0f per note, %.2f times their bytes", flood, n, size, held, float64(held)/float64(n), float64(held)/float64(size))
		if n > limit {
			t.Errorf("%d notes wait for the stream, want at most %d", n, limit)
		}
		if ratio := float64(held) / float64(size); ratio > maxRatio {
			t.Errorf("the backlog costs %.1f times its bytes, want at most %.0f", ratio, maxRatio)
		}
		runtime.KeepAlive(hs)
	})
	t.Run("POST stream", func(t *testing.T) {
		const flood = 200_000 // under the bound: all held
		x := &exchange{related: &relatedQueue{wake: make(chan struct{}, 1), bound: 64 << 20}}
		before := heapInUse()
		for i := range flood {
			x.relate(note(i))
		}
		held := heapInUse() - before
		q := x.related
		q.mu.Lock()
		n, size, cut := len(q.queued), q.size, q.cut
		q.mu.Unlock()
		t.Logf("%d notes held (%d bytes): %d bytes of heap, %.0f per note, %.2f times their bytes", n, size, held, float64(held)/float64(n), float64(held)/float64(size))
		if cut != nil || n != flood {
			t.Fatalf("%d of %d notes held (cut: %v), want all", n, flood, cut)
		}
		if ratio := float64(held) / float64(size); ratio > maxRatio {
			t.Errorf("the stream's backlog costs %.1f times its bytes, want at most %.0f", ratio, maxRatio)
		}
		runtime.KeepAlive(x)
	})
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
