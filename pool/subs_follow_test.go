package pool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// A session's subscription carried to the child of its new roots, which
// refuses it, is held by nobody there: another session's subscribe of the
// same URI reaches that child and gets its refusal, not the pool's {}.
func TestRefusedCarriedSubscribeLeavesNoStake(t *testing.T) {
	cfg, logPath, marker := refusingThirdChild(t)
	tp := newTestPool(t, nil, cfg)

	a := tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	first := a.pidOf("1")
	a.send(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := a.recvID("2"); m.Error != nil {
		t.Fatalf("subscribe at the first child: %s", m.raw)
	}

	c := tp.dial(t, "fs")
	c.initRoots("c", "file:///work/b")
	second := c.pidOf("1")
	if second == first {
		t.Fatalf("other roots, same child %s", second)
	}

	// a moves to c's roots: its stake goes to c's child, which refuses it.
	a.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	a.answerRoots("file:///work/b")
	if got := a.pidOf("3"); got != second {
		t.Fatalf("a's new roots are c's: want child %s, got %s", second, got)
	}
	eventually(t, "the carried subscribe to reach c's child", func() bool {
		return countMethod(childLog(t, logPath), "resources/subscribe") == 2
	})
	a.pidOf("4") // the child's refusal is ahead of this answer on its stdout
	wantChildrenStarted(t, marker, "3")

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
	cfg, logPath, marker := refusingThirdChild(t)
	tp := newTestPool(t, nil, cfg)

	a := tp.dial(t, "fs")
	a.initRoots("a", "file:///work/a")
	first := a.pidOf("1")
	a.send(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := a.recvID("2"); m.Error != nil {
		t.Fatalf("subscribe at the first child: %s", m.raw)
	}

	a.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	a.answerRoots("file:///work/b")
	if second := a.pidOf("3"); second == first {
		t.Fatalf("new roots, same child %s", second)
	}
	eventually(t, "the carried subscribe to reach the new child", func() bool {
		return countMethod(childLog(t, logPath), "resources/subscribe") == 2
	})
	a.pidOf("4") // the child's refusal is ahead of this answer on its stdout
	wantChildrenStarted(t, marker, "3")

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
		{"stop/session", pool.ShareSession, func(tp *testPool, _ pool.ServerConfig) error { return tp.Stop("fs") }},
		{"stop/shared", pool.ShareShared, func(tp *testPool, _ pool.ServerConfig) error { return tp.Stop("fs") }},
		{"reload/shared", pool.ShareShared, func(tp *testPool, cfg pool.ServerConfig) error {
			cfg.Env = map[string]string{"SWITCHBOARD_TEST_RELOAD": "1"}
			return tp.Apply([]pool.ServerConfig{cfg})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logPath := filepath.Join(shortTempDir(t), "child.log")
			cfg := fake("fs", "-log", logPath)
			cfg.Share = tc.share
			tp := newTestPool(t, nil, cfg)
			a := tp.dial(t, "fs")
			a.initialize("a", "")
			first := a.pidOf("1")
			a.send(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
			if m, _ := a.recvID("2"); m.Error != nil {
				t.Fatalf("subscribe: %s", m.raw)
			}
			if err := tc.stop(tp, cfg); err != nil {
				t.Fatal(err)
			}
			if second := a.pidOf("3"); second == first {
				t.Fatalf("stopped, same child %s", second)
			}
			a.send(`{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
			if m, _ := a.recvID("4"); m.Error != nil {
				t.Fatalf("subscribe again: %s", m.raw)
			}
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
	a.send(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := a.recvID("2"); m.Error != nil {
		t.Fatalf("subscribe: %s", m.raw)
	}
	a.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	a.answerRoots("file:///work/b")

	count := func() (subs, unsubs int) {
		log := childLog(t, logPath)
		return countMethod(log, "resources/subscribe"), countMethod(log, "resources/unsubscribe")
	}
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
	tp := newTestPool(t, &pool.Options{MaxPending: 1}, fake("fs", "-log", logPath))
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
	a.send(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := a.recvID("2"); m.Error != nil {
		t.Fatalf("subscribe: %s", m.raw)
	}
	a.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	a.answerRoots("file:///work/b")
	a.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`) // read after a's stakes moved
	a.recvID("3")

	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	c.call("3", "pid", `{}`)
	if m, _ := c.recvID("3"); m.Error != nil { // the table has room again
		t.Fatalf("c's next call: %s", m.raw)
	}
	a.send(`{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"fake://counter"}}`)
	if m, _ := a.recvID("4"); m.Error != nil {
		t.Fatalf("subscribe at the new child: %s", m.raw)
	}
	if n := countMethod(childLog(t, logPath), "resources/subscribe"); n != 2 {
		t.Errorf("a's subscribe after its stake could not be carried did not reach the child: %d subscribes in all, want 2", n)
	}
}
