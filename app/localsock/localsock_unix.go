//go:build !windows

package localsock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// Listen listens on a Unix socket of mode 0600 at path. A socket file
// already there is replaced: the caller holds the instance lock, so it is
// a stale one of a killed instance, never waited on.
//
// The socket is bound in a new directory of mode 0700 beside path, where
// no one else can reach it whatever mode the umask gives it, made 0600
// (what connect checks) and then renamed into place: at no moment is it
// at path with a wider mode. The process's umask is not touched: it is
// shared by every thread, and a child forked meanwhile (npm, started
// for a server as the pool begins to listen) would inherit a changed one.
func Listen(path string) (net.Listener, error) {
	dir, err := privateDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	defer os.Remove(dir)
	tmp := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // it will not be at tmp; Close removes path
	if err := os.Chmod(tmp, 0o600); err != nil {
		ul.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ul.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return &listener{UnixListener: ul, path: path}, nil
}

// privateDir makes a new directory of mode 0700 in parent, with a short
// name: a socket's whole path must fit in a sockaddr_un (the one bound
// here is no longer than "control.sock" beside it).
func privateDir(parent string) (string, error) {
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		dir := filepath.Join(parent, ".s"+hex.EncodeToString(b[:]))
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
}

// listener is a Unix listener bound elsewhere and renamed to path: it
// names path as its address, and Close removes the socket file there.
type listener struct {
	*net.UnixListener
	path   string
	remove sync.Once
}

func (l *listener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *listener) Close() error {
	err := l.UnixListener.Close()
	l.remove.Do(func() { _ = os.Remove(l.path) })
	return err
}

// Dial connects to the Unix socket at path.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

// Remove removes the socket file a Listen left (a listener's Close already
// does).
func Remove(path string) { _ = os.Remove(path) }
