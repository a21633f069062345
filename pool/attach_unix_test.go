//go:build unix

package pool

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// unixPair is a connected pair of Unix stream sockets: the pool's end and
// the client's.
func unixPair(t *testing.T) (pool, client *net.UnixConn) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbhello")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.DialUnix("unix", nil, ln.Addr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	pool, err = ln.AcceptUnix()
	if err != nil {
		client.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close(); client.Close() })
	return pool, client
}

// A connection that sends no hello ends with its deadline's error, or
// with its close. ReadMsgUnix returns n = -1 with its error: on the first
// edition the slice to len+n panicked and took the pool down, every
// session and child with it, for any local process that connected and
// sent nothing for the hello's 10 s.
func TestSilentConnectionsHelloEndsWithoutPanic(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		p, _ := unixPair(t)
		_ = p.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, _, _, err := readHello(p, 4<<10); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("readHello past its deadline: %v, want the deadline's error", err)
		}
	})
	t.Run("part of a hello, then closed", func(t *testing.T) {
		p, c := unixPair(t)
		if _, err := c.Write([]byte(`{"server":`)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, _, _, err := readHello(p, 4<<10)
			done <- err
		}()
		_ = p.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if err := <-done; err == nil {
			t.Fatal("readHello of a part of a hello: no error")
		}
	})
}
