//go:build unix

package pool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// Kill -9 a child with 32 calls in flight across 8 sessions: every call
// ends, with the retryable "may have executed" error, and is never re-sent;
// calls sent while the child restarts run on the new child, once. The
// calls would run a minute and time out after two: each ends within the
// client's patience, with the child's death as its reason, or not at all.
func TestChildKilledAtMostOnce(t *testing.T) {
	dir := shortTempDir(t)
	counter := filepath.Join(dir, "count")
	tp := newTestPool(t, nil, fake("srv"))
	clients := make([]*client, 8)
	for i := range clients {
		clients[i] = tp.dial(t, "srv")
		clients[i].initialize("c", "")
	}
	for i, c := range clients {
		for k := range 4 {
			c.call(fmt.Sprint(k), "count", fmt.Sprintf(`{"file":%q,"text":"w-%d-%d","ms":60000}`, counter, i, k))
		}
	}
	eventually(t, "32 calls written to the child", func() bool {
		n := 0
		for _, r := range tp.Snapshot().InFlight {
			if r.WrittenToChild {
				n++
			}
		}
		return n == 32
	})
	pid := tp.Snapshot().Backends[0].PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			for range 4 {
				m := c.recv()
				var data struct {
					Retryable       bool `json:"retryable"`
					MayHaveExecuted bool `json:"mayHaveExecuted"`
				}
				if m.Error != nil {
					_ = json.Unmarshal(m.Error.Data, &data)
				}
				if m.Error == nil || m.Error.Code != -32003 || !strings.Contains(m.Error.Message, "exited") || !data.Retryable || !data.MayHaveExecuted {
					t.Errorf("session %d: want the retryable may-have-executed error, got %s", i, m.raw)
				}
			}
		})
	}
	wg.Wait()
	// New calls during the restart are queued and run once on the new child.
	for i, c := range clients {
		c.call(`"after"`, "count", fmt.Sprintf(`{"file":%q,"text":"a-%d"}`, counter, i))
	}
	for i, c := range clients {
		if m, _ := c.recvID(`"after"`); m.Error != nil {
			t.Errorf("session %d after restart: %s", i, m.raw)
		}
	}
	b, _ := os.ReadFile(counter)
	lines := strings.Fields(string(b))
	seen := map[string]int{}
	for _, l := range lines {
		seen[l]++
		if strings.HasPrefix(l, "w-") {
			t.Errorf("a call written to the dead child ran again: %s", l)
		}
	}
	for i := range clients {
		if n := seen[fmt.Sprintf("a-%d", i)]; n != 1 {
			t.Errorf("call a-%d ran %d times, want once", i, n)
		}
	}
	snap := tp.Snapshot()
	if snap.Backends[0].PID == pid || snap.Backends[0].Restarts != 1 {
		t.Errorf("backend after restart: %+v", snap.Backends[0])
	}
}

// A tool declared idempotent is retried once on a server whose annotations
// are trusted, and not retried on one whose are not.
func TestIdempotentRetryNeedsTrust(t *testing.T) {
	for _, trust := range []bool{true, false} {
		t.Run(fmt.Sprint("trust=", trust), func(t *testing.T) {
			counter := filepath.Join(shortTempDir(t), "count")
			cfg := fake("srv")
			cfg.TrustAnnotations = trust
			tp := newTestPool(t, nil, cfg)
			c := tp.dial(t, "srv")
			c.initialize("c", "")
			c.send(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
			c.recvID(`"l"`)
			c.call("1", "idem_count", fmt.Sprintf(`{"file":%q,"text":"x","ms":1000}`, counter))
			eventually(t, "the call written", func() bool {
				s := tp.Snapshot()
				return len(s.InFlight) == 1 && s.InFlight[0].WrittenToChild
			})
			if err := syscall.Kill(tp.Snapshot().Backends[0].PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			m, _ := c.recvID("1")
			if trust && (m.Error != nil || m.text() != "1") {
				t.Fatalf("trusted idempotent call: want it retried and answered 1, got %s", m.raw)
			}
			if !trust && (m.Error == nil || m.Error.Code != -32003) {
				t.Fatalf("untrusted: want -32003, got %s", m.raw)
			}
		})
	}
}

// A crash loop marks the server failed; requests then fail fast with a
// message naming the server and where to read its last stderr, which
// status quotes (the shared child's stderr is not told to a session).
func TestCrashLoopFails(t *testing.T) {
	tp := newTestPool(t, nil, fake("bad", "-stderr", "cannot open database", "-exit-at-start", "1"))
	c := tp.dial(t, "bad")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	m := c.recv()
	if m.Error == nil || !strings.Contains(m.Error.Message, `server "bad" failed`) || !strings.Contains(m.Error.Message, "switchboard status") {
		t.Fatalf("want the failure pointing to status, got %s", m.raw)
	}
	if st := tp.Snapshot().Servers[0]; st.State != "failed" || !strings.Contains(st.Error, "cannot open database") {
		t.Fatalf("server state %q, error %q: want failed, with the stderr", st.State, st.Error)
	}
}

// share "session" gives each session its own child, stopped with it.
func TestSessionModeOwnChild(t *testing.T) {
	cfg := fake("srv")
	cfg.Share = "session"
	tp := newTestPool(t, nil, cfg)
	a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
	pids := map[string]bool{}
	for _, c := range []*client{a, b} {
		c.initialize("c", "")
		c.call("1", "pid", `{}`)
		m, _ := c.recvID("1")
		pids[m.text()] = true
	}
	if len(pids) != 2 {
		t.Fatalf("want two children, got %v", pids)
	}
	if n := len(tp.Snapshot().Backends); n != 2 {
		t.Fatalf("status shows %d backends", n)
	}
	a.close()
	eventually(t, "a's child to stop with its session", func() bool { return len(tp.Snapshot().Backends) == 1 })
}

// A shared child with no session for idleTimeout stops; the next session
// starts a new one transparently.
func TestIdleChildIsReaped(t *testing.T) {
	cfg := fake("srv")
	cfg.IdleTimeout = 200 * time.Millisecond
	tp := newTestPool(t, &pool.Options{WarmupGrace: -1}, cfg)
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	first := tp.Snapshot().Backends[0].PID
	c.close()
	eventually(t, "the idle child to stop", func() bool { return len(tp.Snapshot().Backends) == 0 })
	c = tp.dial(t, "srv")
	c.initialize("c", "")
	c.call("1", "pid", `{}`)
	if m, _ := c.recvID("1"); m.text() == fmt.Sprint(first) || m.Error != nil {
		t.Fatalf("want a new child, got %s", m.raw)
	}
}

// TestWarmupGrace: a fresh child whose only session leaves at once is
// kept for its warm-up grace although its idleTimeout is far shorter, so
// a client that comes back finds it warm; after the grace it is reaped.
func TestWarmupGrace(t *testing.T) {
	const grace = 700 * time.Millisecond
	cfg := fake("srv")
	cfg.IdleTimeout = 50 * time.Millisecond
	tp := newTestPool(t, &pool.Options{WarmupGrace: grace}, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, events := tp.Subscribe(ctx, 64)

	c := tp.dial(t, "srv")
	c.initialize("quick", "")
	c.close()
	var started, exited time.Time
	var pid int
	returned := false
	for exited.IsZero() {
		select {
		case e := <-events:
			switch e.Kind {
			case pool.EventBackendStarted:
				started, pid = e.Time, e.PID
			case pool.EventSessionClosed:
				// The session is gone: only the grace keeps the child
				// beyond its 50 ms idleTimeout. A client coming back
				// finds the same, warm child (at least once the idle
				// timeout would have ended it, checked below by how
				// long it lived).
				if d := time.Since(started); !returned && d < grace/2 {
					returned = true
					c2 := tp.dial(t, "srv")
					c2.initialize("back", "")
					c2.call("1", "pid", `{}`)
					if m, _ := c2.recvID("1"); m.text() != fmt.Sprint(pid) {
						t.Fatalf("back after %v: child %s, want the warm %d", d, m.text(), pid)
					}
					c2.close()
				}
			case pool.EventBackendExited:
				exited = e.Time
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the idle child was never reaped")
		}
	}
	// Its grace runs from its start, a little before the started event;
	// without the grace it would have lived about idleTimeout.
	if lived := exited.Sub(started); lived < grace-cfg.IdleTimeout {
		t.Fatalf("the child lived %v, not its %v warm-up grace (idleTimeout %v)", lived, grace, cfg.IdleTimeout)
	}
}

// Non-JSON lines on a child's stdout are counted, not fatal.
func TestChildGarbageCounted(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-garbage"))
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	c.call("1", "echo", `{"text":"ok"}`)
	if m, _ := c.recvID("1"); m.text() != "ok" {
		t.Fatal(m.raw)
	}
	if n := tp.Snapshot().Backends[0].BadLines; n != 2 {
		t.Fatalf("bad lines: %d, want 2", n)
	}
}

// A child that never answers the handshake fails with a clear error.
func TestHandshakeTimeout(t *testing.T) {
	tp := newTestPool(t, &pool.Options{HandshakeTimeout: 300 * time.Millisecond,
		Restart: pool.RestartPolicy{MaxRestarts: 1}}, fake("mute", "-no-init"))
	c := tp.dial(t, "mute")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	m := c.recv()
	if m.Error == nil || !strings.Contains(m.Error.Message, "no answer to server/discover or initialize within 300ms") {
		t.Fatalf("got %s", m.raw)
	}
	if s := tp.Snapshot().Servers[0]; s.State != "failed" || s.Error == "" {
		t.Fatalf("server: %+v", s)
	}
}

// A child that never finishes its handshake, restarted only at the
// handshake timeout (so slowly that the restart budget is never spent):
// a client's initialize waits no longer than the request timeout, and
// is told the server did not start and nothing was sent to it.
func TestInitializeWaitsNoLongerThanTheRequestTimeout(t *testing.T) {
	cfg := fake("mute", "-no-init")
	cfg.RequestTimeout = 300 * time.Millisecond
	tp := newTestPool(t, &pool.Options{HandshakeTimeout: time.Hour}, cfg)
	c := tp.dial(t, "mute")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	m := c.recv()
	var data struct {
		MayHaveExecuted *bool `json:"mayHaveExecuted"`
		Retryable       bool  `json:"retryable"`
	}
	if m.Error != nil {
		_ = json.Unmarshal(m.Error.Data, &data)
	}
	if m.Error == nil || m.Error.Code != -32001 || !strings.Contains(m.Error.Message, `server "mute" did not finish starting within 300ms`) ||
		data.MayHaveExecuted == nil || *data.MayHaveExecuted || !data.Retryable {
		t.Fatalf("want -32001 saying the server did not start, retryable, not executed; got %s", m.raw)
	}
	if s := tp.Snapshot().Servers[0]; s.State == "failed" {
		t.Fatalf("one slow start is not a crash loop: %+v", s)
	}
}

// A server's own restart policy overrides the pool's.
func TestPerServerRestartPolicy(t *testing.T) {
	cfg := fake("bad", "-exit-at-start", "1")
	cfg.Restart = pool.RestartPolicy{MaxRestarts: 2, Window: time.Minute, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "bad")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	if m := c.recv(); m.Error == nil || !strings.Contains(m.Error.Message, "exited 2 times") {
		t.Fatalf("want the failure after 2 exits, got %s", m.raw)
	}
}

// TestStalledClientDoesNotSlowOthers: a client that stops reading while
// 4 MiB of answers are queued for it blocks its own writer until the
// eviction time; meanwhile 8 other sessions on the same child keep their
// latency (each call well under half the eviction time, which is what
// they would wait were the child's reader held up), and when it is
// evicted its call still in flight is cancelled at the child.
func TestStalledClientDoesNotSlowOthers(t *testing.T) {
	const evictAfter = 2 * time.Second
	logPath := filepath.Join(shortTempDir(t), "child.log")
	tp := newTestPool(t, &pool.Options{EvictAfter: evictAfter}, fake("srv", "-log", logPath))
	stalled := tp.dial(t, "srv")
	stalled.initialize("stalled", "")
	stalled.pause()
	others := make([]*client, 8)
	for i := range others {
		others[i] = tp.dial(t, "srv")
		others[i].initialize("other", "")
	}
	stalled.call(`"slow"`, "sleep", `{"ms":60000}`)
	for i := range 32 { // 4 MiB, far more than the socket buffers hold
		stalled.call(fmt.Sprint(i), "big", `{"bytes":131072}`)
	}
	start := time.Now()
	var mu sync.Mutex
	var worst time.Duration
	var wg sync.WaitGroup
	for i, c := range others {
		wg.Go(func() {
			for k := 0; time.Since(start) < evictAfter; k++ {
				t0 := time.Now()
				c.call(fmt.Sprint(k), "echo", fmt.Sprintf(`{"text":"o%d-%d"}`, i, k))
				if m, _ := c.recvID(fmt.Sprint(k)); m.text() != fmt.Sprintf("o%d-%d", i, k) {
					t.Errorf("session %d: %s", i, m.raw)
					return
				}
				mu.Lock()
				worst = max(worst, time.Since(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("slowest call of the 8 other sessions while one stalled: %v (eviction after %v)", worst, evictAfter)
	if worst > evictAfter/2 {
		t.Errorf("a call of another session took %v: the stalled client held them up", worst)
	}
	eventually(t, "the stalled session to be evicted", func() bool { return tp.Snapshot().Counters.Evicted == 1 })
	eventually(t, "its in-flight sleep to be cancelled at the child", func() bool {
		return countMethod(childLog(t, logPath), "notifications/cancelled") >= 1
	})
}

// A failed server says why once: its reason carries no JSON-RPC code and
// quotes the child's last stderr lines one time, even when every child
// of the crash loop wrote the same line.
func TestFailedServerSaysWhyOnce(t *testing.T) {
	tp := newTestPool(t, &pool.Options{Restart: pool.RestartPolicy{MaxRestarts: 3}},
		fake("crashy", "-stderr", "KeyError: TOKEN", "-exit-at-start", "3"))
	c := tp.dial(t, "crashy")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	if m := c.recv(); m.Error == nil {
		t.Fatalf("want the failure, got %s", m.raw)
	}
	eventually(t, "the server failed", func() bool { return tp.Snapshot().Servers[0].State == "failed" })
	why := tp.Snapshot().Servers[0].Error
	if strings.HasPrefix(why, "jsonrpc") || strings.Count(why, "KeyError: TOKEN") != 1 {
		t.Errorf("the failure's reason: %q", why)
	}
}

// A config change to other servers leaves a failed server alone: it
// stays failed, with its reason, and no child of it is started (README:
// unchanged servers are not touched; `restart NAME` or an edit of its
// own entry gives it a new budget). On the first edition any edit of the
// file, such as adding a server, started a failed server's crash loop
// again.
func TestUnrelatedEditLeavesAFailedServerAlone(t *testing.T) {
	dir := shortTempDir(t)
	marker := filepath.Join(dir, "started")
	crashy := fake("crashy")
	crashy.Command, crashy.Args = "/bin/sh", []string{"-c", `echo x >> "$0"; exec "$1" -exit-at-start 3`, marker, fakeBin}
	tp := newTestPool(t, &pool.Options{Restart: pool.RestartPolicy{MaxRestarts: 1}}, crashy)
	c := tp.dial(t, "crashy")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	if m := c.recv(); m.Error == nil {
		t.Fatalf("want the failure, got %s", m.raw)
	}
	eventually(t, "the server failed", func() bool { return tp.Snapshot().Servers[0].State == "failed" })
	started := func() int { b, _ := os.ReadFile(marker); return strings.Count(string(b), "x") }
	before, why := started(), tp.Snapshot().Servers[0].Error
	if err := tp.Apply([]pool.ServerConfig{crashy, fake("other")}); err != nil {
		t.Fatal(err)
	}
	// Nothing to wait for when the pool is right: watch for a while.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(time.Second); time.Now().Before(end); <-tick.C {
		st := tp.Snapshot().Servers
		i := slices.IndexFunc(st, func(s pool.ServerInfo) bool { return s.Name == "crashy" })
		if n := started(); n != before || st[i].State != "failed" || st[i].Error != why {
			t.Fatalf("after adding another server: %d children of crashy started (was %d), state %q, reason %q (was %q)",
				n, before, st[i].State, st[i].Error, why)
		}
	}
}
