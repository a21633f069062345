package pool

import (
	"errors"
	"math"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// handshakeWait is a client's initialize, which the pool answers from
// its child's handshake. While the child has not finished the handshake
// (it starts, an npx server installs itself), the initialize is in flight
// on it like any request (p): the snapshot lists it, not written (status,
// hangs, the dashboard), history records it, and finish ends it, once,
// whoever ends it (its answer, the wait's timeout, the session's end, a
// hand-back, a stop, a crash loop, a user's cancel). It is never written
// to the child, and has no deadline in the request table: the wait
// times itself (backend.handshakeResult).
type handshakeWait struct {
	raw, id []byte    // the client's message, and its id
	x       *exchange // the HTTP POST that carried it, if any
	p       *pending  // set once it waits: in flight on the backend
}

// awaitHandshakeFor is awaitHandshake for a client's initialize (w; nil
// for a resumed session's, which its shim answered long ago): while the
// child has not finished its handshake, w waits in flight on b.
func (s *session) awaitHandshakeFor(b *backend, w *handshakeWait) (*handshake, error) {
	if w != nil && w.p == nil && !isClosed(b.hsDone) {
		w.p = b.registerWait(s, w)
	}
	return s.awaitHandshake(b)
}

// registerWait enters w in b's request table, as a request of session s
// that no child is sent. Like the pool's other answers of its own (ping,
// a cached initialize), it does not count in Counters.Requests, the
// requests forwarded to children.
func (b *backend) registerWait(s *session, w *handshakeWait) *pending {
	p := &pending{id: b.p.nextID.Add(1), b: b, sess: s, origID: w.id, x: w.x, method: "initialize", received: time.Now()}
	// Received first, as every request's: a snapshot that lists it
	// follows the event that says it came.
	b.p.emit(&Event{Kind: EventRequestReceived, Time: p.received, Server: b.srv.name, Session: s.id, PoolID: p.id,
		Method: p.method, OriginalID: string(w.id), Size: len(w.raw), Payload: b.capture(w.raw)})
	b.reqs.register(p, math.MaxInt, 0) // never refused; no deadline: its wait has its own
	return p
}

// endWait ends a client's initialize that waited for its child's
// handshake: answered with result, or as err, how the wait ended, says.
// It reports false when another ending came first (a stop, a crash loop,
// a user's cancel): that one answered the client.
func (b *backend) endWait(p *pending, result []byte, err error) bool {
	var o outcome
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
		o = outcome{kind: endInitialized, result: result}
	case errors.Is(err, errGivenBack):
		o = outcome{kind: endGivenBack, reason: "handed back to its shim unanswered, for the next Switchboard to answer"}
	case errors.Is(err, errSessionEnded):
		o = outcome{kind: endByClient, reason: "the session ended"}
	case errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeRequestTimeout:
		o = outcome{kind: endTimedOut, rpcErr: rpcErr} // did not finish starting within the request timeout
	default:
		o = outcome{kind: endRefused, rpcErr: asRPCError(err, b.srv.name)}
	}
	return b.finish(p, o)
}
