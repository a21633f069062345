package pool

import (
	"errors"
	"math"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// handshakeWait is a client's request that the pool answers, or decides
// on, from its child's handshake: initialize and server/discover
// (answered from it), logging/setLevel (answered by the pool, or sent on
// to the child, as the child's era and capabilities say) and
// subscriptions/listen (opened by the pool). While the child has not
// finished the handshake (it starts, an npx server installs itself),
// the request is in flight on it like any request (p): the snapshot
// lists it, not written (status, hangs, the dashboard), history records
// it, and finish ends its wait, once, whoever ends it (its answer, the
// wait's timeout, the session's end, a hand-back, a stop, a crash loop,
// a user's cancel). It is owed in its shim's ledger meanwhile, as a
// request in flight is, so that a pool killed during the wait leaves it
// for the next pool to answer: its slot is released once its answer is
// written, at once when it goes back to the shim unanswered, and goes on
// with a request that goes on (goOn). It is never written to the child,
// and has no deadline in the request table: the wait times itself
// (backend.handshakeResult).
type handshakeWait struct {
	method  string    // the request's, as the snapshot and history name it
	raw, id []byte    // the client's message, and its id
	x       *exchange // the HTTP POST that carried it, if any
	at      *arrival  // its arrival, when it was held for its session's roots (roots.go); its ledger slot once it went on (goOn)
	p       *pending  // set once it waits: in flight on the backend
}

// waitOf is the wait of msg, a client's request with id, carried by x,
// that arrived as a says (nil: now).
func waitOf(msg *jsonrpc.Message, id []byte, x *exchange, a *arrival) *handshakeWait {
	return &handshakeWait{method: msg.Method, raw: msg.Raw, id: id, x: x, at: a}
}

// awaitHandshakeFor is awaitHandshake for a client's request (w; nil
// for a resumed session's initialize, which its shim answered long ago):
// while the child has not finished its handshake, w waits in flight on b.
func (s *session) awaitHandshakeFor(b *backend, w *handshakeWait) (*handshake, error) {
	if w != nil && w.p == nil && !isClosed(b.hsDone) {
		w.p = b.registerWait(s, w)
	}
	return s.awaitHandshake(b)
}

// registerWait enters w in b's request table, as a request of session s
// that no child is sent, owed in the session's ledger (the slot it held
// since it was read, if it was held for the session's roots). It is not
// in the session's table of requests in flight: answered, it releases
// its slot as it ends (session.ending, session.forget). Like the pool's
// other answers of its own (ping, a cached initialize), it does not
// count in Counters.Requests, the requests forwarded to children.
func (b *backend) registerWait(s *session, w *handshakeWait) *pending {
	id, received := w.at.take(b.p)
	p := &pending{id: id, b: b, sess: s, origID: w.id, x: w.x, method: w.method, received: received, wait: true}
	slot := w.at.takeSlot()
	if slot == 0 {
		slot = s.ledger.take(w.id)
	}
	p.slot.Store(slot)
	// Received first, as every request's: a snapshot that lists it
	// follows the event that says it came.
	ev := Event{Kind: EventRequestReceived, Time: p.received, Server: b.srv.name, Session: s.id, PoolID: p.id,
		Method: p.method, OriginalID: string(w.id), Size: len(w.raw), Payload: b.capture(w.raw)}
	if w.x != nil && w.x.stateless {
		ev.ClientName, ev.ClientVersion = w.x.client.Name, w.x.client.Version
	}
	b.p.emit(&ev)
	// Refused only for a cancel that came as its session handed it on
	// from its held messages (session.handedOn): ended so now. No
	// deadline: its wait has its own.
	if r, _, _ := b.reqs.register(p, math.MaxInt, 0); r == cancelledByUser || r == cancelledByClient {
		b.finish(p, handOnCancel(r, b.srv.name, p.method))
	}
	return p
}

// retire ends the waits for the child's handshake on a backend drained
// because its server was removed or disabled (reason): such a server
// takes no more requests, so its child's handshake answers none, and no
// wait reached the child. Each is answered now that the server stopped,
// and why, before the caller goes on: a removed server's sessions end
// once idle (server.remove), after these answers. A wait that comes
// later ends at once (handshakeResult).
func (b *backend) retire(reason error) {
	b.mu.Lock()
	if b.retiredBy != nil {
		b.mu.Unlock()
		return
	}
	b.retiredBy = reason
	close(b.retired)
	b.mu.Unlock()
	if testHookRetired != nil {
		testHookRetired(b)
	}
	for _, p := range b.reqs.all() {
		if p.line == nil && p.reply == nil { // a wait: nothing to write (registerWait)
			b.finish(p, failure(endChildGone, errServerStopped, b.srv.name, reason, p.method))
		}
	}
}

// testHookRetired, when set, runs once retire has said the backend is
// retired, before it ends the waits left.
var testHookRetired func(*backend)

// endWait ends a client's request that waited for its child's
// handshake: answered with result, or as err, how the wait ended, says.
// It reports false when another ending came first (a stop, a crash loop,
// a user's cancel): that one answered the client.
func (b *backend) endWait(p *pending, result []byte, err error) bool {
	var o outcome
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
		o = outcome{kind: endWaitAnswered, result: result}
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

// answer answers the request with result: by its wait's end if it
// waited in flight, else at once.
func (w *handshakeWait) answer(s *session, result []byte) {
	if w.p != nil {
		w.p.b.endWait(w.p, result, nil)
		return
	}
	s.replyTo(w.x, w.id, result)
}

// refuse answers the request with err (nothing for errGivenBack, nor,
// after a wait, for errSessionEnded): by its wait's end if it waited in
// flight, else at once.
func (w *handshakeWait) refuse(s *session, err error) {
	if w.p != nil {
		w.p.b.endWait(w.p, nil, err)
		return
	}
	s.replyErrorTo(w.x, w.id, err)
}

// ended reports whether another ending (a stop, a user's cancel) ended
// the request's wait, and answered it: the request must not act.
func (w *handshakeWait) ended() bool {
	return w.p != nil && w.p.b.reqs.lookup(w.p.id) != w.p
}

// goOn ends the wait of a request that goes on past it, once the
// handshake came: a logging/setLevel the child answers (its forward is
// in flight, and in history, as a request of its own), a
// subscriptions/listen the pool opened (answered when it ends). It
// reports false when another ending came first (a stop, a user's
// cancel): that one answered the client, and the request goes no
// further. The wait's ledger slot goes on in w.at, for the caller: a
// forward takes it over, so the request stays owed without a gap.
func (w *handshakeWait) goOn() bool {
	if w.p == nil {
		return true
	}
	if !w.p.b.finish(w.p, outcome{kind: endWentOn}) {
		return false
	}
	if slot := w.p.slot.Swap(0); slot != 0 { // nobody else ends p now
		if w.at == nil {
			w.at = &arrival{}
		}
		w.at.slot = slot
	}
	return true
}
