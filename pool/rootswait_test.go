//go:build unix

package pool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// childsOwnRoots asks the fake child which roots it took after it was
// initialized (-roots-after-init): "none" until it had them.
func (c *client) childsOwnRoots(id string) string {
	c.t.Helper()
	return c.askChild(id, "roots")
}

// The first request of a session whose roots start a child reaches the
// child once the child has its roots. server-filesystem asks roots/list
// once initialized and serves its own folders until the answer; the
// fake does so 100 ms after. On the first edition the request queued
// while the child started went to it right after the handshake: the
// child answered it without the session's roots (server-filesystem read
// a file outside them), and had them only for the next one. The child
// is told each root's name, as the session that made the partition gave
// it: a session with the same roots under another name shares the child
// and its names.
func TestFirstCallAfterARootsChildStartsSeesItsRoots(t *testing.T) {
	tp := newTestPool(t, nil, fake("fs", "-roots-after-init", "100ms"))
	a := tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	if got := a.childsOwnRoots("1"); !strings.Contains(got, `"uri":"file:///work/a"`) || !strings.Contains(got, `"name":"a"`) {
		t.Fatalf("the first call after the child started ran with roots %s, want file:///work/a named a", got)
	}
	b := tp.dial(t, "fs")
	b.initRoots("b", "file:///work/b")
	if got := b.childsOwnRoots("1"); !strings.Contains(got, `"uri":"file:///work/b"`) || strings.Contains(got, "/work/a") {
		t.Fatalf("the first call of the second child ran with roots %s, want file:///work/b", got)
	}

	a2 := tp.dial(t, "fs")
	q := a2.initRootsAsked("a2")
	a2.sendf(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[{"uri":"file:///work/a","name":"other"}]}}`, q.ID)
	if pa, pa2 := a.pidOf("2"), a2.pidOf("1"); pa != pa2 {
		t.Fatalf("same roots, different children: %s and %s", pa, pa2)
	}
	if got := a2.childRoots("2"); !strings.Contains(got, `"name":"a"`) || strings.Contains(got, "other") {
		t.Errorf("the child's roots/list was answered %s, want the names of the session that made the partition", got)
	}
}

// A child that is told roots and never asks for them holds its first
// requests up to Options.RootsWait, and the server's next child not at
// all: most servers ignore roots, and each new set of roots would
// otherwise cost a wait. A child that asks within a call (the fake's ask
// tool) does not make the next one wait: it did not ask once initialized.
func TestChildThatNeverAsksRootsIsWaitedForOnce(t *testing.T) {
	const bound = 2 * time.Second
	tp := newTestPool(t, &pool.Options{RootsWait: bound}, fake("fs"))
	firstCall := func(c *client) time.Duration {
		start := time.Now()
		c.pidOf("1")
		return time.Since(start)
	}
	a, b := tp.dial(t, "fs"), tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	if took := firstCall(a); took > bound+5*time.Second {
		t.Errorf("the first call to a child that never asks its roots took %s, past the bound %s", took, bound)
	}
	if got := a.childRoots("2"); !strings.Contains(got, "file:///work/a") {
		t.Fatalf("the child asked within a call was answered %s", got)
	}
	b.initRoots("b", "file:///work/b")
	if took := firstCall(b); took >= bound {
		t.Errorf("the first call to the next child took %s: it was waited for, though the last one never asked once initialized", took)
	}
}

// A server learns again that its children ask for their roots: one whose
// first child asked too late (past Options.RootsWait, so its first call
// ran without them and the next child would not be waited for) has its
// next child waited for, as long as it takes it to ask.
func TestLateRootsAskMakesTheNextChildWait(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, &pool.Options{RootsWait: 200 * time.Millisecond}, fake("fs", "-log", logPath, "-roots-after-init", "1s"))
	a := tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	if got := a.childsOwnRoots("1"); got != "none" {
		t.Fatalf("the first call waited for the child's roots (%s) past Options.RootsWait", got)
	}
	// No call of a's is in flight when the child asks: an ask made
	// during a call says nothing of how the server's children start.
	eventually(t, "the first child to ask for its roots and be answered", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), `"roots":[{"uri":"file:///work/a"`)
	})
	if got := a.childsOwnRoots("2"); !strings.Contains(got, "/work/a") {
		t.Fatalf("the first child's roots after its ask: %s", got)
	}
	b := tp.dial(t, "fs")
	b.initRoots("b", "file:///work/b")
	if got := b.childsOwnRoots("1"); !strings.Contains(got, "/work/b") {
		t.Fatalf("the next child's first call ran with roots %s, want file:///work/b", got)
	}
}

// A server whose children ask roots/list once initialized is learned as
// one that asks even when each ask comes while a client's call runs. Its
// first child asks past Options.RootsWait (so the next is not waited
// for), and every child asks 400 ms after initialized, during its
// session's first call. On the first edition an ask during a call never
// counted: the server stayed one whose children "do not ask", and every
// later partition's first call ran with the server's own folders.
func TestStartUpRootsAskDuringACallIsLearned(t *testing.T) {
	tp := newTestPool(t, &pool.Options{RootsWait: 100 * time.Millisecond}, fake("fs", "-roots-after-init", "400ms"))
	for _, name := range []string{"a", "b"} {
		uri := "file:///work/" + name
		c := tp.dial(t, "fs")
		c.initRoots(name, uri)
		c.call("1", "sleep", `{"ms":1000}`) // running when the child asks
		c.recvID("1")
		n := 0
		eventually(t, "child "+name+" to have its roots", func() bool {
			n++
			return strings.Contains(c.childsOwnRoots(fmt.Sprintf(`"poll-%d"`, n)), uri)
		})
	}
	c := tp.dial(t, "fs")
	c.initRoots("c", "file:///work/c")
	if got := c.childsOwnRoots("1"); !strings.Contains(got, "/work/c") {
		t.Fatalf("the third child's first call ran with roots %s, want file:///work/c: its server's children all asked once initialized", got)
	}
}

// A server whose children ask for their roots only within a call (the
// fake's ask tool) is taken for one that asks at start when a child that
// was not waited for asks soon after it was initialized, during its first
// call: the next child waits for an ask that does not come, but about
// Options.RootsWait (twice the time the ask took, at least RootsWait),
// not the handshake timeout.
func TestCallsOwnRootsAskCostsTheNextChildLittle(t *testing.T) {
	tp := newTestPool(t, &pool.Options{RootsWait: 300 * time.Millisecond, HandshakeTimeout: 30 * time.Second}, fake("fs"))
	a := tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	a.pidOf("1") // waited for, in vain: the next child is not
	b := tp.dial(t, "fs")
	b.initRoots("b", "file:///work/b")
	if got := b.childRoots("1"); !strings.Contains(got, "/work/b") {
		t.Fatalf("the child asked within its first call was answered %s", got)
	}
	c := tp.dial(t, "fs")
	c.initRoots("c", "file:///work/c")
	start := time.Now()
	c.pidOf("1")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the first call to the next child took %s: a child that asked within a call made it wait far past Options.RootsWait", took)
	}
}

// A child that was slow to start is given longer to apply its roots:
// what slows a start on a loaded machine slows the checking of the
// folders as much. The fake takes 2 s to start and applies its roots
// 250 ms after the answer; with a fixed 100 ms after the answer, the
// first call ran with no roots.
func TestSlowStartingRootsChildIsGivenLongerToApplyThem(t *testing.T) {
	tp := newTestPool(t, nil, fake("fs", "-startup-delay", "2s", "-roots-after-init", "1ms", "-roots-apply-delay", "250ms"))
	a := tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	if got := a.childsOwnRoots("1"); !strings.Contains(got, `"uri":"file:///work/a"`) {
		t.Fatalf("the first call after a slow start ran with roots %s, want file:///work/a", got)
	}
}
