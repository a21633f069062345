//go:build !windows

package localsock

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The socket is the current user's alone (0600), a stale socket file of a
// killed instance is replaced, and a client reaches the listener.
func TestListenReplacesStaleAndIsPrivate(t *testing.T) {
	dir, err := os.MkdirTemp("", "ls") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "pool.sock")
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // the file stays, as after a SIGKILL

	ln, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer ln.Close()
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v; want 0600", st.Mode().Perm(), err)
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Write([]byte("echo " + line))
	}()
	c, err := DialTimeout(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hello\n"))
	if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "echo hello\n" {
		t.Fatalf("got %q, %v", got, err)
	}
}
