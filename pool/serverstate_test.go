//go:build unix

package pool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

const stateInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`

// A share "session" server's state is its sessions' children's: ready
// while a session's own child is, failed with the reason when the
// session's child failed, stopped with no child at all. The dashboard,
// the tray and status --json show it as it is; it was always "stopped",
// as only shared children were looked at.
func TestSessionModeServerStateSummarisesItsChildren(t *testing.T) {
	t.Run("ready", func(t *testing.T) {
		cfg := fake("own")
		cfg.Share = pool.ShareSession
		tp := newTestPool(t, nil, cfg)
		if st := serverInfo(t, tp, "own").State; st != pool.StateStopped {
			t.Fatalf("with no session: state %q, want stopped", st)
		}
		c := tp.dial(t, "own")
		c.initialize("c", "")
		if s := serverInfo(t, tp, "own"); s.State != pool.StateReady || s.Error != "" {
			t.Fatalf("with a session's own child ready: %+v, want ready", s)
		}
		c.close()
		eventually(t, "the server to stop with its only session", func() bool {
			return serverInfo(t, tp, "own").State == pool.StateStopped
		})
	})
	t.Run("failed", func(t *testing.T) {
		cfg := fake("own", "-stderr", "KeyError: TOKEN", "-exit-at-start", "3")
		cfg.Share = pool.ShareSession
		tp := newTestPool(t, &pool.Options{Restart: pool.RestartPolicy{MaxRestarts: 1}}, cfg)
		c := tp.dial(t, "own")
		c.send(stateInitialize)
		if m := c.recv(); m.Error == nil {
			t.Fatalf("want the failure, got %s", m.raw)
		}
		if s := serverInfo(t, tp, "own"); s.State != pool.StateFailed || !strings.Contains(s.Error, "KeyError: TOKEN") {
			t.Fatalf("with the session's own child failed: %+v, want failed, saying why", s)
		}
	})
}

// A failed server stays failed, with its reason, once its idleTimeout
// has passed with no session in its child (a session whose initialize
// failed is in none): README says failed lasts until its config changes
// or it is restarted. The next request fails fast, starting no child.
// The idle reaper used to forget the failed child: the server showed
// "stopped" with no reason, and the next request went through a whole
// crash loop again.
func TestFailedServerStaysFailedPastItsIdleTimeout(t *testing.T) {
	const idle = 50 * time.Millisecond
	marker := filepath.Join(shortTempDir(t), "started")
	cfg := fake("broken")
	cfg.Command, cfg.Args = "/bin/sh", []string{"-c", `echo x >> "$0"; exec "$1" -stderr "KeyError: TOKEN" -exit-at-start 3`, marker, fakeBin}
	cfg.IdleTimeout = idle
	tp := newTestPool(t, &pool.Options{WarmupGrace: -1,
		Restart: pool.RestartPolicy{MaxRestarts: 2, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}}, cfg)
	c := tp.dial(t, "broken")
	c.send(stateInitialize)
	if m := c.recv(); m.Error == nil {
		t.Fatalf("want the failure, got %s", m.raw)
	}
	failed := serverInfo(t, tp, "broken")
	if failed.State != pool.StateFailed || !strings.Contains(failed.Error, "KeyError: TOKEN") {
		t.Fatalf("after the crash loop: %+v, want failed, saying why", failed)
	}
	started := func() int { b, _ := os.ReadFile(marker); return strings.Count(string(b), "x") }
	before := started()

	// Nothing to wait for when the pool is right: watch for many idle
	// periods.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(40 * idle); time.Now().Before(end); <-tick.C {
		if s := serverInfo(t, tp, "broken"); s != failed {
			t.Fatalf("%v after it failed, with idleTimeout %v: %+v, want it still %+v", time.Since(end.Add(-40*idle)), idle, s, failed)
		}
	}

	failsFast(t, tp, func() int { return started() - before })
}

// A reload that writes out a failed server's defaults (idleTimeout,
// requestTimeout, the restart policy the pool runs) changes nothing the
// server runs with: it stays failed, with its reason, and the next
// request fails fast, starting no child. The values used to be compared
// as given: 0 and the default differed, and such a reload cleared the
// failure, so the next request went through a whole crash loop again.
func TestDefaultsWrittenOutLeaveAFailedServerFailed(t *testing.T) {
	marker := filepath.Join(shortTempDir(t), "started")
	cfg := fake("broken")
	cfg.Command, cfg.Args = "/bin/sh", []string{"-c", `echo x >> "$0"; exec "$1" -stderr "KeyError: TOKEN" -exit-at-start 3`, marker, fakeBin}
	restart := pool.RestartPolicy{MaxRestarts: 2, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	tp := newTestPool(t, &pool.Options{WarmupGrace: -1, Restart: restart}, cfg)
	c := tp.dial(t, "broken")
	c.send(stateInitialize)
	if m := c.recv(); m.Error == nil {
		t.Fatalf("want the failure, got %s", m.raw)
	}
	failed := serverInfo(t, tp, "broken")
	if failed.State != pool.StateFailed {
		t.Fatalf("after the crash loop: %+v, want failed", failed)
	}
	started := func() int { b, _ := os.ReadFile(marker); return strings.Count(string(b), "x") }
	before := started()

	spelled := cfg
	spelled.IdleTimeout, spelled.RequestTimeout = pool.DefaultIdleTimeout, pool.DefaultRequestTimeout
	spelled.Restart = pool.RestartPolicy{MaxRestarts: 2, Window: pool.DefaultRestartWindow}
	if err := tp.Apply([]pool.ServerConfig{spelled}); err != nil {
		t.Fatal(err)
	}
	if s := serverInfo(t, tp, "broken"); s != failed {
		t.Fatalf("after a reload with its defaults written out: %+v, want it still %+v", s, failed)
	}
	failsFast(t, tp, func() int { return started() - before })
}

// failsFast checks that a new session of the failed server "broken" is
// refused with the failure's reason and that no child was started for it
// (startedSince counts the children started since the failure).
func failsFast(t *testing.T, tp *testPool, startedSince func() int) {
	t.Helper()
	c := tp.dial(t, "broken")
	c.send(stateInitialize)
	if m := c.recv(); m.Error == nil || !strings.Contains(m.Error.Message, `server "broken" failed`) {
		t.Fatalf("the next session's initialize: want the failure, got %s", m.raw)
	}
	if n := startedSince(); n != 0 {
		t.Fatalf("the next request started %d children of the failed server: want it to fail fast", n)
	}
}
