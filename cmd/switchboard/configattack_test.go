package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// config.json replaced by a symlink to /dev/zero, then by a FIFO: the
// running pool keeps its last good config and serves, status says what
// is wrong, and SIGTERM still stops it within 5 s. On the first edition
// /dev/zero took the pool past 8.9 GB, and a FIFO blocked hot reload and
// shutdown forever.
func TestHostileConfigFiles(t *testing.T) {
	in := serve(t, fakeConfig(t))
	cfg := filepath.Join(in.home, "config.json")
	s := in.connect(t, "fake")
	s.initialize("c")
	for i, replace := range []func() error{
		func() error { os.Remove(cfg); return os.Symlink("/dev/zero", cfg) },
		func() error { os.Remove(cfg); return syscall.Mkfifo(cfg, 0o600) },
	} {
		if err := replace(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the config error in status", func() bool {
			st := in.status()
			return st.ConfigError != nil && strings.Contains(*st.ConfigError, "not a regular file")
		})
		id := []string{"1", "2"}[i]
		s.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`)
		if got := toolText(s.recvID(id)); got != "still here" {
			t.Fatalf("after replacing the config (%d): %q", i, got)
		}
	}
	// The client leaves first: handed its session back, it would start a
	// pool of its own, which would outlive the test.
	s.close()
	start := time.Now()
	if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-in.done:
		in.done <- err
		if err != nil {
			t.Fatalf("serve exit: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SIGTERM did not stop the pool within 5 s")
	}
	t.Logf("stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}
