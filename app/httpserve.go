package app

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"

	"golang.org/x/net/netutil"

	"github.com/switchboard-mcp/switchboard/pool/accept"
)

// listenHTTP opens the HTTP front door's listener. It listens on loopback
// only: the pool runs the user's MCP servers with the user's rights, so
// it must not be reachable from the network.
func listenHTTP(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("http.listen %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("http.listen %q: the HTTP front door listens on loopback only (127.0.0.1, [::1] or localhost)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("HTTP front door: %w", err)
	}
	return netutil.LimitListener(ln, frontDoorMaxConns), nil
}

// frontDoorMaxConns bounds the HTTP front door's open connections. Any
// local process can open them, the token is checked only after a
// request's headers, and each holds one of the pool's file descriptors:
// unbounded, a flood of them took every descriptor, and with them the
// stdio sessions, new children and the history. Past the bound a new
// connection waits in the kernel's backlog until one closes. The load
// tool's 64 sessions × 8 in flight take about 600. A var for tests.
var frontDoorMaxConns = 1024

// serveHTTP serves srv (the HTTP front door, the control API) on ln until
// srv is shut down. An accept error the listener recovers from (out of
// descriptors, buffers or memory) is waited out: an error returned here
// ends Run, and the pool with it.
func serveHTTP(srv *http.Server, ln net.Listener, what string) error {
	if err := srv.Serve(accept.Retrying(ln)); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// serverLog is the error log of a net/http server of the app (what it
// says when an accept fails and it retries, or a connection's handler
// panics): the app's log at Warn, naming the server, rather than the
// standard logger's stderr.
func serverLog(l *slog.Logger, what string) *log.Logger {
	return slog.NewLogLogger(l.With("server", what).Handler(), slog.LevelWarn)
}
