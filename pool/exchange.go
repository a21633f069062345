package pool

import (
	"errors"
	"fmt"
	"sync"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// An exchange is one client request whose answer goes straight to the
// caller that waits for it, an HTTP POST, instead of through its
// session's output. The request's record carries it (pending.x, and a
// listen's listener.to) from the moment the pool reads the request, so
// whoever has the answer (the child's reader, a timeout, the session
// itself for what it answers locally) hands it to that caller from what
// the pool already knows: nothing is parsed again to find who asked,
// and the one hand-off left is the one net/http needs, to the goroutine
// that owns the response.
//
// On a legacy HTTP session an exchange's key is the request's id bytes,
// as a stdio session's requests are keyed (a client's
// notifications/cancelled names it). A server's stateless HTTP session
// carries every 2026-07-28 request POSTed to that server, from any
// client: their ids collide, so each exchange has a key of its own, and
// the _meta its request carried (client capabilities and client info)
// is the exchange's, deciding for that request only.
type exchange struct {
	key       string // the request's key among its session's requests in flight and listens
	stream    bool   // the caller takes messages related to the request (progress, a listen's stream) on its response
	stateless bool   // a 2026-07-28 request on a stateless session: caps and client are its own
	caps      clientCaps
	client    Implementation
	gate      *grant // a 2026-07-28 HTTP request's: the token it carried, whose rotation ends its call held for a retry (mrtr.go)

	answered chan response // cap 1: the answer (a request has one), or none (line nil): the client cancelled it
	related  *relatedQueue // stream only: what comes before the answer

	// budget is what the responses of the exchange's session hold
	// together (a legacy HTTP session's POSTs), or nil: each response is
	// bounded on its own. With one, the answer is counted in it as it is
	// handed over, under mu, until the response ends (settle).
	budget *heldBudget
	mu     sync.Mutex
	ended  bool // the response ended: nothing more is counted
}

// response is an exchange's answer, with its JSON-RPC error code (0 for a
// result): HTTP statuses follow from it without reading the line again.
// A nil line is no answer: the request ended by its client's cancel.
type response struct {
	line    []byte
	code    int
	counted bool // line is counted in the exchange's budget: the caller gives it back once written
	over    bool // the answer would have passed the budget: it was dropped, and the response ends
}

// held is the bytes of a that count in its exchange's budget.
func (a response) held() int {
	if a.counted {
		return len(a.line)
	}
	return 0
}

// relatedQueue is what relates to an exchange's request, waiting for its
// caller to write it, as a stdio session's output queue waits for its
// client: its sender (a child's reader) never blocks, and a caller that
// falls behind loses nothing but is let go. Past the bound
// (Options.MaxMessageBytes waiting: the largest message the pool passes;
// one message always fits) the queue is cut off: what waits is dropped,
// nothing more is queued, and the caller ends the response
// (httpFront.await), as a stdio client that stops reading is evicted.
// So is one whose message would take its session's responses together
// past their budget (heldBudget).
type relatedQueue struct {
	wake   chan struct{} // cap 1: something was queued, or the queue was cut off
	bound  int           // bytes
	budget *heldBudget   // the exchange's, or nil

	mu     sync.Mutex
	queued [][]byte
	size   int   // bytes queued, counted in budget
	cut    error // why the queue was cut off (the response ends), or nil
}

// heldBudget bounds what the responses of one legacy HTTP session hold
// together for a client that does not read them: each response is
// bounded on its own (relatedQueue), but a client may open many and read
// none. A message of the session's responses (an answer, or a message
// related to one) counts from when it is handed over until its response
// has written it, or has ended; one that would take the total past
// bound is not taken, and its response ends with over, as one past its
// own bound ends. One message always fits while nothing is counted, as
// a stream's queue always takes one.
type heldBudget struct {
	bound int
	over  error // why a response is ended past bound

	mu   sync.Mutex
	size int
}

// sessionHeldBound is the heldBudget bound of a session whose messages
// are at most maxMessage bytes: twice that, as Options.MaxSessionBytes
// bounds its requests in flight, so that a largest answer fits beside
// the backlog of another response.
func sessionHeldBound(maxMessage int) int { return 2 * maxMessage }

func newHeldBudget(bound int) *heldBudget {
	return &heldBudget{bound: bound, over: fmt.Errorf("%w: this session's responses hold more than %d bytes its client has not read", errSlowHTTPClient, bound)}
}

// admit counts n bytes more, and reports whether they fit (nil b: no
// budget, everything fits).
func (b *heldBudget) admit(n int) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.size > 0 && b.size+n > b.bound {
		return false
	}
	b.size += n
	return true
}

// release gives back n bytes admitted, written or let go.
func (b *heldBudget) release(n int) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.size -= n
	b.mu.Unlock()
}

// held is the bytes counted now.
func (b *heldBudget) held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size
}

// newExchange is an exchange for request key; budget, when not nil, is
// what its session's responses hold together.
func newExchange(key string, stream bool, o *Options, budget *heldBudget) *exchange {
	x := &exchange{key: key, stream: stream, answered: make(chan response, 1), budget: budget}
	if stream {
		x.related = &relatedQueue{wake: make(chan struct{}, 1), bound: o.MaxMessageBytes, budget: budget}
	}
	return x
}

// newStatelessExchange is an exchange for a 2026-07-28 request whose
// params carry _meta, m (validated by the front door): its key is unique,
// and its capabilities and client are what its _meta says.
func newStatelessExchange(key string, stream bool, o *Options, m []byte) *exchange {
	x := newExchange(key, stream, o, nil) // its session is every client's: one client's backlog must not end another's
	x.stateless = true
	if sp := jsonrpc.Member(m, metaClientCapabilities); sp.Present() {
		x.caps = clientCapsOf(sp.Of(m))
	}
	if sp := jsonrpc.Member(m, metaClientInfo); sp.Present() {
		info := sp.Of(m)
		x.client.Name, _ = jsonrpc.String(info, jsonrpc.Member(info, "name"))
		x.client.Version, _ = jsonrpc.String(info, jsonrpc.Member(info, "version"))
	}
	return x
}

// gateOf is what x's request was let in with by the HTTP front door's
// gate; nil for none (stdio, a legacy session's request).
func gateOf(x *exchange) *grant {
	if x == nil {
		return nil
	}
	return x.gate
}

// respond hands the caller the answer. It never blocks; a second answer
// (there is none) would be dropped. With a budget, the answer counts in
// it until written; one past it is dropped, and the caller told.
func (x *exchange) respond(line []byte, code int) {
	a := response{line: line, code: code}
	if x.budget == nil || line == nil {
		x.send(a)
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock() // held over the send: settle finds the answer counted, or none
	switch {
	case x.ended:
	case x.budget.admit(len(line)):
		a.counted = true
	default:
		a = response{over: true}
	}
	if !x.send(a) {
		x.budget.release(a.held())
	}
}

// send offers a to the caller without blocking, and reports whether it
// took it.
func (x *exchange) send(a response) bool {
	select {
	case x.answered <- a:
		return true
	default:
		return false
	}
}

// settle is called once x's response ended: what it had counted in the
// budget and not written (its queue, an answer it did not take) is
// given back, and nothing is counted after.
func (x *exchange) settle() {
	if x.budget == nil {
		return
	}
	x.mu.Lock()
	x.ended = true
	select {
	case a := <-x.answered:
		x.budget.release(a.held())
	default:
	}
	x.mu.Unlock()
	if q := x.related; q != nil {
		q.mu.Lock()
		q.budget.release(q.size)
		q.queued, q.size = nil, 0
		if q.cut == nil {
			q.cut = errResponseEnded
		}
		q.mu.Unlock()
	}
}

// errResponseEnded cuts off the queue of a response that ended: nothing
// more is queued for it.
var errResponseEnded = errors.New("the response ended")

// unanswered tells the caller that the request ended without an answer
// (its client cancelled it): its response ends now, rather than wait for
// an answer that never comes.
func (x *exchange) unanswered() { x.respond(nil, 0) }

// relate queues a message about the request for the caller, without
// blocking. Only a stream exchange takes them.
func (x *exchange) relate(line []byte) {
	q := x.related
	q.mu.Lock()
	switch {
	case q.cut != nil:
	case len(q.queued) > 0 && q.size+len(line) > q.bound:
		q.cutLocked(errSlowHTTPClient) // the caller has fallen behind: it is let go
	case !q.budget.admit(len(line)):
		q.cutLocked(q.budget.over) // its session's responses hold too much: this one is let go
	default:
		q.queued = append(q.queued, line)
		q.size += len(line)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// cutLocked drops what is queued and queues nothing more: the response
// ends, for why.
func (q *relatedQueue) cutLocked(why error) {
	q.budget.release(q.size)
	q.queued, q.size, q.cut = nil, 0, why
}

// take is everything queued, in order, for one write, and its bytes,
// still counted in the budget: the caller gives them back once written.
// cut, when not nil, is why the caller's response ends: it fell past
// the bound, or its session's responses past their budget.
func (q *relatedQueue) take() (lines [][]byte, size int, cut error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	lines, size, q.queued, q.size = q.queued, q.size, nil, 0
	return lines, size, q.cut
}

// keyOf is a request's key among its session's requests in flight: its
// exchange's, else its id bytes.
func keyOf(id []byte, x *exchange) string {
	if x != nil {
		return x.key
	}
	return string(id)
}

// respond gives the client the answer to one of its requests: to the
// exchange that carried it, else on the session's output. code is the
// answer's JSON-RPC error code, 0 for a result.
func (s *session) respond(x *exchange, line []byte, code int) {
	if x != nil {
		x.respond(line, code)
		return
	}
	s.deliverOwing(line, 0)
}

// relate gives the client a message about one of its requests (its
// progress, its listen's acknowledgement and changes), a notification of
// method: on the exchange's response when its caller takes them there,
// else on the session's output.
func (s *session) relate(x *exchange, line []byte, method string) {
	if x != nil && x.stream {
		x.relate(line)
		return
	}
	s.deliver(line, notice(method))
}

// replyTo answers request id, carried by x, with result.
func (s *session) replyTo(x *exchange, id, result []byte) {
	s.respond(x, jsonrpc.AppendResponse(nil, id, result), 0)
}

// replyErrorTo answers request id, carried by x, with err.
func (s *session) replyErrorTo(x *exchange, id []byte, err error) {
	if errors.Is(err, errGivenBack) {
		return // the request goes back to the shim unanswered: the next pool answers it (handback.go)
	}
	e := asRPCError(err, s.srv.name)
	s.respond(x, jsonrpc.AppendErrorResponse(nil, id, e), e.Code)
}

// handshaken is the backend a request of the session goes to, with its
// child's handshake once there is one (the first child may still be
// starting: the request waits in flight on it as w), or the error to
// answer.
func (s *session) handshaken(w *handshakeWait) (*backend, *handshake, error) {
	b, err := s.backend(w.x)
	if err != nil {
		return nil, nil, err
	}
	hs, err := s.awaitHandshakeFor(b, w)
	if err != nil {
		return nil, nil, err
	}
	return b, hs, nil
}

// backend is the backend a request of the session, carried by x, goes
// to. A child a stateless exchange starts is told the capabilities that
// exchange declared (the stateless session's own declare nothing).
func (s *session) backend(x *exchange) (*backend, error) {
	if x != nil && x.stateless {
		return s.srv.backendAs(s, &x.caps)
	}
	return s.srv.backendFor(s)
}

// endExchange ends what a request left behind when the caller of its
// exchange went away: its listen (the response was its stream), and when
// cancel is set (a 2026-07-28 response closed early is the request's
// cancellation) the request itself, cancelled at the child as a client's
// notifications/cancelled would. It touches nothing of another exchange:
// on the stateless session every exchange has a key of its own, and a
// listen is ended only by the exchange that opened it.
func (s *session) endExchange(x *exchange, cancel bool, reason string) {
	var p *pending
	s.mu.Lock()
	if cancel {
		if p = s.inflight[x.key]; p != nil {
			s.untrackLocked(x.key, p)
		}
	}
	l := s.listens[x.key]
	if l != nil && l.to == x {
		delete(s.listens, x.key)
	} else {
		l = nil
	}
	s.mu.Unlock()
	if p != nil {
		p.b.cancel(p, reason)
	}
	if l != nil {
		l.release()
	}
}
