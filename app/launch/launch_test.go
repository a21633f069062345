//go:build unix

package launch

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/flock"
	"github.com/switchboard-mcp/switchboard/app/home"
)

// TestAwaitRunning: a client waits for a pool that holds the instance
// lock (it is starting, or upgrading in place) until it answers, and not
// at all when no one holds the lock, whatever PID the lock file names: a
// PID left there by a pool that exited may be any live process now (or
// another user's), and on the first edition a client waited 10 s on it
// before starting the pool.
func TestAwaitRunning(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		pid       string // written into the lock file; "" writes none
		hold      bool   // a pool holds the lock
		answersAt int    // the dial that succeeds; 0: none does
		want      bool
		minDials  int
	}{
		{"a pool holding the lock answers on the third dial", strconv.Itoa(os.Getppid()), true, 3, true, 3},
		{"a pool holding the lock that never answers is given up", strconv.Itoa(os.Getppid()), true, 0, false, 2},
		{"no lock file", "", false, 1, false, 0},
		{"the lock names a process that is gone", strconv.Itoa(gone.Process.Pid), false, 1, false, 0},
		{"the free lock names a live process", strconv.Itoa(os.Getppid()), false, 0, false, 0},
		{"the free lock names another user's process", "1", false, 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths := home.Paths{Run: t.TempDir()}
			if tc.pid != "" {
				if err := os.WriteFile(paths.LockFile(), []byte(tc.pid+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.hold {
				l, err := flock.TryLock(paths.LockFile())
				if err != nil {
					t.Fatal(err)
				}
				defer l.Unlock()
			}
			dials := 0
			dial := func() (net.Conn, error) {
				dials++
				if dials == tc.answersAt {
					c, s := net.Pipe()
					s.Close()
					return c, nil
				}
				return nil, errors.New("no socket")
			}
			c, ok := awaitRunning(paths, dial, time.Now().Add(200*time.Millisecond))
			if ok != tc.want || (c != nil) != tc.want || dials < tc.minDials {
				t.Fatalf("awaitRunning = %v, %v after %d dials; want %v after at least %d", c, ok, dials, tc.want, tc.minDials)
			}
			if c != nil {
				c.Close()
			}
			if !tc.want && tc.minDials == 0 && dials > 0 {
				t.Fatalf("dialled %d times for a pool that does not run", dials)
			}
		})
	}
}

// fakePool is a `switchboard` program on PATH for Ensure to start: the
// first one exits at once, as a pool that lost the instance lock to
// another does ("already running", exit 4), once the test says the other
// holds it; the next one "listens" (dial succeeds once it has started).
const fakePool = `#!/bin/sh
echo $$ >> "$SB_TEST_STARTS"
if [ "$(wc -l < "$SB_TEST_STARTS")" -eq 1 ]; then
	while [ ! -e "$SB_TEST_HELD" ]; do sleep 0.01; done
	echo "switchboard is already running" >&2
	exit 4
fi
touch "$SB_TEST_UP"
exec sleep 60
`

// TestEnsureStartsOnceTheLockIsFree: the pool a client started exits
// because another pool holds the instance lock (one still stopping, say);
// once that one lets the lock go without a pool answering, the client
// starts the pool again and is served, rather than dial until its 30 s
// deadline as the first edition did.
func TestEnsureStartsOnceTheLockIsFree(t *testing.T) {
	dir, err := os.MkdirTemp("", "sbl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	paths := home.Paths{Config: filepath.Join(dir, "config.json"), Run: filepath.Join(dir, "run"), Logs: filepath.Join(dir, "logs")}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "switchboard"), []byte(fakePool), 0o700); err != nil {
		t.Fatal(err)
	}
	starts, held, up := filepath.Join(dir, "starts"), filepath.Join(dir, "held"), filepath.Join(dir, "up")
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("DISPLAY", "")
	t.Setenv("WAYLAND_DISPLAY", "")
	t.Setenv("SB_TEST_STARTS", starts)
	t.Setenv("SB_TEST_HELD", held)
	t.Setenv("SB_TEST_UP", up)
	startedPIDs := func() []int {
		data, _ := os.ReadFile(starts)
		var pids []int
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	t.Cleanup(func() {
		for _, pid := range startedPIDs() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	var dials atomic.Int64
	dial := func() (net.Conn, error) {
		dials.Add(1)
		if _, err := os.Stat(up); err != nil {
			return nil, errors.New("no socket")
		}
		c, s := net.Pipe()
		s.Close()
		return c, nil
	}
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := Ensure(paths, dial)
		done <- result{c, err}
	}()

	// Another pool takes the instance lock as the first one starts; the
	// first exits for it.
	waitUntil(t, "the first start", func() bool { return len(startedPIDs()) == 1 })
	lock, err := flock.Wait(paths.LockFile(), time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(held, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	first := startedPIDs()[0]
	waitUntil(t, "the first pool to exit and be reaped", func() bool { return syscall.Kill(first, 0) != nil })
	mark := dials.Load()
	waitUntil(t, "the client to go on dialling", func() bool { return dials.Load() >= mark+3 })
	// The other pool stops, leaving no pool behind.
	freed := time.Now()
	lock.Unlock()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Ensure: %v", r.err)
		}
		r.c.Close()
		t.Logf("served %s after the lock was freed", time.Since(freed).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("the client did not start a pool within 5 s of the lock being freed")
	}
	if n := len(startedPIDs()); n != 2 {
		t.Fatalf("%d pools started, want 2", n)
	}
}

// waitUntil polls cond until it holds, for at most 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
}
