//go:build unix

package pool

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// pipedChild is a ready child, for a writeLoop to write to, whose stdin
// is a new pipe: r is the child's end, which reads only as the test does
// (closed as the test ends), w the pool's. Its exited and writerDone are
// open.
func pipedChild(t *testing.T) (c *child, r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	c = deadChild(t) // its pipes, its channels; exited and done are reset below
	c.stdin.Close()
	c.stdin, c.direct = w, newDirectWriter(w)
	c.exited, c.writerDone = make(chan struct{}), make(chan struct{})
	c.ready = true
	return c, r, w
}

// writeTakenInPart has writeLoop write one tools/call of size bytes to a
// child whose stdin pipe takes part of it and then breaks: take is the
// child's end, which reads what it will and then closes. The child then
// dies. The request may have run (the child had bytes of it, and a
// server that parses as it reads may have all it needs), so at-most-once
// says: answered with mayHaveExecuted, never written again to the next
// child.
func writeTakenInPart(t *testing.T, size int, take func(t *testing.T, r *os.File)) {
	t.Helper()
	rig := newEndingRig(t)
	b := rig.b
	c, pr, _ := pipedChild(t)

	head := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"text":"`
	tail := `"}}}`
	line := []byte(head + strings.Repeat("a", size-len(head)-len(tail)) + tail)
	pe := &pending{id: 7, sess: rig.s, b: b, origID: []byte(`"a"`), method: "tools/call", name: "t", line: line}
	if r, _, _ := b.reqs.register(pe, 100, 0); r != registered {
		t.Fatalf("register: %v", r)
	}
	rig.s.mu.Lock()
	rig.s.trackLocked(string(pe.origID), pe.origID, pe)
	rig.s.mu.Unlock()
	b.mu.Lock()
	b.queue = append(b.queue, outItem{p: pe, line: line})
	b.mu.Unlock()

	go b.writeLoop(c)
	take(t, pr)
	<-c.writerDone // the write failed: the loop is over

	var ran bool
	var state reqState
	b.reqs.update(func(*inFlight) { ran, state = pe.mayHaveRunLocked(), pe.state })
	b.mu.Lock()
	requeued := slices.ContainsFunc(b.queue, func(it outItem) bool { return it.p == pe && it.restFor == nil }) // (the rest of its line, for its child alone, may wait)
	b.mu.Unlock()
	if !ran || requeued {
		t.Errorf("after the child took part of it: state %v, may have run %v, queued again %v; want it may have run, not queued again", state, ran, requeued)
	}

	close(c.exited)
	b.reap(c, nil) // the child is gone: at-most-once decides
	if failed, _ := b.noteCrash(errors.New("exited for the test"), newRestartBudget(RestartPolicy{MaxRestarts: 5, Window: time.Minute})); failed {
		t.Fatal("one exit spent a budget of five")
	}
	got := rig.answers()
	if len(got) != 1 || !strings.Contains(got[0], `"id":"a"`) || !strings.Contains(got[0], `"mayHaveExecuted":true`) {
		t.Fatalf("the client's answer after its child died: %q; want one error with mayHaveExecuted true", got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) != 0 {
		t.Errorf("%d lines still queued for the next child", len(b.queue))
	}
}

// A request of which the child's pipe took some bytes before the write
// failed may have run: it is never sent again as if it had not.
func TestWriteLoopPartOfALineTakenMayHaveRun(t *testing.T) {
	writeTakenInPart(t, 1<<20, func(t *testing.T, r *os.File) {
		buf := make([]byte, 10)
		if _, err := io.ReadFull(r, buf); err != nil || !bytes.HasPrefix(buf, []byte(`{"jsonrpc"`)) {
			t.Fatalf("the child read %q, %v", buf, err)
		}
		r.Close() // the child took 10 bytes and more in its pipe, then went away
	})
}
