//go:build linux

package pool_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// A request that waits for its child's handshake is owed from then: the
// shim's ledger lists it, not written, so that a pool killed during the
// wait (an npx server installing itself) leaves it for the next pool to
// answer as not run. It leaves the ledger as its wait ends: answered (a
// setLevel the child answers, once the child did; a listen, once its
// client cancels it: open, it is owed the end of its stream), cancelled by the user
// (once the cancel's error is written), or handed back to the shim
// unanswered (before the Farewell: the next pool reads it as input, and
// must not answer it as owed too). Before, such a wait had no ledger
// slot: a kill lost it, and its client waited for an answer that never
// came.
func TestLedgerOwesARequestWaitingForItsChild(t *testing.T) {
	initialize := waitingRequest{method: "initialize", id: "0",
		line:   `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}`,
		answer: `"protocolVersion"`}
	for _, rq := range append([]waitingRequest{initialize}, waitingRequests...) {
		for _, how := range []string{"answered", "cancelled", "handed back"} {
			t.Run(rq.String()+" "+how, func(t *testing.T) {
				file, ledger := newLedger(t)
				w := startWaitingLedger(t, rq, true, file, &pool.Options{StopGrace: 300 * time.Millisecond})
				listed := func() (wire.Lost, bool) {
					for _, l := range ledger() {
						if l.ID == rq.id {
							return l, true
						}
					}
					return wire.Lost{}, false
				}
				eventually(t, rq.method+" waiting for its child, in the ledger", func() bool { _, ok := listed(); return ok },
					func() string { return fmt.Sprintf("it lists %+v", ledger()) })
				if l, _ := listed(); l.Written {
					t.Errorf("the ledger says the waiting %s was written to a child: %+v", rq.method, l)
				}

				switch how {
				case "answered":
					letStart(t, w.gate)
					for {
						m := w.a.next(t)
						if rq.method == "subscriptions/listen" && m.Method == "notifications/subscriptions/acknowledged" {
							// Open: owed the end of its stream, in the
							// same slot, until the client cancels it.
							eventually(t, "the open listen in the ledger", func() bool {
								l, ok := listed()
								return ok && l.Listen && !l.Written && len(ledger()) == 1
							}, func() string { return fmt.Sprintf("it lists %+v", ledger()) })
							if _, err := w.a.in.WriteString(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + rq.id + `}}` + "\n"); err != nil {
								t.Fatal(err)
							}
							break
						}
						if m.Method == "" && string(m.ID) == rq.id {
							if m.Error != nil || !strings.Contains(m.raw, rq.answer) {
								t.Fatalf("%s once the child started: %s; want %s", rq.method, m.raw, rq.answer)
							}
							break
						}
					}
				case "cancelled":
					if err := w.tp.Cancel(w.r.PoolID); err != nil {
						t.Fatal(err)
					}
					if m := w.a.next(t); string(m.ID) != rq.id || m.Error == nil || !strings.Contains(m.Error.Message, "cancelled") {
						t.Fatalf("want the cancel's error, got %s", m.raw)
					}
					letStart(t, w.gate)
				case "handed back":
					stopped := make(chan struct{})
					go func() {
						defer close(stopped)
						w.tp.Close()
					}()
					bye := w.a.goodbye(10 * time.Second)
					lost := ledger() // what the shim reads, then
					letStart(t, w.gate)
					<-stopped
					if string(bye.Pending) != rq.line+"\n" {
						t.Fatalf("Pending %q, want the %s", bye.Pending, rq.method)
					}
					if lists(lost, rq.id) {
						t.Fatalf("the %s went back to the shim and is still owed in the ledger (%+v): the next pool would answer it twice",
							rq.method, lost)
					}
					return
				}
				// Released once the answer's write returned, maybe after the client read it.
				eventually(t, "the ledger to list nothing once the wait ended", func() bool { return len(ledger()) == 0 },
					func() string { return fmt.Sprintf("it still lists %+v", ledger()) })
			})
		}
	}
}
