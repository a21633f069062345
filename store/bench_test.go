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
// nothing is dropped and the rate is the writer's. Every request is one
// row, written when it ends.
//
//   - folded: one request in flight at a time.
//   - window: 512 requests in flight (64 sessions x 8), journaled while
//     they are.
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
		{"window", 512, false},
		{"capture", 0, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "history.db"), &Options{CapturePayloads: bc.capture})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			high, low := s.opts.QueueSize*3/4, s.opts.QueueSize/4
			emit := func(e pool.Event) {
				if e.Kind == pool.EventRequestDone && s.rec.pending() > high {
					for s.rec.pending() > low {
						time.Sleep(50 * time.Microsecond) // pacing the producer, not synchronising
					}
				}
				s.Record(e)
			}
			b.ReportAllocs()
			b.ResetTimer()
			start, cpu := time.Now(), processCPU()
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
			elapsed, cpu := time.Since(start), processCPU()-cpu
			b.StopTimer()
			if n := s.Dropped(); n != 0 {
				b.Fatalf("dropped %d events", n)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "requests/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/request")
		})
	}
}

// BenchmarkRecordCall is the hot-path cost Record adds to the pool per
// request: its three calls (Received, Written, Done), each a few stores
// under a mutex (the writer drains the rows meanwhile; when it falls
// behind, Done drops and counts).
func BenchmarkRecordCall(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "history.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	r := pool.Event{Kind: pool.EventRequestReceived, Time: now, Server: "memory", Session: "s12", Method: "tools/call",
		Name: "search", OriginalID: "17", Size: 180}
	w := pool.Event{Kind: pool.EventRequestWritten, Time: now, Server: "memory", Session: "s12", PID: 4242}
	d := pool.Event{Kind: pool.EventRequestDone, Time: now, Server: "memory", Session: "s12", PID: 4242, Method: "tools/call",
		Name: "search", Status: pool.StatusOK, Size: 120, Written: true}
	b.ReportAllocs()
	var id uint64
	cpu := processCPU()
	for b.Loop() {
		id++
		r.PoolID, w.PoolID, d.PoolID = id, id, id
		s.Record(r)
		s.Record(w)
		s.Record(d)
	}
	b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/request")
	b.ReportMetric(float64(s.Dropped()), "dropped")
}

func ExampleRedact() {
	fmt.Println(string(Redact([]byte(`{"name":"deploy","arguments":{"apiKey":"sk-123","env":"prod"`))))
	// Output: {"name":"deploy","arguments":{"apiKey":"[REDACTED]","env":"prod"
}
