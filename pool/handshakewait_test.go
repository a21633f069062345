//go:build unix

package pool_test

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// waitingRequest is a client request, other than initialize, that waits
// for its child's handshake when its child is starting.
type waitingRequest struct {
	name, method, line, id string
	flags                  []string // the child's
	legacy                 bool     // a legacy session's; else a 2026-07-28 one's
	answer                 string   // in its answer once the child started
	next                   string   // a call the session can make once its wait ended, id 9
}

var waitingRequests = []waitingRequest{
	{method: "server/discover", id: `"d"`,
		line:   `{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{` + modernMeta + `}}`,
		answer: `"supportedVersions":["2026-07-28"`,
		next:   modernCall("9", "", "c", "echo", `{"text":"after"}`)},
	{method: "subscriptions/listen", id: `"L"`,
		line: `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`,
		next: modernCall("9", "", "c", "echo", `{"text":"after"}`)},
	{method: "logging/setLevel", id: "5", legacy: true,
		line:   `{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"debug"}}`,
		answer: `"result":{}`,
		next:   `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`},
	// A child that declares no logging answers a setLevel itself: once
	// it is up, the request goes on to it, a request of its own.
	{name: "logging/setLevel to the child", method: "logging/setLevel", id: "5", legacy: true,
		flags:  []string{"-logging", "undeclared"},
		line:   `{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"debug"}}`,
		answer: `"result":{}`,
		next:   `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`},
}

// waiting is a request of a session that waits for its child's
// handshake.
type waiting struct {
	tp   *testPool
	c    *client   // its session, dialled; or
	a    *attached // its session, attached as `switchboard connect` attaches it
	r    pool.RequestInfo
	gate string            // its removal lets the child start
	cfg  pool.ServerConfig // its server's
}

// startWaiting opens a session (attached, or dialled) of a server whose
// child is held in its start (-start-while) and sends it rq, which then
// waits for the child's handshake: a 2026-07-28 session's request waits
// for the first child; a legacy session's initialize would, so it
// initializes on a child that starts at once, which is then stopped, and
// rq makes the next one, held. It returns once the snapshot lists rq in
// flight.
func startWaiting(t *testing.T, rq waitingRequest, attach bool, opts *pool.Options, flags ...string) *waiting {
	t.Helper()
	return startWaitingLedger(t, rq, attach, nil, opts, flags...)
}

// startWaitingLedger is startWaiting with an attached session's ledger
// in file (attachLedger), when file is not nil.
func startWaitingLedger(t *testing.T, rq waitingRequest, attach bool, file *os.File, opts *pool.Options, flags ...string) *waiting {
	t.Helper()
	w := &waiting{gate: filepath.Join(t.TempDir(), "starting")}
	hold := func() {
		if err := os.WriteFile(w.gate, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if !rq.legacy {
		hold()
	}
	flags = append(append([]string{"-start-while", w.gate}, rq.flags...), flags...)
	w.cfg = fake("slow", flags...)
	tp := newTestPool(t, opts, w.cfg)
	w.tp = tp
	send := func(line string) {
		if _, err := w.a.in.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	if attach {
		w.a = tp.attachLedger(t, "slow", file)
	} else {
		w.c = tp.dial(t, "slow")
		send = func(line string) { w.c.send(line) }
	}
	if rq.legacy {
		if attach {
			w.a.initialize()
		} else {
			w.c.initialize("c", "")
		}
		hold()
		if err := tp.Stop("slow"); err != nil {
			t.Fatal(err)
		}
	}
	send(rq.line)
	var r pool.RequestInfo
	eventually(t, rq.method+" in flight on the starting child, which waits for its handshake", func() bool {
		snap := tp.Snapshot()
		if len(snap.InFlight) != 1 {
			return false
		}
		r = snap.InFlight[0]
		for _, b := range snap.Backends {
			if b.State == pool.StateStarting && b.PID != 0 && b.PID == r.PID &&
				b.HandshakeWaitMs != nil && strings.Contains(b.StateReason, "handshake") {
				return true
			}
		}
		return false
	}, func() string { snap := tp.Snapshot(); return fmt.Sprintf("%+v %+v", snap.InFlight, snap.Backends) })
	if sess := tp.Snapshot().Sessions[0].ID; r.Method != rq.method || r.WrittenToChild || r.Server != "slow" ||
		r.Session != sess || r.OriginalID != rq.id {
		t.Fatalf("in flight: %+v; want session %s's %s %s on server slow, not written", r, sess, rq.method, rq.id)
	}
	w.r = r
	return w
}

func letStart(t *testing.T, gate string) {
	t.Helper()
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
}

func (rq waitingRequest) String() string { return cmp.Or(rq.name, rq.method) }

// The requests other than initialize that wait for a starting child
// (server/discover and subscriptions/listen of a 2026-07-28 client,
// logging/setLevel of a legacy one) are in flight while they wait, as
// initialize is: the snapshot (status, hangs, the dashboard) lists them
// on the starting child, which says it waits for its handshake; once the
// child is up they are answered (a listen acknowledged), gone from the
// snapshot, and history records each, ended once. (They waited unseen: a
// client stuck there showed "nothing in flight".)
func TestRequestsWaitingForTheirChildAreInFlight(t *testing.T) {
	for _, rq := range waitingRequests {
		t.Run(rq.String(), func(t *testing.T) {
			var rec recorder
			w := startWaiting(t, rq, false, &pool.Options{Record: rec.record})
			tp, c, r := w.tp, w.c, w.r
			letStart(t, w.gate)
			if rq.method == "subscriptions/listen" { // open until cancelled: acknowledged
				if m := c.recv(); m.Method != "notifications/subscriptions/acknowledged" ||
					!strings.Contains(string(m.Params), `"io.modelcontextprotocol/subscriptionId":"L"`) {
					t.Fatalf("want the listen acknowledged, got %s", m.raw)
				}
			} else if m, _ := c.recvID(rq.id); m.Error != nil || !strings.Contains(m.raw, rq.answer) {
				t.Fatalf("%s once the child started: %s; want %s", rq.method, m.raw, rq.answer)
			}
			eventually(t, "nothing in flight once its wait ended", func() bool { return len(tp.Snapshot().InFlight) == 0 },
				func() string { return fmt.Sprintf("%+v", tp.Snapshot().InFlight) })
			got := rec.waitFor(t, "the request received, in history", func(e pool.Event) bool {
				return e.Kind == pool.EventRequestReceived && e.PoolID == r.PoolID
			})
			if got.Method != rq.method || got.OriginalID != rq.id {
				t.Errorf("received: %+v", got)
			}
			done := rec.waitFor(t, "the request's end, in history", func(e pool.Event) bool {
				return e.Kind == pool.EventRequestDone && e.PoolID == r.PoolID
			})
			if done.Status != pool.StatusOK || done.Written || done.Method != rq.method {
				t.Errorf("done: %+v; want ok, not written", done)
			}
		})
	}
}

// A request waiting for its starting child whose session closes (its
// client exits: its shim hangs up), or that the user cancels (the tray's
// cancel of a hung request), leaves nothing in flight: its wait ends
// once, recorded as cancelled, and the child's start ends nothing more.
// One the user cancelled is answered with the cancel's error alone, and
// does nothing once the child is up: a logging/setLevel sets no level
// (the child is sent none), a subscriptions/listen opens no listen
// (nothing acknowledges it).
func TestEndedWaitForAChildLeavesNothingInFlight(t *testing.T) {
	for _, rq := range waitingRequests {
		for _, how := range []string{"closed", "cancelled"} {
			t.Run(rq.String()+" "+how, func(t *testing.T) {
				var rec recorder
				childLogPath := filepath.Join(t.TempDir(), "child.log")
				w := startWaiting(t, rq, how == "closed", &pool.Options{Record: rec.record}, "-log", childLogPath)
				tp, c, r := w.tp, w.c, w.r
				if how == "closed" {
					w.a.close()
				} else {
					if err := tp.Cancel(r.PoolID); err != nil {
						t.Fatal(err)
					}
					if m, _ := c.recvID(rq.id); m.Error == nil || !strings.Contains(m.Error.Message, "cancelled") {
						t.Fatalf("want the cancel's error, got %s", m.raw)
					}
				}
				eventually(t, "nothing in flight once its wait ended", func() bool { return len(tp.Snapshot().InFlight) == 0 },
					func() string { return fmt.Sprintf("%+v", tp.Snapshot().InFlight) })
				done := rec.waitFor(t, "the wait's end, in history", func(e pool.Event) bool {
					return e.Kind == pool.EventRequestDone && e.PoolID == r.PoolID
				})
				if done.Status != pool.StatusCancelled || done.Written ||
					how == "closed" && !strings.Contains(done.Err, "session ended") {
					t.Errorf("done: %+v; want cancelled, not written", done)
				}

				letStart(t, w.gate)
				eventually(t, "the child ready", func() bool {
					for _, b := range tp.Snapshot().Backends {
						if b.PID == r.PID && b.State == pool.StateReady {
							return true
						}
					}
					return false
				})
				if how == "cancelled" {
					// The session goes on once its wait ended: what it
					// sends next is answered, and nothing more of the
					// cancelled request reaches the client or the child.
					c.send(rq.next)
					m, other := c.recvID("9")
					if m.Error != nil {
						t.Fatalf("the next call: %s", m.raw)
					}
					for _, o := range other {
						t.Errorf("after the cancel's error, the client got %s", o.raw)
					}
					if n := countMethod(childLog(t, childLogPath), "logging/setLevel"); n != 0 {
						t.Errorf("the child was sent %d logging/setLevel, want none", n)
					}
					if rq.method == "subscriptions/listen" {
						c.send(rq.line) // opened again: its id is free
						if m := c.recv(); m.Method != "notifications/subscriptions/acknowledged" {
							t.Errorf("the listen opened again: %s; want it acknowledged", m.raw)
						}
					}
				}
				if in := tp.Snapshot().InFlight; len(in) != 0 {
					t.Errorf("in flight once the child started: %+v", in)
				}
				if n := len(rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.PoolID == r.PoolID })); n != 1 {
					t.Errorf("%d ends recorded, want 1", n)
				}
			})
		}
	}
}

// A stopping pool hands an attached session's request that waits for
// its child back to its shim unanswered, as it does a waiting
// initialize, and ends its history row so: nothing is left owed.
func TestHandedBackWaitEndsInHistory(t *testing.T) {
	for _, rq := range waitingRequests {
		t.Run(rq.String(), func(t *testing.T) {
			var rec recorder
			w := startWaiting(t, rq, true, &pool.Options{Record: rec.record, StopGrace: 300 * time.Millisecond})
			stopped := closeInBackground(w.tp)
			bye := w.a.goodbye(10 * time.Second)
			letStart(t, w.gate) // it reads its closed input, and exits: no wait for its stop
			<-stopped           // every event is recorded once Close returns
			if string(bye.Pending) != rq.line+"\n" {
				t.Fatalf("Pending %q, want the %s", bye.Pending, rq.method)
			}
			done := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.PoolID == w.r.PoolID })
			if len(done) != 1 || done[0].Status != pool.StatusCancelled || done[0].Written || !strings.Contains(done[0].Err, "handed back") {
				t.Fatalf("ends recorded: %+v; want one, cancelled, handed back", done)
			}
		})
	}
}
