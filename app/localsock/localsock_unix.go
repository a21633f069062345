//go:build !windows

package localsock

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
)

// Listen listens on a Unix socket of mode 0600 at path. A socket file
// already there is replaced: the caller holds the instance lock, so it is
// a stale one of a killed instance, never waited on.
func Listen(path string) (net.Listener, error) {
	_ = os.Remove(path)
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return ln, nil
}

// Dial connects to the Unix socket at path.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

// Remove removes the socket file a Listen left (a listener's Close already
// does, for a socket it created).
func Remove(path string) { _ = os.Remove(path) }
