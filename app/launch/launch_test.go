//go:build unix

package launch

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/app/home"
)

// TestAwaitRunning: a client waits for the pool whose PID the instance
// lock names while that process lives (it is starting, or upgrading in
// place), and not at all when the lock names none, or a process that is
// gone.
func TestAwaitRunning(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		pid       string // written into the lock file; "" writes none
		answersAt int    // the dial that succeeds; 0: none does
		want      bool
		minDials  int
	}{
		{"a live pool answers on the third dial", strconv.Itoa(os.Getppid()), 3, true, 3},
		{"a live pool that never answers is given up", strconv.Itoa(os.Getppid()), 0, false, 2},
		{"no lock file", "", 1, false, 0},
		{"the lock names a process that is gone", strconv.Itoa(gone.Process.Pid), 1, false, 0},
		{"the lock names this process", strconv.Itoa(os.Getpid()), 1, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths := home.Paths{Run: t.TempDir()}
			if tc.pid != "" {
				if err := os.WriteFile(paths.LockFile(), []byte(tc.pid+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
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
