package app

import (
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// The control API's socket is private to the user (0600), but every
// process of the user may connect to it, a backend included, and a
// keep-alive connection left open held a goroutine and a descriptor of
// the pool for ever: a thousand of them took the descriptors the pool
// socket needs, and new sessions, the CLI and new children failed with
// "too many open files". The bounds below keep the control API's share.

// controlIdleTimeout closes a control connection that has sent no request
// for this long. The CLI and the dashboard's actions send one request per
// connection. A var for tests.
var controlIdleTimeout = 30 * time.Second

// controlMaxConns bounds the control API's open connections. Past it a
// new connection waits in the kernel's backlog until one closes (at the
// latest controlIdleTimeout later). Only the user's processes reach the
// socket; the HTTP front door, which any local process reaches, makes
// room for the clients with the token instead (frontDoorListener). A var
// for tests.
var controlMaxConns = 64

// controlReadTimeout bounds reading one request, headers and body (at
// most 64 KiB), and controlWriteTimeout writing its answer: the longest
// action, a kill of every leak, waits a few seconds per leak at most,
// and a client that stops reading its answer is let go.
const (
	controlReadTimeout  = 30 * time.Second
	controlWriteTimeout = 5 * time.Minute
)

// controlServer is the control API's server for h.
func controlServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: controlReadTimeout,
		WriteTimeout: controlWriteTimeout, IdleTimeout: controlIdleTimeout, MaxHeaderBytes: 64 << 10,
		ErrorLog: serverLog(log, "control API")}
}

// limitControl bounds ln to controlMaxConns connections open at once.
func limitControl(ln net.Listener) net.Listener { return netutil.LimitListener(ln, controlMaxConns) }
