//go:build unix

package pool_test

import (
	"fmt"
	"regexp"
	"slices"
	"syscall"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// stderrSaysPID is a server whose every child writes "child PID" to
// stderr as it starts, then runs the fake with flags.
func stderrSaysPID(name string, flags ...string) pool.ServerConfig {
	cfg := fake(name)
	cfg.Command = "/bin/sh"
	cfg.Args = append([]string{"-c", `echo "child $$" >&2; exec "$0" "$@"`, fakeBin}, flags...)
	return cfg
}

// A backend's stderrTail is what its current child said: a child that
// took the place of a killed one shows its own lines, not its
// predecessor's (README, Troubleshooting a hang: it "shows what the child
// last said"). A server that failed quotes its last child's lines, not a
// mix of its children's. The ring outlived each child: the new child's
// tail began with the dead one's lines.
func TestStderrTailIsTheChildsOwn(t *testing.T) {
	t.Run("after a kill", func(t *testing.T) {
		tp := newTestPool(t, nil, stderrSaysPID("srv"))
		c := tp.dial(t, "srv")
		c.initialize("c", "")
		first := childPID(t, tp)
		said := func(pid int) bool {
			bs := tp.Snapshot().Backends
			return len(bs) == 1 && slices.Contains(bs[0].StderrTail, fmt.Sprintf("child %d", pid))
		}
		eventually(t, "the first child's line in its tail", func() bool { return said(first) })
		if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var next int
		eventually(t, "the next child ready, its line in its tail", func() bool {
			bs := tp.Snapshot().Backends
			if len(bs) != 1 || bs[0].State != pool.StateReady || bs[0].PID == first || bs[0].PID == 0 {
				return false
			}
			next = bs[0].PID
			return said(next)
		})
		if tail := tp.Snapshot().Backends[0].StderrTail; slices.Contains(tail, fmt.Sprintf("child %d", first)) {
			t.Errorf("child %d's stderrTail %q holds the killed child %d's line", next, tail, first)
		}
	})
	t.Run("failed", func(t *testing.T) {
		tp := newTestPool(t, &pool.Options{Restart: pool.RestartPolicy{MaxRestarts: 3}}, stderrSaysPID("crashy", "-exit-at-start", "3"))
		c := tp.dial(t, "crashy")
		c.send(stateInitialize)
		if m := c.recv(); m.Error == nil {
			t.Fatalf("want the failure, got %s", m.raw)
		}
		eventually(t, "the server failed", func() bool { return serverInfo(t, tp, "crashy").State == pool.StateFailed })
		why := serverInfo(t, tp, "crashy").Error
		if n := len(regexp.MustCompile(`child \d+`).FindAllString(why, -1)); n != 1 {
			t.Errorf("the failure's reason quotes %d children's lines, want the last child's: %q", n, why)
		}
		if bs := tp.Snapshot().Backends; len(bs) != 1 || len(bs[0].StderrTail) != 1 {
			t.Errorf("the failed backend's stderrTail: %+v; want its last child's one line", bs)
		}
	})
}
