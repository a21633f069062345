//go:build unix

package pool_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// rootsAnswered reports whether the fake child's first roots/list
// (-roots-after-init) was answered: its log holds the answer.
func rootsAnswered(t *testing.T, logPath string) bool {
	for _, m := range childLog(t, logPath) {
		if m["id"] == "srv-1" && m["result"] != nil {
			return true
		}
	}
	return false
}

// ownRootsServer is a share "session" server whose children ask their
// roots 100 ms after initialized and again when told they changed, and
// serve the last answer (as server-filesystem does), logging what they
// receive to logPath.
func ownRootsServer(logPath string) pool.ServerConfig {
	cfg := fake("fs", "-log", logPath, "-roots-after-init", "100ms")
	cfg.Share = pool.ShareSession
	return cfg
}

// ownRootsSession dials tp's fs as a client that declares roots, and
// waits until the child's own roots/list at start (its log at logPath)
// was answered: what comes next is the pool's roots/list to the client.
func ownRootsSession(t *testing.T, tp *testPool, logPath string) *client {
	t.Helper()
	a := tp.dial(t, "fs")
	a.initialize("a", `{"roots":{"listChanged":true}}`)
	eventually(t, "the child's roots/list at start to be answered", func() bool { return rootsAnswered(t, logPath) })
	return a
}

// A session's own child (share "session") runs its session's first call
// with its session's roots. The child starts while the client's
// initialize is answered, and asks its roots at start, before the pool
// has the client's: it is answered none, and is told that its roots
// changed once they are known. On the first edition the first call went
// right behind that notice, ahead of the child's ask again, and ran with
// the server's own folders; so did the first call after each change.
func TestOwnChildsFirstCallSeesItsSessionsRoots(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, ownRootsServer(logPath))
	a := ownRootsSession(t, tp, logPath)
	a.answerRoots("file:///work/a")
	if got := a.childsOwnRoots("1"); !strings.Contains(got, "file:///work/a") {
		t.Fatalf("the session's first call ran with roots %s, want file:///work/a", got)
	}
	a.changeRoots("file:///work/b")
	if got := a.childsOwnRoots("2"); !strings.Contains(got, "file:///work/b") || strings.Contains(got, "/work/a") {
		t.Fatalf("the first call after the session's roots changed ran with roots %s, want file:///work/b", got)
	}
}

// The same over HTTP: the client's roots are asked on its GET stream,
// after the child asked its own at start.
func TestHTTPOwnChildsFirstCallSeesItsSessionsRoots(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, ownRootsServer(logPath))
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/fs"}
	c.initializeWith("c", `{"roots":{"listChanged":true}}`)
	eventually(t, "the child's roots/list at start to be answered", func() bool { return rootsAnswered(t, logPath) })
	answerRootsOnStream(t, c, "file:///work/h")
	m := c.call(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"roots","arguments":{}}}`)
	if got := m.text(); !strings.Contains(got, "file:///work/h") {
		t.Errorf("the session's first call ran with roots %s, want file:///work/h", got)
	}
}

// A session's own child that never asks for its roots holds its
// session's first requests up to Options.RootsWait once, as a shared
// child does: not again when its session's roots change, nor the next
// session's child.
func TestOwnChildThatNeverAsksRootsIsWaitedForOnce(t *testing.T) {
	const bound = 2 * time.Second
	cfg := fake("fs")
	cfg.Share = pool.ShareSession
	tp := newTestPool(t, &pool.Options{RootsWait: bound}, cfg)
	firstCall := func(c *client, id string) time.Duration {
		start := time.Now()
		c.pidOf(id)
		return time.Since(start)
	}
	a := tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	if took := firstCall(a, "1"); took > bound+5*time.Second {
		t.Errorf("the first call to a child that never asks its roots took %s, past the bound %s", took, bound)
	}
	a.changeRoots("file:///work/b")
	if took := firstCall(a, "2"); took >= bound {
		t.Errorf("the first call after the roots changed took %s: the child was waited for again", took)
	}
	b := tp.dial(t, "fs")
	b.initRoots("b", "file:///work/b")
	if took := firstCall(b, "1"); took >= bound {
		t.Errorf("the first call to the next session's child took %s: it was waited for, though the last one never asked", took)
	}
}

// A session's own child that does not ask for its roots again when told
// they changed (it takes them once, at start) holds its session's call
// no longer than the server's children take to ask at start, and does
// not make the server's next children go unwaited for: they do ask at
// start, and a call ahead of that ask would run with the server's own
// folders.
func TestOwnChildsMissedAskAgainTeachesNothing(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	cfg := ownRootsServer(logPath)
	cfg.Args = append(cfg.Args, "-roots-once")
	tp := newTestPool(t, &pool.Options{RootsWait: 300 * time.Millisecond}, cfg)
	a := ownRootsSession(t, tp, logPath)
	a.answerRoots("file:///work/a")
	start := time.Now()
	a.childsOwnRoots("1") // its roots at start: none, for good
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the first call took %s, waiting for an ask that never came", took)
	}
	b := tp.dial(t, "fs")
	b.initRoots("b", "file:///work/b")
	if got := b.childsOwnRoots("1"); !strings.Contains(got, "file:///work/b") {
		t.Fatalf("the next session's first call ran with roots %s, want file:///work/b", got)
	}
}

// A session's own child is told its roots changed only when they did:
// not for an answer the same as the last one, nor for an ask the client
// left unanswered (its roots stay none). Each notice costs the child an
// ask again and holds the session's calls behind it. On the first edition
// every answer, and every ask that ran out, told it.
func TestOwnChildIsToldOnlyOfRootsThatChanged(t *testing.T) {
	t.Run("the same roots again", func(t *testing.T) {
		logPath := filepath.Join(shortTempDir(t), "child.log")
		tp := newTestPool(t, nil, ownRootsServer(logPath))
		a := ownRootsSession(t, tp, logPath)
		a.answerRoots("file:///work/a")
		a.childsOwnRoots("1")
		if n := countMethod(childLog(t, logPath), "notifications/roots/list_changed"); n != 1 {
			t.Fatalf("the child was told %d times that its roots changed, want once: none to file:///work/a", n)
		}
		a.changeRoots("file:///work/a")
		if got := a.childsOwnRoots("2"); !strings.Contains(got, "file:///work/a") {
			t.Fatalf("the call ran with roots %s, want file:///work/a", got)
		}
		if n := countMethod(childLog(t, logPath), "notifications/roots/list_changed"); n != 1 {
			t.Errorf("the child was told %d times that its roots changed, want once: the same answer again changes nothing", n)
		}
	})
	t.Run("no answer in time", func(t *testing.T) {
		t.Cleanup(pool.SetRootsAskTimeout(300 * time.Millisecond))
		logPath := filepath.Join(shortTempDir(t), "child.log")
		tp := newTestPool(t, nil, ownRootsServer(logPath))
		a := ownRootsSession(t, tp, logPath)
		a.rootsAsk()
		a.childsOwnRoots("1") // held until the ask runs out
		if n := countMethod(childLog(t, logPath), "notifications/roots/list_changed"); n != 0 {
			t.Errorf("the child was told %d times that its roots changed, want never: they are none still", n)
		}
	})
}
