package pool_test

import (
	"fmt"
	"testing"
)

// BenchmarkSnapshot measures what the tray and `status` pay per refresh
// with 1,000 live sessions on one child and a request in flight on each.
func BenchmarkSnapshot(b *testing.B) {
	const sessions = 1000
	tp := newTestPoolTB(b, fake("srv"))
	for i := range sessions {
		c := tp.dial(b, "srv")
		c.initialize(fmt.Sprintf("c%d", i), "")
		c.call("1", "sleep", `{"ms":600000}`)
	}
	eventually(b, "1,000 requests in flight", func() bool { return len(tp.Snapshot().InFlight) == sessions })
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s := tp.Snapshot()
		if len(s.Sessions) != sessions {
			b.Fatalf("%d sessions in the snapshot, want %d", len(s.Sessions), sessions)
		}
	}
}
