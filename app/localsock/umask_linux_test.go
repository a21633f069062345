package localsock

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// umaskNow reads this process's umask without changing it (Linux 4.7+
// shows it in /proc/self/status); -1 where it cannot.
func umaskNow() int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Umask:")); ok {
			m, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 8, 32)
			if err != nil {
				return -1
			}
			return int(m)
		}
	}
	return -1
}

// TestListenLeavesTheUmaskAlone: Listen never changes the process's umask,
// which every thread shares: a child forked meanwhile (npm, started for a
// server as the pool begins to listen) would run with it. On the first
// edition Listen set it to 0177 around the bind, and npm processes started
// then made their cache directory 0600 and broke for that user. The socket
// is 0600 all the same, even with a permissive umask, and nothing else is
// left in its directory.
func TestListenLeavesTheUmaskAlone(t *testing.T) {
	old := syscall.Umask(0o002) // the test's own, restored at its end
	t.Cleanup(func() { syscall.Umask(old) })
	switch got := umaskNow(); got {
	case -1:
		t.Skip("this system does not show the umask in /proc/self/status")
	case 0o002:
	default:
		t.Fatalf("umask %#o, want 0002", got)
	}
	dir, err := os.MkdirTemp("", "ls")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "pool.sock")

	var stop atomic.Bool
	var seen sync.Map // umask values seen while Listen ran
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			seen.Store(umaskNow(), true)
		}
	})
	for i := range 300 {
		ln, err := Listen(path)
		if err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("Listen %d: %v", i, err)
		}
		if i == 0 {
			if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 || st.Mode().Type() != os.ModeSocket {
				t.Errorf("socket mode %v, %v; want a 0600 socket", st.Mode(), err)
			}
		}
		ln.Close()
	}
	stop.Store(true)
	wg.Wait()
	seen.Range(func(k, _ any) bool {
		if k.(int) != 0o002 && k.(int) != -1 {
			t.Errorf("the process's umask was %#o while Listen ran", k)
		}
		return true
	})
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("left in the socket directory: %s", e.Name())
	}
}
