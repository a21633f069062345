//go:build unix

package pool_test

import (
	"bufio"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// openAs opens a legacy session of fs as name, with roots when uri is
// set (their partition's child), else with none.
func openAs(t *testing.T, tp *testPool, name, uri string) *client {
	t.Helper()
	c := tp.dial(t, "fs")
	if uri != "" {
		c.initRoots(name, uri)
	} else {
		c.initialize(name, "")
	}
	return c
}

// takeSent is what the pool has sent c so far, without waiting.
func takeSent(c *client) []msg {
	var out []msg
	for {
		select {
		case m, ok := <-c.in:
			if !ok {
				return out
			}
			out = append(out, m)
		default:
			return out
		}
	}
}

// updatedReachesSilent polls: notify has its child say fake://counter
// changed until to, which sends nothing meanwhile, was sent
// resources/updated tagged tag (untagged when tag is empty).
func updatedReachesSilent(t *testing.T, notify func(id string), to *client, tag, logPath string) {
	t.Helper()
	want := strings.TrimSpace("notifications/resources/updated " + tag)
	n := 0
	eventually(t, "resources/updated at a session that sends nothing", func() bool {
		n++
		notify(fmt.Sprintf(`"notify-%d"`, n))
		return slices.ContainsFunc(notificationsIn(takeSent(to)), func(s string) bool { return strings.TrimSpace(s) == want })
	}, func() string {
		return fmt.Sprintf("the children heard %d resources/subscribe and %d subscriptions/listen",
			countInLog(t, logPath, "resources/subscribe"), countInLog(t, logPath, "subscriptions/listen"))
	})
}

// childrenLeft waits until the server's children are exactly those of
// the roots in want (each "" for the no-roots partition): the old ones
// stopped, and no other started. A child started that should not have
// been is never reaped while its partition has a session, so this times
// out. An old child passes for a new one of the same roots: the caller
// knows the new ones run.
func childrenLeft(t *testing.T, tp *testPool, want ...string) {
	t.Helper()
	roots := func() []string {
		var got []string
		for _, b := range tp.Snapshot().Backends {
			got = append(got, strings.Join(b.Roots, " "))
		}
		slices.Sort(got)
		return got
	}
	slices.Sort(want)
	eventually(t, fmt.Sprintf("the children of roots %q alone", want), func() bool {
		return slices.Equal(roots(), want)
	}, func() string { return fmt.Sprintf("children of roots %q", roots()) })
}

// A config change that replaces the server's child starts the new child
// at once for a partition one of whose sessions holds a subscription or
// an open subscriptions/listen: the session, which sends nothing more,
// goes on getting resources/updated, from the new child. A partition
// whose sessions hold nothing keeps no child until its next request.
// (Before, the stakes stayed at the old child until some session of the
// partition sent a request: a client that only listens heard nothing
// after the user edited the config.)
func TestReloadStartsTheChildForHeldStakes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		era     string // the child's
		listen  bool   // the holder opens a 2026-07-28 listen, else it subscribes (legacy)
		reloads int    // config changes in a row
	}{
		{"subscribe", "legacy", false, 1},
		{"subscribe/twice", "legacy", false, 2},
		{"listen/legacy", "legacy", true, 1},
		{"listen/modern", "modern", true, 1},
		{"listen/modern/twice", "modern", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logPath := filepath.Join(shortTempDir(t), "child.log")
			cfg := fake("fs", "-era", tc.era, "-log", logPath)
			tp := newTestPool(t, nil, cfg)

			var holder *client
			var roots, tag string // the holder's partition, its listen's tag
			if tc.listen {
				holder = tp.dial(t, "fs")
				openListen(t, holder, `"L"`, `{"resourceSubscriptions":["fake://counter"]}`)
				tag = `"L"`
			} else {
				roots = "file:///work/a"
				holder = openAs(t, tp, "a", roots)
				holder.pidOf("1")
				subscribeCounter(t, holder, "2")
			}
			idle := openAs(t, tp, "idle", "file:///work/b") // holds nothing
			idle.pidOf("1")
			method := "resources/subscribe"
			if tc.era == "modern" {
				method = "subscriptions/listen"
			}
			if n := countInLog(t, logPath, method); n != 1 {
				t.Fatalf("the first child heard %d %s, want 1", n, method)
			}

			for n := range tc.reloads {
				next := cfg
				next.Env = map[string]string{"SWITCHBOARD_TEST_RELOAD": strconv.Itoa(n)}
				if err := tp.Apply([]pool.ServerConfig{next}); err != nil {
					t.Fatal(err)
				}
			}
			// A child replaced before it was ready may never hear it.
			eventually(t, "a new child to hear the held stake, no session having sent anything", func() bool {
				return countInLog(t, logPath, method) >= 2
			}, func() string { return fmt.Sprintf("the children heard %d %s", countInLog(t, logPath, method), method) })
			childrenLeft(t, tp, roots) // the last one; the idle partition's is not started

			// Another session of the holder's child has it say the
			// resource changed: the holder, silent, is sent the update.
			var notify func(id string)
			if tc.listen {
				other := tp.dial(t, "fs")
				notify = func(id string) {
					callModern(other, id, "notify", `{"kind":"updated"}`)
					other.recvID(id)
				}
			} else {
				other := openAs(t, tp, "b", roots)
				notify = func(id string) {
					other.call(id, "notify", `{"kind":"updated"}`)
					other.recvID(id)
				}
			}
			updatedReachesSilent(t, notify, holder, tag, logPath)
			if n := countInLog(t, logPath, method); tc.reloads == 1 && n != 2 {
				t.Errorf("the children heard %d %s, want 2 (one each)", n, method)
			}
		})
	}
}

// Neither the user's stop nor a config change that disables the server
// starts a child for the subscriptions its sessions hold: the stop, by
// design, starts nothing (the next request does), and a disabled server
// runs none.
func TestStopOrDisableStartsNoChildForHeldStakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*testPool, pool.ServerConfig) error
	}{
		{"stop", stopFS},
		{"disable", func(tp *testPool, cfg pool.ServerConfig) error {
			cfg.Disabled = true
			return tp.Apply([]pool.ServerConfig{cfg})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logPath := filepath.Join(shortTempDir(t), "child.log")
			cfg := fake("fs", "-log", logPath)
			tp := newTestPool(t, nil, cfg)
			a := openAs(t, tp, "a", "")
			a.pidOf("1")
			subscribeCounter(t, a, "2")
			if err := tc.stop(tp, cfg); err != nil {
				t.Fatal(err)
			}
			childrenLeft(t, tp)
			if n := countInLog(t, logPath, "resources/subscribe"); n != 1 {
				t.Errorf("the children heard %d resources/subscribe, want 1 (the first child's)", n)
			}
		})
	}
}

// A stateless 2026-07-28 listen over HTTP has the new child started at
// once too, told the capabilities the listen's request declared, as the
// child started for the listen itself was (a stateless session declares
// none of its own).
func TestReloadStartsTheChildForAStatelessListen(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	cfg := fake("fs", "-log", logPath)
	tp := newTestPool(t, nil, cfg)
	c := &httpClient{t: t, url: newHTTPFront(t, tp) + "/mcp/fs"}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	resp := c.post(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://counter"]},` + meta + `}}`)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var ack string
	for ack == "" && sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			ack = data
		}
	}
	if !strings.Contains(ack, "notifications/subscriptions/acknowledged") {
		t.Fatalf("listen: %s, first event %q", resp.Status, ack)
	}
	if err := reloadFS(tp, cfg); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new child to hear the listen's subscribe", func() bool {
		return countInLog(t, logPath, "resources/subscribe") == 2
	})
	var elicit []bool
	for _, m := range childLog(t, logPath) {
		if m["method"] == "initialize" {
			caps, _ := m["params"].(map[string]any)["capabilities"].(map[string]any)
			_, ok := caps["elicitation"]
			elicit = append(elicit, ok)
		}
	}
	if !slices.Equal(elicit, []bool{true, true}) {
		t.Errorf("the children were told elicitation %v, want [true true] (the listen's request declared it)", elicit)
	}
}

// A session that closes as the config change carries its subscription to
// the child started for it leaves no stake there: that child hears no
// subscribe, or its unsubscribe after it. The child is started all the
// same (another session of it is there), and serves that session.
func TestSessionClosingAsReloadCarriesItsStakesLeavesNone(t *testing.T) {
	t.Cleanup(pool.CloseCarryingSessions()) // after the pool closed
	dir := shortTempDir(t)
	cfg := fake("fs", "-log", filepath.Join(dir, "first.log"))
	tp := newTestPool(t, nil, cfg)
	a, b := openAs(t, tp, "a", ""), openAs(t, tp, "b", "")
	a.pidOf("1")
	b.pidOf("1")
	subscribeCounter(t, a, "2")
	newLog := filepath.Join(dir, "new.log")
	cfg.Args = []string{"-log", newLog} // the new child logs apart
	if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new child alone, started for a, which closed as its stake moved", func() bool {
		bs := tp.Snapshot().Backends
		return len(bs) == 1 && slices.Contains(bs[0].Command, newLog)
	}, func() string { return fmt.Sprintf("children %+v", tp.Snapshot().Backends) })
	b.pidOf("3") // behind what the new child was told as it became ready
	subs, unsubs := countInLog(t, newLog, "resources/subscribe"), countInLog(t, newLog, "resources/unsubscribe")
	if subs != unsubs {
		t.Errorf("the new child heard %d subscribes and %d unsubscribes: it holds a stake for a, which closed", subs, unsubs)
	}
}
