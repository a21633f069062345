// Package localsock is the transport of the pool's two local endpoints,
// the front door that `switchboard connect` reaches and the control API
// the CLI talks to: a Unix socket of mode 0600 where the system has them,
// and on Windows a named pipe that only the current user may open.
//
// Windows has AF_UNIX too (since Windows 10 1803), but a named pipe carries
// an access list of its own, needs no file in the home directory, and is
// what runs under Wine, where the Windows build is tested (Wine 8 refuses
// AF_UNIX with WSAEAFNOSUPPORT).
package localsock

import (
	"context"
	"net"
	"time"
)

// DialTimeout connects to the endpoint at path (a socket file's path; on
// Windows the pipe named after it).
func DialTimeout(path string, d time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return Dial(ctx, path)
}
