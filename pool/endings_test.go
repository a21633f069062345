//go:build unix

package pool_test

import (
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// errorData reads an error answer's data.
func errorData(t *testing.T, m msg) (code int, data struct {
	Retryable       *bool `json:"retryable"`
	MayHaveExecuted *bool `json:"mayHaveExecuted"`
}) {
	t.Helper()
	if m.Error == nil {
		t.Fatalf("want an error, got %s", m.raw)
	}
	if err := json.Unmarshal(m.Error.Data, &data); err != nil || data.MayHaveExecuted == nil || data.Retryable == nil {
		t.Fatalf("error data without mayHaveExecuted and retryable: %s", m.raw)
	}
	return m.Error.Code, data
}

// A request that never reached a child (it waited for the child's
// handshake) and is ended by a stop says it did not run: the client may
// send it again safely. (The first edition's finishStop said
// mayHaveExecuted: true for every request.)
func TestStopAnswersAQueuedRequestAsNotRun(t *testing.T) {
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record}, fake("srv", "-startup-delay", "30s"))
	c := tp.dial(t, "srv")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"never sent"},` + modernMeta + `}}`) // no initialize: it waits for the child's handshake
	eventually(t, "the call queued for the starting child", func() bool { return len(tp.Snapshot().InFlight) == 1 })
	if err := tp.Stop("srv"); err != nil {
		t.Fatal(err)
	}
	m, _ := c.recvID("1")
	code, data := errorData(t, m)
	if code != -32000 || *data.MayHaveExecuted || !*data.Retryable {
		t.Fatalf("a request no child saw, after a stop: %s; want -32000 with mayHaveExecuted false, retryable", m.raw)
	}
	done := rec.waitFor(t, "the request's end in history", func(e pool.Event) bool { return e.Kind == pool.EventRequestDone })
	if done.Written || done.Status != pool.StatusFailed {
		t.Fatalf("history: %+v; want failed, not written", done)
	}
}

// A request that reached a child, was re-queued when that child died (it
// is safe to repeat), and is then ended by a crash loop may have run on
// the first child: its error and its history say so. (The first edition's
// reap forgot it had been written when it re-queued it.)
func TestCrashLoopAnswersARetriedRequestAsMayHaveRun(t *testing.T) {
	var rec recorder
	cfg := fake("srv", "-delay", "1s") // every answer, the handshake's too, takes a second
	cfg.Restart = pool.RestartPolicy{MaxRestarts: 2, MinBackoff: 10 * time.Millisecond}
	tp := newTestPool(t, &pool.Options{Record: rec.record}, cfg)
	c := tp.dial(t, "srv")
	c.send(`{"jsonrpc":"2.0","id":"list","method":"tools/list","params":{` + modernMeta + `}}`)
	written := rec.waitFor(t, "tools/list written to the first child", func(e pool.Event) bool { return e.Kind == pool.EventRequestWritten })
	if err := syscall.Kill(written.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The second child dies during its handshake (which takes two of its
	// slow answers), with tools/list queued for it: the budget of two is
	// spent.
	var second int
	eventually(t, "a second child", func() bool {
		for _, b := range tp.Snapshot().Backends {
			if b.PID != 0 && b.PID != written.PID {
				second = b.PID
			}
		}
		return second != 0
	})
	if err := syscall.Kill(second, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m, _ := c.recvID(`"list"`)
	done := rec.waitFor(t, "the request's end in history", func(e pool.Event) bool { return e.Kind == pool.EventRequestDone })
	if !done.Written {
		t.Errorf("history says the retried request was not written: %+v", done)
	}
	code, data := errorData(t, m)
	if code != -32000 || !*data.MayHaveExecuted {
		t.Fatalf("a retried request after a crash loop: %s; want -32000 with mayHaveExecuted true", m.raw)
	}
	if n := len(rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestWritten })); n != 1 {
		t.Errorf("written %d times, want once (the second child never got it)", n)
	}
}

// A modern client's call held for its retry (MRTR) that the child answers
// first still ends once in history, when the child answers it; the retry
// gets the kept answer. (The first edition kept the answer and recorded
// no end: history showed the call in flight forever.)
func TestHeldCallAnsweredBeforeItsRetryEndsInHistory(t *testing.T) {
	var rec recorder
	tp := newTestPool(t, &pool.Options{Record: rec.record}, fake("srv", "-ask-timeout", "50ms"))
	c := tp.dial(t, "srv")
	c.send(askCall(`"ask"`, "sampling", ""))
	first, _ := c.recvID(`"ask"`)
	held := readResult(t, first)
	if held.ResultType != "input_required" {
		t.Fatalf("first answer: %s", first.raw)
	}
	received := rec.waitFor(t, "the call received", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestReceived && e.Name == "ask"
	})
	done := rec.waitFor(t, "the held call's end in history", func(e pool.Event) bool {
		return e.Kind == pool.EventRequestDone && e.PoolID == received.PoolID
	})
	if done.Status != pool.StatusOK || !done.Written {
		t.Fatalf("history: %+v", done)
	}
	c.send(askCall(`"retry"`, "sampling", `,"requestState":"`+held.RequestState+`","inputResponses":{}`))
	retry, _ := c.recvID(`"retry"`)
	if r := readResult(t, retry); r.ResultType != "complete" || len(r.Content) != 1 || r.Content[0].Text != "no answer" {
		t.Fatalf("the retry: %s", retry.raw)
	}
	if n := len(rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.PoolID == received.PoolID })); n != 1 {
		t.Errorf("%d ends for one call", n)
	}
}

// Every request the pool takes ends exactly once in history, however it
// ends: answered, answered with the child's error, timed out, cancelled by
// its client, cancelled by its session's end, and its child's death; and
// the first initialize, which waited for the child's handshake and was
// answered from it, never written to the child.
func TestEveryRequestEndsOnceInHistory(t *testing.T) {
	var rec recorder
	cfg := fake("srv")
	tp := newTestPool(t, &pool.Options{Record: rec.record}, cfg)
	a := tp.dial(t, "srv")
	a.initialize("a", "")
	a.call("1", "echo", `{"text":"ok"}`)
	a.call("2", "nosuchtool", `{}`)
	for got := map[string]bool{}; len(got) < 2; { // the answer, the error: in any order
		got[string(a.recv().ID)] = true
	}
	// The short timeout is call 3's alone: on a loaded machine the others
	// could time out before they are answered, cancelled or crashed.
	tp.applyRequestTimeout(t, &cfg, 300*time.Millisecond)
	a.call("3", "sleep", `{"ms":60000}`)
	a.recvID("3")
	tp.applyRequestTimeout(t, &cfg, 0)
	a.call("4", "sleep", `{"ms":60000}`)
	eventually(t, "call 4 written", func() bool {
		s := tp.Snapshot()
		return len(s.InFlight) == 1 && s.InFlight[0].WrittenToChild
	})
	// (The cancelled call is not answered: the next thing a hears is 6's.)
	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`)
	b := tp.dial(t, "srv")
	b.initialize("b", "")
	b.call("5", "sleep", `{"ms":60000}`)
	eventually(t, "call 5 written", func() bool {
		s := tp.Snapshot()
		return len(s.InFlight) == 1 && s.InFlight[0].WrittenToChild && s.InFlight[0].OriginalID == "5"
	})
	b.close()
	// b's end cancels its call before a's crash ends what is left (else
	// the crash could end call 5 first: a race of the test's own making).
	eventually(t, "b's session to end", func() bool { return len(tp.Snapshot().Sessions) == 1 })
	a.call("6", "crash", `{}`)
	a.recvID("6")
	want := map[string]string{`"init"`: pool.StatusOK, "1": pool.StatusOK, "2": pool.StatusError, "3": pool.StatusTimeout,
		"4": pool.StatusCancelled, "5": pool.StatusCancelled, "6": pool.StatusFailed}
	eventually(t, "seven ends", func() bool {
		return len(rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone })) >= len(want)
	})
	var ids []string
	for _, r := range rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestReceived }) {
		ends := rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.PoolID == r.PoolID })
		if len(ends) != 1 {
			t.Errorf("request %s (pool id %d) ended %d times in history", r.OriginalID, r.PoolID, len(ends))
			continue
		}
		ids = append(ids, r.OriginalID)
		if written := r.OriginalID != `"init"`; ends[0].Status != want[r.OriginalID] || ends[0].Written != written {
			t.Errorf("request %s: %s written=%v (%s), want %s, written=%v", r.OriginalID, ends[0].Status, ends[0].Written, ends[0].Err, want[r.OriginalID], written)
		}
	}
	slices.Sort(ids)
	if strings.Join(ids, ",") != `"init",1,2,3,4,5,6` {
		t.Errorf("requests received: %v", ids)
	}
}
