//go:build unix

package pool_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// A request waiting for its starting child (initialize, and the others
// the pool answers from the child's handshake) when its server is
// removed from the config, or disabled, is answered at once that the
// server was removed (disabled): -32000, not retryable, not run. History
// records it failed for that reason, not cancelled by its client. A
// removed server's session then ends, as it does for a removed server;
// a disabled one's goes on, its next request refused at once. (A removal
// closed the session at once, the request unanswered and recorded as
// "the session ended"; a disable left it waiting for the child's start.)
func TestWaitForARemovedOrDisabledServerIsAnswered(t *testing.T) {
	initialize := waitingRequest{method: "initialize", id: "7", line: initializeLine}
	for _, rq := range append([]waitingRequest{initialize}, waitingRequests...) {
		for _, how := range []string{"removed", "disabled"} {
			t.Run(rq.String()+" "+how, func(t *testing.T) {
				var rec recorder
				w := startWaiting(t, rq, true, &pool.Options{Record: rec.record})
				tp, a, r := w.tp, w.a, w.r
				var cfgs []pool.ServerConfig
				why := "removed from the configuration"
				if how == "disabled" {
					w.cfg.Disabled = true
					cfgs, why = []pool.ServerConfig{w.cfg}, "disabled in the config"
				}
				if err := tp.Apply(cfgs); err != nil {
					t.Fatal(err)
				}

				m := a.next(t)
				if string(m.ID) != rq.id || m.Error == nil || !strings.Contains(m.Error.Message, why) {
					t.Fatalf("the client got %s; want %s answered that the server was %s", m.raw, rq.method, how)
				}
				if code, data := errorData(t, m); code != jsonrpc.CodeBackendUnavailable || *data.Retryable || *data.MayHaveExecuted {
					t.Errorf("error %s; want %d, not retryable, not run", m.raw, jsonrpc.CodeBackendUnavailable)
				}
				done := rec.waitFor(t, "the wait's end, in history", func(e pool.Event) bool {
					return e.Kind == pool.EventRequestDone && e.PoolID == r.PoolID
				})
				if done.Status != pool.StatusFailed || done.Written || !strings.Contains(done.Err, why) {
					t.Errorf("done: %+v; want failed, not written, saying the server was %s", done, how)
				}
				eventually(t, "nothing in flight", func() bool { return len(tp.Snapshot().InFlight) == 0 },
					func() string { return fmt.Sprintf("%+v", tp.Snapshot().InFlight) })

				if how == "removed" {
					if bye := a.goodbye(10 * time.Second); !strings.Contains(bye.End, why) {
						t.Errorf("farewell %+v; want the session ended as its server was removed", bye)
					}
					if got := a.rest(t); got != "" {
						t.Errorf("after its answer, the client got %s", got)
					}
				} else {
					// Its reader waits no more: the next request is
					// answered, refused as the server is disabled.
					next := cmp.Or(rq.next, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
					if _, err := a.in.WriteString(next + "\n"); err != nil {
						t.Fatal(err)
					}
					if m := a.next(t); string(m.ID) != `9` && string(m.ID) != `"9"` || m.Error == nil || !strings.Contains(m.Error.Message, "disabled") {
						t.Errorf("the next request: %s; want it refused, the server disabled", m.raw)
					}
				}
				if n := len(rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.PoolID == r.PoolID })); n != 1 {
					t.Errorf("%d ends recorded, want 1", n)
				}
				letStart(t, w.gate) // it reads its closed input, and exits: no wait for its stop
			})
		}
	}
}

// next reads the next message the client gets, failing the test if none
// comes within 10 s.
func (a *attached) next(t *testing.T) msg {
	t.Helper()
	_ = a.outFile.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := a.out.ReadString('\n')
	if err != nil {
		t.Fatalf("the client got %q, %v; want a message", line, err)
	}
	m := msg{raw: strings.TrimSpace(line)}
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("the client got %q: %v", line, err)
	}
	return m
}

// A removal and the wait's own reader both end a request waiting for its
// child's handshake, and the reader wins: the session, which ends once
// idle, waits for the reader's answer. Before, the claimed wait was in
// neither the session's requests in flight nor its answers under way,
// so the session closed first and the client's output ended with no
// answer (seen once in CI, for a logging/setLevel).
func TestARemovedServersWaitAnsweredByItsReaderIsDelivered(t *testing.T) {
	for _, rq := range []waitingRequest{
		{method: "initialize", id: "7", line: initializeLine},
		waitingRequests[2], // logging/setLevel, answered by the pool
	} {
		t.Run(rq.String(), func(t *testing.T) {
			readerFirst, restore := pool.LetTheWaitsReaderEndIt()
			t.Cleanup(restore) // after the pool closed: cleanups run last first
			w := startWaiting(t, rq, true, nil)
			if err := w.tp.Apply(nil); err != nil {
				t.Fatal(err)
			}
			m := w.a.next(t)
			if string(m.ID) != rq.id || m.Error == nil || !strings.Contains(m.Error.Message, "removed from the configuration") {
				t.Fatalf("the client got %s; want %s answered that the server was removed", m.raw, rq.method)
			}
			if !readerFirst() {
				t.Fatal("the removal ended the wait before its reader: the race was not run")
			}
			if bye := w.a.goodbye(10 * time.Second); !strings.Contains(bye.End, "removed from the configuration") {
				t.Errorf("farewell %+v; want the session ended as its server was removed", bye)
			}
			letStart(t, w.gate)
		})
	}
}
