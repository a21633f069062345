package app

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/accept"
)

// listenHTTP opens the HTTP front door's listener. It listens on loopback
// only: the pool runs the user's MCP servers with the user's rights, so
// it must not be reachable from the network.
func listenHTTP(addr string) (*frontDoorListener, error) {
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
	return newFrontDoorListener(ln, frontDoorMaxConns, frontDoorFirstHeaders), nil
}

// frontDoorMaxConns bounds the HTTP front door's open connections. Any
// local process can open them, the token is checked only after a
// request's headers, and each holds one of the pool's file descriptors:
// unbounded, a flood of them took every descriptor, and with them the
// stdio sessions, new children and the history. At the bound the front
// door closes the oldest connection that has had no request through the
// gate to take a new one (frontDoorListener); only when every one open
// is a token holder's does a new one wait in the kernel's backlog. The
// load tool's 64 sessions × 8 in flight take about 600. A var for tests.
var frontDoorMaxConns = 1024

// frontDoorFirstHeaders bounds the time from a connection's accept to the
// end of its first request's headers, which a loopback client sends at
// once. Before, a connection that never ended them kept its slot for
// the whole header timeout (frontDoorHeaderTimeout), and any local
// process could keep them all so. A var for tests.
var frontDoorFirstHeaders = 2 * time.Second

// frontDoorHeaderTimeout bounds the headers of a request on a connection
// whose first request's headers were in by frontDoorFirstHeaders: a
// client with the token on a kept-alive connection may be slow now and
// then (a machine under load), and loses nothing by it.
const frontDoorHeaderTimeout = 10 * time.Second

// frontDoorServer is the HTTP front door's server for h, serving ln's
// connections. No ReadTimeout: the pool bounds each request body itself,
// and answers a refusal at once, whatever body comes (pool/httpauth.go).
func frontDoorServer(h http.Handler, ln *frontDoorListener, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: frontDoorHeaderTimeout, IdleTimeout: frontDoorIdleTimeout,
		MaxHeaderBytes: frontDoorMaxHeaderBytes, ConnState: ln.connState, ConnContext: ln.connContext,
		ErrorLog: serverLog(log, "HTTP front door")}
}

// frontDoorListener is the HTTP front door's listener: it keeps at most
// max connections open, and makes room for the clients with the token.
// Any local process may open connections and hold each with headers it
// never ends: with net/http's limit alone (netutil.LimitListener) 1500 of
// them made a client with the token wait 8 to 10 s, 5000 time it out. So
// a connection counts as a stranger's until a request on it passes the
// pool's gate (pool.WithHTTPGatePassed); at max, the oldest stranger's
// connection is closed to take the new one, and only when every one open
// is a token holder's does the new one wait, unaccepted, for one to
// close. A stranger's connection lives briefly anyway: its first headers
// have firstHeaders, and the gate closes it after a refusal or a
// preflight.
type frontDoorListener struct {
	net.Listener
	max          int
	firstHeaders time.Duration

	mu        sync.Mutex
	room      *sync.Cond // signalled when a connection lets its slot go, or the listener closes
	open      int        // connections holding a slot
	strangers list.List  // of *frontConn with no request through the gate yet, oldest first
	closed    bool
}

func newFrontDoorListener(ln net.Listener, maxConns int, firstHeaders time.Duration) *frontDoorListener {
	l := &frontDoorListener{Listener: ln, max: maxConns, firstHeaders: firstHeaders}
	l.room = sync.NewCond(&l.mu)
	return l
}

// frontConn is a connection of the HTTP front door, holding a slot of its
// listener until it closes.
type frontConn struct {
	net.Conn
	l          *frontDoorListener
	headersDue *time.Timer // closes the connection unless its first headers are in before

	// Under l.mu.
	counted  bool          // holds one of l's slots
	stranger *list.Element // in l.strangers until a request passes the gate
}

// Accept waits for room, accepts a connection and counts it, closing the
// oldest stranger's connection when it is the one past max.
func (l *frontDoorListener) Accept() (net.Conn, error) {
	if err := l.waitRoom(); err != nil {
		return nil, err
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err // as it comes: accept.Retrying tells those to wait out
	}
	fc := &frontConn{Conn: c, l: l}
	fc.headersDue = time.AfterFunc(l.firstHeaders, func() { fc.shut() })
	evicted, err := l.count(fc)
	if err != nil {
		fc.Close()
		return nil, err
	}
	if evicted != nil {
		evicted.Close()
	}
	return fc, nil
}

// waitRoom waits until fewer than max connections are open or one of
// them is a stranger's, to be closed for the next.
func (l *frontDoorListener) waitRoom() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.open >= l.max && l.strangers.Len() == 0 && !l.closed {
		l.room.Wait()
	}
	if l.closed {
		return net.ErrClosed
	}
	return nil
}

// count gives fc a slot. Past max it takes the oldest stranger's, whose
// connection it returns for the caller to close; when every slot is a
// token holder's (the last stranger's request passed the gate since
// waitRoom), it waits for one to be let go.
func (l *frontDoorListener) count(fc *frontConn) (evicted *frontConn, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.open >= l.max && l.strangers.Len() == 0 && !l.closed {
		l.room.Wait()
	}
	if l.closed {
		return nil, net.ErrClosed
	}
	if l.open >= l.max {
		evicted = l.strangers.Front().Value.(*frontConn)
		l.releaseLocked(evicted)
	}
	l.open++
	fc.counted = true
	fc.stranger = l.strangers.PushBack(fc)
	return evicted, nil
}

// releaseLocked lets fc's slot go. l.mu is held.
func (l *frontDoorListener) releaseLocked(fc *frontConn) {
	if fc.stranger != nil {
		l.strangers.Remove(fc.stranger)
		fc.stranger = nil
	}
	if fc.counted {
		fc.counted = false
		l.open--
		l.room.Signal()
	}
}

// Close closes the listener and wakes an Accept waiting for room.
func (l *frontDoorListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.room.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// connState is the front door's http.Server.ConnState: a connection's
// first headers are in once it is active.
func (l *frontDoorListener) connState(c net.Conn, st http.ConnState) {
	if fc, ok := c.(*frontConn); ok && st == http.StateActive {
		fc.headersDue.Stop()
	}
}

// connContext is the front door's http.Server.ConnContext: the pool's
// gate tells the connection when a request on it passes.
func (l *frontDoorListener) connContext(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*frontConn); ok {
		return pool.WithHTTPGatePassed(ctx, fc.passedGate)
	}
	return ctx
}

// passedGate makes fc a token holder's connection: it is not closed to
// make room.
func (fc *frontConn) passedGate() {
	fc.l.mu.Lock()
	defer fc.l.mu.Unlock()
	if fc.stranger != nil {
		fc.l.strangers.Remove(fc.stranger)
		fc.stranger = nil
	}
}

// Close closes the connection and lets its slot go; again, it does
// nothing more than the connection's Close does.
func (fc *frontConn) Close() error {
	fc.headersDue.Stop()
	return fc.shut()
}

// shut is Close for fc.headersDue, whose timer it leaves alone.
func (fc *frontConn) shut() error {
	fc.l.mu.Lock()
	fc.l.releaseLocked(fc)
	fc.l.mu.Unlock()
	return fc.Conn.Close()
}

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
