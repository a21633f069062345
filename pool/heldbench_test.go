//go:build unix

package pool_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// BenchmarkHoldRequests measures what taking in one request costs the
// pool while it holds the request for its client's answer to roots/list:
// a client that declared roots and does not answer sends n small
// requests, and ns/op is the time until a ping behind them is answered,
// per request; cpu-ns/op is the process's CPU time meanwhile (client
// included), per request, which a machine busy with other work does not
// inflate. Both stay flat in n: holding a request, and finding it to
// cancel or expire it, does not look through the others held (about
// 1.5 µs of CPU a request). Before, each held request looked through all
// those held before it: about 2, 12 and 54 µs of CPU a request for 1,000,
// 10,000 and 40,000.
func BenchmarkHoldRequests(b *testing.B) {
	b.Cleanup(pool.SetRootsAskTimeout(10 * time.Minute))
	for _, n := range []int{1000, 10000, 40000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			tp := newTestPoolOpts(b, &pool.Options{MaxSessionInFlight: n}, fake("fs"))
			var lines strings.Builder
			for i := range n {
				fmt.Fprintf(&lines, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`+"\n", i)
			}
			lines.WriteString(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
			var took, cpu time.Duration
			for range b.N {
				c := tp.dial(b, "fs")
				c.patience = 10 * time.Minute
				c.initRootsAsked("holder")
				start, cpuStart := time.Now(), cpuTime()
				c.send(lines.String())
				if m, _ := c.recvID(`"p"`); m.Error != nil {
					b.Fatalf("the ping behind the held requests: %s", m.raw)
				}
				took += time.Since(start)
				cpu += cpuTime() - cpuStart
				// Its input closed, the session's ask ends and what it held
				// goes on: done before the next, outside the figures.
				c.close()
				eventually(b, "the session gone, and what it held", func() bool {
					snap := tp.Snapshot()
					return len(snap.Sessions) == 0 && len(snap.InFlight) == 0
				})
			}
			reqs := float64(b.N * n)
			b.ReportMetric(float64(took.Nanoseconds())/reqs, "ns/op")
			b.ReportMetric(float64(cpu.Nanoseconds())/reqs, "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
