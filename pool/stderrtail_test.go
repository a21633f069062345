package pool_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// pidsIn is every PID a text names as the fake's -stderr-lines and its
// ready line do ("pid N"), each once, in order of first mention.
func pidsIn(texts ...string) []string {
	var pids []string
	for _, s := range texts {
		for _, m := range regexp.MustCompile(`pid (\d+)`).FindAllStringSubmatch(s, -1) {
			if !slices.Contains(pids, m[1]) {
				pids = append(pids, m[1])
			}
		}
	}
	return pids
}

// failedServer starts a crash loop of cfg, whose children exit at once,
// and returns the failed server's reason and its backend once it failed.
func failedServer(t *testing.T, maxRestarts int, cfg pool.ServerConfig) (string, pool.BackendInfo) {
	t.Helper()
	tp := newTestPool(t, &pool.Options{Restart: pool.RestartPolicy{MaxRestarts: maxRestarts}}, cfg)
	c := tp.dial(t, cfg.Name)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	if m := c.recv(); m.Error == nil {
		t.Fatalf("want the failure, got %s", m.raw)
	}
	eventually(t, "the server failed", func() bool { return serverInfo(t, tp, cfg.Name).State == pool.StateFailed })
	bs := tp.Snapshot().Backends
	if len(bs) != 1 {
		t.Fatalf("backends %+v, want the failed one", bs)
	}
	return serverInfo(t, tp, cfg.Name).Error, bs[0]
}

// A backend's stderrTail is what its current (or, while none runs, its
// last) child said, and a failed server quotes its last child's lines:
// README, Troubleshooting a hang, "stderrTail shows what the child last
// said". The ring was the backend's and outlived each child: a crash
// loop's failure quoted a mix of its children's lines, and a child that
// took a crashed one's place showed the dead one's lines as its own.
func TestStderrTailIsTheChildsOwn(t *testing.T) {
	t.Run("failed", func(t *testing.T) {
		why, b := failedServer(t, 2, fake("crashy", "-stderr-lines", "2", "-exit-at-start", "3"))
		pids := pidsIn(why)
		if len(pids) != 1 {
			t.Fatalf("the failure's reason quotes the stderr of children %v, want the last child's alone: %q", pids, why)
		}
		last := pids[0]
		want := []string{"stderr line 1 of 2, pid " + last, "stderr line 2 of 2, pid " + last}
		if !slices.Equal(b.StderrTail, want) {
			t.Errorf("the failed backend's stderrTail %q, want its last child's %q", b.StderrTail, want)
		}
		if got := pidsIn(b.LastError); !slices.Equal(got, pids) {
			t.Errorf("the backend's lastError quotes the stderr of children %v, want %v: %q", got, pids, b.LastError)
		}
	})
	t.Run("after a crash", func(t *testing.T) {
		tp := newTestPool(t, nil, fake("srv", "-crash-after", "1"))
		c := tp.dial(t, "srv")
		c.initialize("c", "")
		first := fmt.Sprint(childPID(t, tp))
		tail := func() []string {
			if bs := tp.Snapshot().Backends; len(bs) == 1 {
				return bs[0].StderrTail
			}
			return nil
		}
		says := func(pid string) bool { return slices.Contains(pidsIn(tail()...), pid) }
		eventually(t, "the first child's ready line in its tail", func() bool { return says(first) })
		c.call("1", "echo", `{"text":"x"}`)
		if m, _ := c.recvID("1"); m.Error == nil {
			t.Fatalf("want the crash's error, got %s", m.raw)
		}
		var next string
		eventually(t, "the next child ready, its ready line in its tail", func() bool {
			bs := tp.Snapshot().Backends
			if len(bs) != 1 || bs[0].State != pool.StateReady || bs[0].PID == 0 || fmt.Sprint(bs[0].PID) == first {
				return false
			}
			next = fmt.Sprint(bs[0].PID)
			return says(next)
		}, func() string { return fmt.Sprintf("%q", tail()) })
		if pids := pidsIn(tail()...); !slices.Equal(pids, []string{next}) {
			t.Errorf("child %s's stderrTail %q names children %v, want it alone", next, tail(), pids)
		}
	})
}

// A crash's reason and a failed server's quote the stderr of the child
// that exited last even when the child writes it and exits at once: the
// reason is composed once that child's stderr has been read to its end,
// not as the exit is seen, when the stderr reader may not have read it
// yet. Before, a handshake's failure quoted what the ring held then: the
// children before, and none of the last one's lines.
func TestFailureQuotesTheLastChildsStderr(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines int
		hold  bool // the stderr reader starts only once the child exited
	}{
		{"the reader starts after the exit", 1, true},
		{"a lot of stderr, then an exit", 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.hold {
				t.Cleanup(pool.HoldStderrReaders()) // after the pool closed
			}
			n := fmt.Sprint(tc.lines)
			why, b := failedServer(t, 2, fake("crashy", "-stderr-lines", n, "-exit-at-start", "3"))
			if len(b.StderrTail) == 0 {
				t.Fatalf("the failed backend's stderrTail is empty")
			}
			// The tail is read after the last child's reader ended: it
			// ends with that child's last line.
			last := b.StderrTail[len(b.StderrTail)-1]
			if pids := pidsIn(last); len(pids) != 1 || last != fmt.Sprintf("stderr line %s of %s, pid %s", n, n, pids[0]) {
				t.Fatalf("the failed backend's stderrTail %q, want it to end with a child's last line", b.StderrTail)
			}
			if !strings.Contains(why, last) {
				t.Errorf("the failure's reason %q, want it to quote the last child's %q", why, last)
			}
			if !strings.Contains(b.LastError, last) {
				t.Errorf("the backend's lastError %q, want it to quote the last child's %q", b.LastError, last)
			}
		})
	}
}
