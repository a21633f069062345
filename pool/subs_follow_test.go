//go:build unix

package pool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// refusingThirdChild is a server whose first two children (the one
// started to answer initialize, and the first roots' one) take
// resources/subscribe of fake://counter, and whose later ones refuse it.
// marker counts the children started.
func refusingThirdChild(t *testing.T) (cfg pool.ServerConfig, logPath, marker string) {
	dir := shortTempDir(t)
	logPath, marker = filepath.Join(dir, "child.log"), filepath.Join(dir, "children-started")
	script := `n=$(cat "$0" 2>/dev/null || echo 0); echo $((n+1)) > "$0"
if [ "$n" -ge 2 ]; then exec "$1" -log "$2" -refuse-subscribe fake://counter; fi
exec "$1" -log "$2"`
	cfg = fake("fs")
	cfg.Command, cfg.Args = "/bin/sh", []string{"-c", script, marker, fakeBin, logPath}
	return cfg, logPath, marker
}

func wantChildrenStarted(t *testing.T, marker, want string) {
	t.Helper()
	if n, _ := os.ReadFile(marker); strings.TrimSpace(string(n)) != want {
		t.Fatalf("want %s children started, got %q", want, n)
	}
}

// subscribeCounter has c subscribe to fake://counter as request id,
// which must not be refused.
func subscribeCounter(t *testing.T, c *client, id string) {
	t.Helper()
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := c.recvID(id); m.Error != nil {
		t.Fatalf("subscribe %s: %s", id, m.raw)
	}
}

// stopFS and reloadFS give server fs's sessions a new child: the user's
// stop, or a config change that replaces the child.
func stopFS(tp *testPool, _ pool.ServerConfig) error { return tp.Stop("fs") }

func reloadFS(tp *testPool, cfg pool.ServerConfig) error {
	cfg.Env = map[string]string{"SWITCHBOARD_TEST_RELOAD": "1"}
	return tp.Apply([]pool.ServerConfig{cfg})
}

// subscribedOnRefusingServer starts a pool of refusingThirdChild's server
// and a session a of roots file:///work/a subscribed to fake://counter;
// first is the pid of its child.
func subscribedOnRefusingServer(t *testing.T) (tp *testPool, a *client, first, logPath, marker string) {
	t.Helper()
	cfg, logPath, marker := refusingThirdChild(t)
	tp = newTestPool(t, nil, cfg)
	a = tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	first = a.pidOf("1")
	subscribeCounter(t, a, "2")
	return tp, a, first, logPath, marker
}

// movedToTheRefusingChild moves a, subscribed as by
// subscribedOnRefusingServer, to roots file:///work/b, checks the pid of
// its child there with checkPID, and returns once that child (the third
// started) has heard a's carried subscribe and refused it.
func movedToTheRefusingChild(t *testing.T, a *client, logPath, marker string, checkPID func(string)) {
	t.Helper()
	a.changeRoots("file:///work/b")
	checkPID(a.pidOf("3"))
	eventually(t, "the carried subscribe to reach the child of a's new roots", func() bool {
		return countMethod(childLog(t, logPath), "resources/subscribe") == 2
	})
	a.pidOf("4") // the child's refusal is ahead of this answer on its stdout
	wantChildrenStarted(t, marker, "3")
}

// newChildAfterStop starts a pool of server fs (share share, its children
// logging to logPath) and a session a; once a's call 1 has started a
// child, it runs before(a, logPath), stops the server with stop, and
// returns when a's call 3 has started a new child.
func newChildAfterStop(t *testing.T, share pool.Share, stop func(*testPool, pool.ServerConfig) error, before func(a *client, logPath string), flags ...string) (a *client, logPath string) {
	t.Helper()
	logPath = filepath.Join(shortTempDir(t), "child.log")
	cfg := fake("fs", append([]string{"-log", logPath}, flags...)...)
	cfg.Share = share
	tp := newTestPool(t, nil, cfg)
	a = tp.dial(t, "fs")
	a.initialize("a", "")
	first := a.pidOf("1")
	before(a, logPath)
	if err := stop(tp, cfg); err != nil {
		t.Fatal(err)
	}
	if second := a.pidOf("3"); second == first {
		t.Fatalf("stopped, same child %s", second)
	}
	return a, logPath
}

// A session's subscription carried to the child of its new roots, which
// refuses it, is held by nobody there: another session's subscribe of the
// same URI reaches that child and gets its refusal, not the pool's {}.
func TestRefusedCarriedSubscribeLeavesNoStake(t *testing.T) {
	tp, a, first, logPath, marker := subscribedOnRefusingServer(t)

	c := tp.dial(t, "fs")
	c.initRoots("c", "file:///work/b")
	second := c.pidOf("1")
	if second == first {
		t.Fatalf("other roots, same child %s", second)
	}

	// a moves to c's roots: its stake goes to c's child, which refuses it.
	movedToTheRefusingChild(t, a, logPath, marker, func(got string) {
		if got != second {
			t.Fatalf("a's new roots are c's: want child %s, got %s", second, got)
		}
	})

	c.send(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := c.recvID("2"); m.Error == nil {
		t.Errorf("c's subscribe of a URI the child refuses was answered %s by the pool; the children heard %d subscribes in all",
			m.raw, countMethod(childLog(t, logPath), "resources/subscribe"))
	}
}

// A session that moves to roots without a child carries its subscription
// to the child it starts there, which hears it as it becomes ready; if that
// child refuses it, the session holds nothing, and its next subscribe
// reaches the child (and gets its refusal) instead of the pool's {}.
func TestRefusedReadySubscribeLeavesNoStake(t *testing.T) {
	_, a, first, logPath, marker := subscribedOnRefusingServer(t)

	movedToTheRefusingChild(t, a, logPath, marker, func(second string) {
		if second == first {
			t.Fatalf("new roots, same child %s", second)
		}
	})

	a.send(`{"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := a.recvID("5"); m.Error == nil {
		t.Errorf("a's subscribe of a URI its child refused was answered %s by the pool; the children heard %d subscribes in all",
			m.raw, countMethod(childLog(t, logPath), "resources/subscribe"))
	}
}

// After the server's child is stopped (the user's stop, for a shared or a
// session's own child) or replaced (a config change), a session's
// subscribe of what it subscribed before reaches the new child, and the
// session gets its updates.
func TestResubscribeAfterStopReachesTheNewChild(t *testing.T) {
	for _, tc := range []struct {
		name  string
		share pool.Share
		stop  func(*testPool, pool.ServerConfig) error
	}{
		{"stop/session", pool.ShareSession, stopFS},
		{"stop/shared", pool.ShareShared, stopFS},
		{"reload/shared", pool.ShareShared, reloadFS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, logPath := newChildAfterStop(t, tc.share, tc.stop, func(a *client, _ string) { subscribeCounter(t, a, "2") })
			subscribeCounter(t, a, "4")
			a.call("5", "notify", `{"kind":"updated"}`)
			_, other := a.recvID("5")
			got := slices.ContainsFunc(other, func(m msg) bool { return m.Method == "notifications/resources/updated" })
			subs := countMethod(childLog(t, logPath), "resources/subscribe")
			if !got || subs != 2 {
				t.Errorf("after the stop and a new subscribe: resources/updated received=%v, children heard %d subscribes (want true, 2)",
					got, subs)
			}
		})
	}
}

// A session that closes while its subscriptions are carried to the child
// of its new roots leaves no stake there: both children hear its
// unsubscribe, and neither stays subscribed for a session that is gone.
func TestSessionClosingAsItsStakesAreCarriedLeavesNone(t *testing.T) {
	t.Cleanup(pool.CloseCarryingSessions()) // after the pool closed: only a moves
	logPath := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("fs", "-log", logPath))
	c := tp.dial(t, "fs")
	c.initRoots("c", "file:///work/b")
	c.pidOf("1") // the child of the roots a moves to runs

	a := tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	a.pidOf("1") // its child runs: it hears a's subscribe
	subscribeCounter(t, a, "2")
	a.changeRoots("file:///work/b")

	count := func() (subs, unsubs int) { return subscribeCounts(t, logPath) }
	eventually(t, "each child to hear a's unsubscribe after its subscribe", func() bool {
		subs, unsubs := count()
		return subs == 2 && unsubs == 2
	}, func() string {
		subs, unsubs := count()
		return fmt.Sprintf("the children heard %d subscribes and %d unsubscribes", subs, unsubs)
	})
}

// A session whose subscription the pool cannot carry to the child of its
// new roots (that child's table is full) holds nothing there: its next
// subscribe reaches the child, not the pool's {}.
func TestUncarriedSubscribeLeavesNoStake(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	// No wait for a roots child's roots/list (RootsWait): a's first call
	// must not find the one place taken by what waits behind it.
	tp := newTestPool(t, &pool.Options{MaxPending: 1, RootsWait: -1}, fake("fs", "-log", logPath))
	c := tp.dial(t, "fs")
	c.initRoots("c", "file:///work/b")
	c.pidOf("1")
	c.call("2", "sleep", `{"ms":60000}`) // fills its child's table
	eventually(t, "c's call to reach its child", func() bool {
		return countMethod(childLog(t, logPath), "tools/call") == 2
	})

	a := tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	a.pidOf("1")
	subscribeCounter(t, a, "2")
	a.changeRoots("file:///work/b")
	a.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`) // read after a's stakes moved
	a.recvID("3")

	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	c.call("3", "pid", `{}`)
	if m, _ := c.recvID("3"); m.Error != nil { // the table has room again
		t.Fatalf("c's next call: %s", m.raw)
	}
	subscribeCounter(t, a, "4")
	if n := countMethod(childLog(t, logPath), "resources/subscribe"); n != 2 {
		t.Errorf("a's subscribe after its stake could not be carried did not reach the child: %d subscribes in all, want 2", n)
	}
}

// updatedReaches polls: from sends notify (kind "updated") to its child
// until to, a session of the same child, gets resources/updated, or the
// deadline passes. Polling, because the fake handles a subscribe and a
// later call on goroutines of their own.
func updatedReaches(t *testing.T, from, to *client, logPath string) {
	t.Helper()
	n := 0
	eventually(t, "resources/updated without a new subscribe", func() bool {
		n++
		id := fmt.Sprintf(`"notify-%d"`, n)
		from.call(id, "notify", `{"kind":"updated"}`)
		_, other := from.recvID(id)
		if to != from {
			to.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"ping"}`, id)) // behind anything delivered to it before from's answer
			_, other = to.recvID(id)
		}
		return slices.ContainsFunc(other, func(m msg) bool { return m.Method == "notifications/resources/updated" })
	}, func() string {
		return fmt.Sprintf("the children heard %d subscribes", countMethod(childLog(t, logPath), "resources/subscribe"))
	})
}

// After the user stops a server, or a config change replaces its child,
// a session's subscriptions follow it to the child started next (by its
// own request, or another session's of the same child): it gets the
// child's resources/updated without subscribing again, and the child
// hears one subscribe.
func TestSubscriptionsFollowToTheChildAfterStop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		share pool.Share
		roots bool // the sessions declare roots: their partition's child
		other bool // another session's request starts the new child
		stop  func(*testPool, pool.ServerConfig) error
	}{
		{"stop/session", pool.ShareSession, false, false, stopFS},
		{"stop/shared", pool.ShareShared, false, false, stopFS},
		{"stop/shared/roots", pool.ShareShared, true, false, stopFS},
		{"stop/shared/other", pool.ShareShared, true, true, stopFS},
		{"reload/shared", pool.ShareShared, false, false, reloadFS},
		{"reload/shared/other", pool.ShareShared, true, true, reloadFS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logPath := filepath.Join(shortTempDir(t), "child.log")
			cfg := fake("fs", "-log", logPath)
			cfg.Share = tc.share
			tp := newTestPool(t, nil, cfg)
			open := func(name string) *client {
				c := tp.dial(t, "fs")
				if tc.roots {
					c.initRoots(name, "file:///work/a")
				} else {
					c.initialize(name, "")
				}
				return c
			}
			a := open("a")
			first := a.pidOf("1")
			subscribeCounter(t, a, "2")
			starter := a
			if tc.other {
				starter = open("b")
				if got := starter.pidOf("1"); got != first {
					t.Fatalf("same roots, other child: %s, %s", got, first)
				}
			}
			if err := tc.stop(tp, cfg); err != nil {
				t.Fatal(err)
			}
			if second := starter.pidOf("3"); second == first {
				t.Fatalf("stopped, same child %s", second)
			}
			updatedReaches(t, starter, a, logPath)
			if n := countMethod(childLog(t, logPath), "resources/subscribe"); n != 2 {
				t.Errorf("the children heard %d subscribes, want 2 (one each)", n)
			}
		})
	}
}

// One session's subscriptions never reach another session's own child:
// after a stop, each session's next request starts its own child, and
// only the subscriber's hears a subscribe.
func TestSubscriptionsFollowOnlyTheirSession(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	cfg := fake("fs", "-log", logPath)
	cfg.Share = pool.ShareSession
	tp := newTestPool(t, nil, cfg)
	a, b := tp.dial(t, "fs"), tp.dial(t, "fs")
	a.initialize("a", "")
	b.initialize("b", "")
	a.pidOf("1")
	b.pidOf("1")
	subscribeCounter(t, a, "2")
	if err := tp.Stop("fs"); err != nil {
		t.Fatal(err)
	}
	b.pidOf("3")
	b.pidOf("4") // what b's new child was queued as it became ready is ahead of this
	if n := countMethod(childLog(t, logPath), "resources/subscribe"); n != 1 {
		t.Fatalf("b's new child was sent a's subscription: %d subscribes in all, want 1", n)
	}
	a.pidOf("3")
	updatedReaches(t, a, a, logPath)
	b.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if _, other := b.recvID("5"); slices.ContainsFunc(other, func(m msg) bool { return m.Method == "notifications/resources/updated" }) {
		t.Errorf("b, which never subscribed, got a's update")
	}
	if n := countMethod(childLog(t, logPath), "resources/subscribe"); n != 2 {
		t.Errorf("the children heard %d subscribes, want 2 (a's first child and its new one)", n)
	}
}

// A subscription carried to the child started after a stop, which refuses
// it, is held by nobody there: the session's next subscribe reaches the
// child and gets its refusal, not the pool's {}.
func TestRefusedSubscribeAfterStopLeavesNoStake(t *testing.T) {
	tp, a, first, logPath, marker := subscribedOnRefusingServer(t)
	if err := tp.Stop("fs"); err != nil {
		t.Fatal(err)
	}
	if second := a.pidOf("3"); second == first {
		t.Fatalf("stopped, same child %s", second)
	}
	wantChildrenStarted(t, marker, "3")
	eventually(t, "the carried subscribe to reach the new child", func() bool {
		return countMethod(childLog(t, logPath), "resources/subscribe") == 2
	})
	n := 0
	eventually(t, "a's subscribe to reach the child that refused its carried one", func() bool {
		n++
		id := fmt.Sprintf(`"again-%d"`, n)
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`, id))
		m, _ := a.recvID(id)
		return m.Error != nil // {} from the pool until the child's refusal of the carried one is in
	}, func() string {
		return fmt.Sprintf("the children heard %d subscribes", countMethod(childLog(t, logPath), "resources/subscribe"))
	})
}

// A session that unsubscribes while another session's request carries its
// stakes to the child made after a stop (takeStakes) holds nothing at that
// child: the child hears its unsubscribe, and keeps no subscription for a
// session that let go of it and left.
func TestUnsubscribeWhileStakesMoveLeavesNoStake(t *testing.T) {
	var armed atomic.Bool
	var a *client // set as the hook is armed
	done := make(chan struct{})
	// Installed before the pool starts, restored after it closed.
	t.Cleanup(pool.SetCarryingHook(func(name string) {
		if name != "a" || !armed.CompareAndSwap(true, false) {
			return
		}
		defer close(done)
		// a's unsubscribe, read while its stake is recorded at the new
		// child but not yet counted there.
		a.send(`{"jsonrpc":"2.0","id":3,"method":"resources/unsubscribe","params":{"uri":"fake://counter"}}`)
		a.recvID("3")
	}))
	_, b, logPath := subscribedThenStopped(t, func(c *client) { a = c; armed.Store(true) })
	<-done
	a.close()
	b.pidOf("4")
	count := func() (subs, unsubs int) { return subscribeCounts(t, logPath) }
	eventually(t, "the new child to hold no subscription for a, who unsubscribed and left", func() bool {
		subs, unsubs := count()
		return subs-unsubs <= 1 // the first child's subscribe, never unsubscribed (it was stopped)
	}, func() string {
		subs, unsubs := count()
		return fmt.Sprintf("the children heard %d subscribes and %d unsubscribes", subs, unsubs)
	})
}

// subscribedThenStopped opens sessions a and b of server fs (its children
// logging to logPath), has a subscribe to fake://counter, stops the
// server, calls arm with a (the hooks' session, from now on), and has b's
// request start the new child: a's stakes move to it on b's goroutine
// (takeStakes).
func subscribedThenStopped(t *testing.T, arm func(a *client)) (a, b *client, logPath string) {
	t.Helper()
	logPath = filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, nil, fake("fs", "-log", logPath))
	a, b = tp.dial(t, "fs"), tp.dial(t, "fs")
	a.initialize("a", "")
	b.initialize("b", "")
	first := a.pidOf("1")
	subscribeCounter(t, a, "2")
	if err := tp.Stop("fs"); err != nil {
		t.Fatal(err)
	}
	arm(a)
	if second := b.pidOf("3"); second == first {
		t.Fatalf("same child after stop")
	}
	return a, b, logPath
}

// subscribeCounts is how many subscribes and unsubscribes the children
// logging to logPath heard in all.
func subscribeCounts(t *testing.T, logPath string) (subs, unsubs int) {
	t.Helper()
	log := childLog(t, logPath)
	return countMethod(log, "resources/subscribe"), countMethod(log, "resources/unsubscribe")
}
