package control

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"syscall"
	"testing"
)

// Only a missing socket, or one nobody listens on, means no pool: a pool
// that is there but cannot take the connection now (its backlog full
// while it is busy, stopping or upgrading) is an error, so that the CLI
// does not go on as if no pool ran (it would list and kill leaks without
// the pool's own children). On the first edition every dial error was
// ErrNoPool.
func TestOnlyAnAbsentPoolIsNoPool(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	if _, err := NewClient(filepath.Join(dir, "none.sock")).Status(ctx); !errors.Is(err, ErrNoPool) {
		t.Errorf("Status with no socket = %v, want ErrNoPool", err)
	}

	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := NewClient(stale).Status(ctx); !errors.Is(err, ErrNoPool) {
		t.Errorf("Status with nobody listening = %v, want ErrNoPool", err)
	}

	busy := filepath.Join(dir, "busy.sock")
	fd := listenNoBacklog(t, busy)
	defer syscall.Close(fd)
	fillBacklog(t, busy)
	_, err = NewClient(busy).Status(ctx)
	if err == nil || errors.Is(err, ErrNoPool) {
		t.Errorf("Status with the pool's backlog full = %v, want an error that is not ErrNoPool", err)
	}
	t.Logf("backlog full: %v", err)
}

// listenNoBacklog listens on a Unix socket at path with a backlog of 0
// and never accepts.
func listenNoBacklog(t *testing.T, path string) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	return fd
}

// fillBacklog connects to path, without blocking, until the listener's
// queue is full (EAGAIN); the connections are closed when the test ends.
func fillBacklog(t *testing.T, path string) {
	t.Helper()
	for range 64 {
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
		if errors.Is(err, syscall.EAGAIN) {
			syscall.Close(fd)
			return
		}
		if err != nil {
			syscall.Close(fd)
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { syscall.Close(fd) })
	}
	t.Fatal("the listener's queue never filled")
}
