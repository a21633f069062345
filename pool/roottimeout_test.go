//go:build unix

package pool_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// heldTimedOut checks that m, the answer to a call held for its client's
// roots answer, is its requestTimeout's -32001 for a call that did not
// run, that history ended it once, timed out and never written, and that
// the child never got it, not even once the hold ended: a call sent after
// the client answered is answered, and the child, which reads in order,
// would have had the held one before it.
func heldTimedOut(t *testing.T, c *client, rec *recorder, logPath string, held pool.RequestInfo, timeout time.Duration, m msg) {
	t.Helper()
	want := fmt.Sprintf("server %q did not answer tools/call within %v", "fs", timeout)
	if code, data := errorData(t, m); code != -32001 || *data.MayHaveExecuted || m.Error.Message != want {
		t.Errorf("the held call's answer: %s; want -32001 %q, mayHaveExecuted false", m.raw, want)
	}
	c.call(`"after"`, "echo", `{"text":"after"}`)
	if m, _ := c.recvID(`"after"`); m.text() != "after" {
		t.Fatalf("the call after the timed-out one: %s", m.raw)
	}
	if childGot(t, logPath, "held") {
		t.Error("the child was written the call held past its requestTimeout")
	}
	rec.waitFor(t, "the call after it in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestDone && e.Method == "tools/call" && e.Status == pool.StatusOK
	})
	done := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.PoolID == held.PoolID })
	if len(done) != 1 || done[0].Status != pool.StatusTimeout || done[0].Written || done[0].ErrCode != -32001 {
		t.Errorf("the timed-out call's ends in history: %+v; want one, timeout, not written, -32001", done)
	}
	if w := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestWritten && e.PoolID == held.PoolID }); len(w) != 0 {
		t.Errorf("history says the timed-out call was written: %+v", w)
	}
}

// heldTimeoutPool is a pool whose server fs logs what its child reads and
// times requests out after timeout, and a client of it that declared
// roots, with the pool's roots/list unanswered and the call "held" held
// behind it. The timeout is the call's: the child starts under the
// default (applyRequestTimeout).
func heldTimeoutPool(t *testing.T, rec *recorder, timeout time.Duration) (tp *testPool, c *client, logPath string, ask msg, held pool.RequestInfo) {
	t.Helper()
	logPath = filepath.Join(shortTempDir(t), "child.log")
	cfg := fake("fs", "-log", logPath)
	tp = newTestPool(t, &pool.Options{Record: rec.record}, cfg)
	c = tp.dial(t, "fs")
	c.patience = 5 * time.Second // the hold lasts a minute: a call still held at the end of this has waited far past its timeout
	c.initialize("a", `{"roots":{"listChanged":true}}`)
	tp.applyRequestTimeout(t, &cfg, timeout)
	ask = c.rootsAsk()
	c.call(`"held"`, "echo", `{"text":"held"}`)
	eventually(t, "the held call in flight", func() (ok bool) { held, ok = heldInFlight(tp, `"held"`); return ok })
	return tp, c, logPath, ask, held
}

// A call held while the pool waits for its client's answer to roots/list
// ends at its requestTimeout, as a call queued anywhere does: its client
// gets -32001, the call did not run, and the child never gets it, neither
// then nor once the client answers. Before, the hold ignored the timeout:
// the call waited for the whole hold (up to 10 s), was written to the
// child as the hold ended, past its deadline, and then timed out at once,
// "may have executed" (or ran and was answered).
func TestHeldCallEndsAtItsRequestTimeout(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(time.Minute)) // the hold ends when the client answers
	const timeout = 300 * time.Millisecond
	var rec recorder
	tp, c, logPath, ask, held := heldTimeoutPool(t, &rec, timeout)

	m, _ := c.recvID(`"held"`) // while the client has not answered
	if _, still := heldInFlight(tp, `"held"`); still {
		t.Errorf("the timed-out call is still in flight: %+v", tp.Snapshot().InFlight)
	}
	c.answerRootsAsk(ask)
	heldTimedOut(t, c, &rec, logPath, held, timeout, m)
}

// A held call whose requestTimeout passed by the time the hold lets it go
// on is never written either: its request table refuses it as it takes
// it, and it ends as a call that timed out unwritten. Before, the table
// took it with a deadline already past: the call was written to the child
// and expired right after.
func TestHeldCallPastItsDeadlineAsItGoesOnIsNeverWritten(t *testing.T) {
	t.Cleanup(pool.SetRootsAskTimeout(time.Minute)) // the hold ends when the client answers
	taken, resume, restore := pool.PauseReplaying()
	t.Cleanup(restore)
	// Long enough for the client's answer to let the call go on before it
	// times out held.
	const timeout = 2 * time.Second
	var rec recorder
	_, c, logPath, ask, held := heldTimeoutPool(t, &rec, timeout)
	t.Cleanup(resume) // before the pool closes: the replay must not stay paused

	c.answerRootsAsk(ask)
	select { // the replay took the call, and waits
	case <-taken:
	case <-time.After(15 * time.Second):
		t.Fatal("the held call was not replayed")
	}
	eventually(t, "the held call's deadline to pass as the replay has it in hand", func() bool {
		return time.Since(held.ReceivedAt) > timeout
	})
	resume()
	m, _ := c.recvID(`"held"`)
	heldTimedOut(t, c, &rec, logPath, held, timeout, m)
}
