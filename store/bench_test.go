package store

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// BenchmarkRecord measures sustained recording: each op is one request
// (Received, Written, Done) through Record to a committed row, on a real
// database file. The producer waits while the queue is nearly full, so
// nothing is dropped and the rate is the writer's.
//
//   - folded: requests end within a batch (the common case under load):
//     one INSERT each.
//   - window: 10,000 requests in flight, so each request's Written and Done
//     arrive batches after its Received: an INSERT and two UPDATEs each.
//   - capture: folded, with 4 KiB payload capture and redaction on.
func BenchmarkRecord(b *testing.B) {
	req := []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"search","arguments":` +
		`{"query":"how do I rotate my api key","limit":10,"token":"sk-live-0123456789"}}}`)
	resp := []byte(`{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"Go to settings, then keys."}]}}`)
	for _, bc := range []struct {
		name    string
		window  uint64
		capture bool
	}{
		{"folded", 0, false},
		{"window", 10_000, false},
		{"capture", 0, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "history.db"), &Options{CapturePayloads: bc.capture})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			high, low := cap(s.queue)*3/4, cap(s.queue)/4
			emit := func(e pool.Event) {
				if len(s.queue) > high {
					for len(s.queue) > low {
						time.Sleep(50 * time.Microsecond) // pacing the producer, not synchronising
					}
				}
				s.Record(e)
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := uint64(1); i <= uint64(b.N)+bc.window; i++ {
				now := time.Now()
				if i <= uint64(b.N) {
					r := pool.Event{Kind: pool.EventRequestReceived, Time: now, Server: "memory", Session: "s12", PoolID: i,
						Method: "tools/call", Name: "search", OriginalID: "17", Size: len(req)}
					if bc.capture {
						r.Payload = req
					}
					emit(r)
					emit(pool.Event{Kind: pool.EventRequestWritten, Time: now, Server: "memory", Session: "s12", PoolID: i, PID: 4242})
				}
				if i > bc.window {
					d := pool.Event{Kind: pool.EventRequestDone, Time: now, Server: "memory", Session: "s12", PoolID: i - bc.window,
						PID: 4242, Method: "tools/call", Name: "search", Status: pool.StatusOK, Size: len(resp), Written: true}
					if bc.capture {
						d.Payload = resp
					}
					emit(d)
				}
			}
			if err := s.flush(); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if n := s.Dropped(); n != 0 {
				b.Fatalf("dropped %d events", n)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "requests/s")
		})
	}
}

// BenchmarkRecordCall is the hot-path cost Record adds to the pool: one
// non-blocking enqueue (the queue is drained by the writer meanwhile).
func BenchmarkRecordCall(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "history.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	e := pool.Event{Kind: pool.EventRequestWritten, Time: time.Now(), Server: "memory", Session: "s1", PoolID: 1 << 62, PID: 1}
	b.ReportAllocs()
	for b.Loop() {
		s.Record(e)
	}
	b.ReportMetric(float64(s.Dropped()), "dropped")
}

func ExampleRedact() {
	fmt.Println(string(Redact([]byte(`{"name":"deploy","arguments":{"apiKey":"sk-123","env":"prod"`))))
	// Output: {"name":"deploy","arguments":{"apiKey":"[REDACTED]","env":"prod"
}
