package pool

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// HTTPSessionIdle is how long a legacy HTTP session may go without a
// request and without an open GET stream before the pool ends it: HTTP
// clients often vanish without a DELETE.
const HTTPSessionIdle = 30 * time.Minute

// streamWriteTimeout is how long an HTTP client has to take one write of
// its GET stream, or of a POST's response (its answer, or a batch of its
// events), before that response is ended.
var streamWriteTimeout = 30 * time.Second

// streamKeepAlive is how long an event stream (a GET stream, a POST's
// once it is one) goes without a write before it is sent a comment, so
// that a client that ends a body silent for minutes (Node's fetch: 300 s)
// does not, nor anything between; and how long a POST's answer may take
// before its response turns into an event stream, kept alive until the
// answer, when its client accepts one (Node's fetch waits 300 s for
// headers, too).
const streamKeepAlive = 30 * time.Second

// keepAliveComment is the keep-alive: an SSE comment, which clients skip.
const keepAliveComment = ": keep-alive\n\n"

// minStatelessLinger is the least a server's stateless HTTP session
// stays after its last exchange ended (server.statelessLinger): a
// client's requests a few seconds apart find it still open under the
// shortest idleTimeout.
const minStatelessLinger = time.Minute

// expireEvery is how often the HTTP sessions are looked at (expire).
const expireEvery = 30 * time.Second

// HTTPHandler is the HTTP front door: POST /mcp/NAME (Streamable HTTP)
// for server NAME, both eras. A legacy client's initialize opens a pool
// session named by the Mcp-Session-Id header of the answer; a modern
// (2026-07-28) request, which carries its protocol version in _meta and
// no session id, is an exchange on the server's one stateless session,
// and closing its response ends (cancels) it. Each request's answer, and
// what relates to it, reaches the POST that carried it from the
// request's own record (exchange.go). Requests whose Origin or Host is
// not loopback get 403. Call it once per pool; serve it on a loopback
// listener only.
func (p *Pool) HTTPHandler() http.Handler {
	h := &httpFront{p: p, sessions: map[string]*httpSession{}, stateless: map[string]*statelessHTTP{}, cut: make(chan struct{}), keepAlive: streamKeepAlive,
		bodies: bodyBudgetOf(p.opts.MaxMessageBytes)}
	p.front.Store(h)
	if p.enter() { // closed: nothing is left to expire
		p.wg.Go(h.expire)
		p.leave()
	}
	return h
}

// httpFront owns the legacy HTTP sessions, by Mcp-Session-Id, and each
// server's stateless session.
type httpFront struct {
	p         *Pool
	opening   sync.Mutex // serialises opening sessions: the cap holds, and a server has one stateless session
	mu        sync.Mutex
	sessions  map[string]*httpSession
	stateless map[string]*statelessHTTP // by server name
	cut       chan struct{}             // closed at the token's next rotation, then replaced (grant)
	keepAlive time.Duration             // streamKeepAlive; tests set it before serving
	nextKey   atomic.Uint64             // the stateless exchanges' keys
	bodies    *bodyBudget               // for the large bodies being read
}

// httpSession is a legacy pool session over HTTP: each request is
// answered on the POST that carried it (its exchange); everything else
// goes to the GET stream. Its queue outlives each stream: a client whose
// stream ends (it stopped reading, it went away) gets on its next one
// what that stream had not written whole (its notifications up to
// endedStreamBytes), and again the requests it had written that are
// still unanswered, for a request lost with a stream leaves its asker
// waiting. With no stream open, a notification is dropped (a list
// change waits, one of each kind, and a withdrawal of a request a stream
// wrote); a request waits for the next stream,
// and a child's question waits only Options.QuestionGrace for it
// (takeBack). A stream with nothing to say for streamKeepAlive is sent a
// comment.
type httpSession struct {
	s     *session      // its session, which hs is made with (newHTTPSession)
	token string        // the token its initialize carried: a rotation ends the session
	limit int           // Options.SessionQueue: the bound of waiting, and of asked
	bound int           // Options.MaxMessageBytes: the bytes waiting may hold while a stream is open
	grace time.Duration // Options.QuestionGrace
	wake  chan struct{}
	held  *heldBudget // what its POSTs' responses hold together (sessionHeldBound)

	mu        sync.Mutex
	stream    bool         // a GET stream is open
	behind    bool         // the open stream's client fell past bound: the stream ends, its notifications dropped
	waiting   []streamLine // for the GET stream, not yet written whole, in order
	size      int          // the bytes of waiting's lines
	asked     []streamLine // requests the open stream wrote and the client has not answered
	lastEvent uint64       // the last SSE event id given out
	posts     int          // POSTs waiting for their answers
	lastUsed  time.Time    // its last POST, or the end of its last GET stream (HTTPSessionIdle)
	lastPost  time.Time    // its last POST: the cap evicts the session whose client has been quiet longest
	park      *time.Timer  // armed while requests wait with no stream open (takeBack)
	parkGen   uint64       // the armed park's: one stopped too late finds another
}

// streamLine is a message for a legacy session's GET stream, under its
// SSE event id (Last-Event-ID names it when the client resumes).
type streamLine struct {
	id      uint64
	line    []byte
	reqID   string // a request's id bytes; "" for a notification
	method  string // its method
	written bool   // a request a stream wrote before (keepAsked)
}

// statelessHTTP is a server's stateless session: every 2026-07-28
// request POSTed to the server is an exchange on it, keyed so that
// concurrent clients' ids cannot collide, and speaking for its own client
// (exchange.go). It lives as long as a child of the server kept for it
// would: it ends once its server's idleTimeout has passed since its last
// exchange (server.statelessLinger, expire), and its child's idle time is
// counted from that exchange (statelessQuiet); the next request opens
// another.
type statelessHTTP struct {
	s *session

	// Guarded by httpFront.mu.
	exchanges int       // POSTs under way
	lastUsed  time.Time // when the last exchange ended, on the pool's clock
}

func (h *httpFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g, ok := h.gate(w, r) // httpauth.go
	if !ok {
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/mcp/")
	if !ok || name == "" || strings.Contains(name, "/") {
		httpError(w, nil, errNoEndpoint)
		return
	}
	srv, err := h.p.server(name)
	if err != nil {
		httpError(w, nil, errNoServer, err)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	switch r.Method {
	case http.MethodPost:
		h.post(w, r, srv, sid, g)
	case http.MethodGet, http.MethodDelete:
		if !h.p.joinUnlessClosed() {
			httpError(w, nil, errShuttingDown, errPoolClosing)
			return
		}
		defer h.p.wg.Done() // joinUnlessClosed
		if bad := sessionVersionRefused(r, sid); bad != nil {
			bad.write(w, nil)
			return
		}
		if sid == "" { // 2026-07-28: no sessions, no GET stream
			w.Header().Set("Allow", http.MethodPost)
			httpError(w, nil, errNeedsSessionID, r.Method)
			return
		}
		hs := h.lookup(sid, name)
		if hs == nil {
			httpError(w, nil, errUnknownSession)
			return
		}
		if r.Method == http.MethodDelete {
			hs.s.close(nil)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.listen(w, r, hs)
	default:
		w.Header().Set("Allow", "POST, GET, DELETE")
		httpError(w, nil, errMethodNotAllowed, r.Method)
	}
}

// post serves one JSON-RPC message.
func (h *httpFront) post(w http.ResponseWriter, r *http.Request, srv *server, sid string, g grant) {
	limit := h.p.opts.MaxMessageBytes
	body, err := readBody(r, limit, h.bodies)
	if errors.Is(err, errBodyBudget) {
		w.Header().Set("Connection", "close") // the rest of its body is not read
		w.Header().Set("Retry-After", "1")
		httpError(w, nil, errBodiesBusy, err)
		return
	}
	if err != nil {
		httpError(w, nil, errReadBody, err)
		return
	}
	if len(body) > limit {
		httpError(w, nil, errMessageTooLarge, limit)
		return
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		httpError(w, nil, errBatch)
		return
	}
	msg, err := jsonrpc.ParseStrict(body) // the session's handleMessage asks Strict
	if err != nil {
		kind := errInvalid
		if errors.Is(err, jsonrpc.ErrParse) {
			kind = errParse
		}
		httpError(w, nil, kind, err)
		return
	}
	jsonrpc.OneLine(body) // a body may span lines; a child reads a message per line
	// Counted from here, once its body is read (a client's pace), not
	// before: Close waits for what it starts.
	if !h.p.joinUnlessClosed() {
		httpError(w, msg.IDBytes(), errShuttingDown, errPoolClosing)
		return
	}
	defer h.p.wg.Done() // joinUnlessClosed
	name := srv.name
	switch {
	case msg.Kind == jsonrpc.KindRequest && modernHTTP(r, body, msg, sid): // its session id ignored
		if bad := validateModern(r.Header, body, msg, srv.toolParams()); bad != nil {
			bad.write(w, msg.IDBytes())
			return
		}
		h.exchange(w, r, srv, &msg, g)
	case sid != "":
		if bad := sessionVersionRefused(r, sid); bad != nil {
			bad.write(w, msg.IDBytes())
			return
		}
		hs := h.lookup(sid, name)
		if hs == nil {
			httpError(w, msg.IDBytes(), errUnknownSession)
			return
		}
		h.legacy(w, r, hs, &msg, "")
	case msg.Kind == jsonrpc.KindRequest && msg.Method == "initialize":
		hs, sid, err := h.open(name, g.token)
		if errors.Is(err, errTokenRotated) {
			tokenRotated(w, msg.IDBytes())
			return
		}
		if err != nil {
			httpError(w, msg.IDBytes(), errNoSession, err)
			return
		}
		h.legacy(w, r, hs, &msg, sid)
	case msg.Kind != jsonrpc.KindRequest:
		// 2026-07-28 defines no client notifications over HTTP; a
		// legacy one without its session is dropped too.
		w.WriteHeader(http.StatusAccepted)
	default:
		httpError(w, msg.IDBytes(), errNoSessionID)
	}
}

// legacy serves a message of a legacy session: a request is an exchange
// keyed by its id, as the session's requests are (its client cancels it
// by that id, which ends the POST unanswered); closing the response
// cancels nothing (the legacy transport says a disconnect is not a
// cancellation), and the answer is then dropped.
//
// The initialize that opened the session (newID, its id) is the
// exception: the id goes out only with its answer, and only with a
// successful one, so the session is kept only once that answer is
// written. One whose initialize failed, or whose client left before the
// answer (the child slow to start, say), is closed, its child with it
// when the session had its own: no client could ever reach it.
func (h *httpFront) legacy(w http.ResponseWriter, r *http.Request, hs *httpSession, msg *jsonrpc.Message, newID string) {
	if msg.Kind != jsonrpc.KindRequest {
		hs.touch(0)
		if msg.Kind == jsonrpc.KindResponse {
			hs.answered(string(msg.IDBytes()))
		}
		hs.s.handleMessage(msg, nil)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	x := newExchange(string(msg.IDBytes()), takesStream(r, msg), &h.p.opts, hs.held)
	hs.touch(1)
	defer hs.touch(-1)
	stop := func() bool { return false }
	var left chan struct{} // closed once the close below is done
	if newID != "" {       // an initialize waits for the child's handshake in handleMessage: a client that leaves meanwhile ends it
		left = make(chan struct{})
		stop = context.AfterFunc(r.Context(), func() {
			defer close(left)
			hs.s.close(errInitializeLeft)
		})
	}
	hs.s.handleMessage(msg, x)
	if left != nil && !stop() {
		<-left // the close is this request's: Close waits for it (joinUnlessClosed)
	}
	o := newPostOut(h.p, w, newID, msg.IDBytes())
	end := h.await(o, r, hs.s, x, nil)
	switch {
	case newID != "" && end != awaitAnswered:
		h.drop(newID, hs, errInitializeLeft)
	case newID != "" && o.code != 0:
		h.drop(newID, hs, errInitializeFailed)
	case end == awaitGone, end == awaitSlow:
		hs.s.endExchange(x, false, "") // its listen, if it was one: the stream was its response
	}
}

// Why a session is closed when the initialize that opened it did not
// hand its client the session's id.
var (
	errInitializeLeft   = errors.New("its client left before the answer to its initialize, which names the session")
	errInitializeFailed = errors.New("its initialize failed: the client was given no session")
)

// drop forgets and closes session sid, hs, for reason.
func (h *httpFront) drop(sid string, hs *httpSession, reason error) {
	h.mu.Lock()
	if h.sessions[sid] == hs {
		delete(h.sessions, sid)
	}
	h.mu.Unlock()
	hs.s.close(reason)
}

// exchange serves a 2026-07-28 request as an exchange on the server's
// stateless session, under a key of its own; closing its response before
// the answer cancels it at the child, and so does a rotation of the token
// it carried (g), even once its call is held for the client's retry
// (mrtr.go).
func (h *httpFront) exchange(w http.ResponseWriter, r *http.Request, srv *server, msg *jsonrpc.Message, g grant) {
	st, err := h.statelessFor(srv)
	if err != nil {
		httpError(w, msg.IDBytes(), errNoSession, err)
		return
	}
	defer h.release(st)
	var kb [24]byte
	key := string(strconv.AppendUint(append(kb[:0], 'x'), h.nextKey.Add(1), 10)) // no client id looks like this: ids are JSON
	x := newStatelessExchange(key, takesStream(r, msg), &h.p.opts, msg.Meta.Of(msg.Raw))
	x.gate = &g
	st.s.handleMessage(msg, x)
	switch h.await(newPostOut(h.p, w, "", msg.IDBytes()), r, st.s, x, &g) {
	case awaitGone:
		st.s.endExchange(x, true, "the client closed its HTTP response")
	case awaitSlow:
		st.s.endExchange(x, true, errSlowHTTPClient.Error())
	case awaitRevoked:
		st.s.endExchange(x, true, errTokenRotated.Error())
	}
	if msg.Method == "tools/call" {
		srv.askToolParams(st.s) // once, before any tools/list answer was seen: the next calls are checked
	}
}

// takesStream reports whether the POST takes what relates to its request
// on its response: a subscriptions/listen's notifications (its stream is
// its response), or progress and log messages when the request has a
// progress token or a log level and the client accepts an event stream.
func takesStream(r *http.Request, msg *jsonrpc.Message) bool {
	return msg.Method == "subscriptions/listen" || acceptsSSE(r) && (progressTokenAt(msg).Present() || asksLogs(msg))
}

// awaitEnd is how a POST's response ended (await).
type awaitEnd uint8

const (
	awaitAnswered  awaitEnd = iota // the answer was written
	awaitCancelled                 // the request ended unanswered, by its client's cancel
	awaitGone                      // the client went away, or the session ended
	awaitSlow                      // the client did not take what its response had to say (errSlowHTTPClient)
	awaitRevoked                   // the token the request carried was rotated away (errTokenRotated)
)

// errSlowHTTPClient is why a POST's response is ended before its answer
// when its client does not read it: a write waited past
// streamWriteTimeout, or more waited for it than its queue holds.
var errSlowHTTPClient = errors.New("the client did not read its HTTP response in time")

// await writes to the POST's response what the pool hands x: related
// messages as SSE events (the response turns into an event stream at the
// first), each time everything queued in one write and one flush, then
// the answer. An answer that has not come within keepAlive comes on an
// event stream too, when the client accepts one: the response turns into
// it then, and is kept alive until the answer, for a client may end a
// response whose headers, or body, it waits minutes for (Node's fetch:
// 300 s); a fast answer, or one for a client that accepts only JSON, is
// the JSON body. The initialize that opens a legacy session stays JSON:
// its session id goes out with a successful answer only (which comes
// within the server's request timeout). Every write must be taken within
// streamWriteTimeout, as a GET stream's: a client that does not read
// holds neither the handler nor its session (which does not expire while
// a POST waits). A request its client cancelled ends the response
// unanswered: an event stream ends, and a response not yet begun is 202
// with no body. A 2026-07-28 request's grant g ends it when its token is
// rotated away (a legacy session's requests end with their session
// then): g nil is a legacy one.
func (h *httpFront) await(o *postOut, r *http.Request, s *session, x *exchange, g *grant) awaitEnd {
	defer func() { _ = o.rc.SetWriteDeadline(time.Time{}) }() // a kept-alive connection's next request has its own
	defer h.p.writingOut(&o.rc)()
	end := o.await(r, s, x, g, h.keepAlive)
	x.settle()
	if end == awaitSlow {
		h.p.log.Warn("ending an HTTP response whose client stopped reading",
			"session", s.id, "server", s.srv.name, "request", x.key, "reason", o.why)
	}
	return end
}

// await is httpFront.await's loop, on the response o. An event stream
// that has nothing to say for keepAlive is sent a comment. Its timer is
// armed only while it can do something: from the start when a slow
// answer would turn the response into an event stream (a client that
// accepts one, no session id to hand out), else once the response is
// one. A timer in the select costs a request a place in the runtime's
// timer heap each time the handler waits (the timer itself is reused:
// keepAliveTimers).
func (o *postOut) await(r *http.Request, s *session, x *exchange, g *grant, keepAlive time.Duration) awaitEnd {
	modern := g != nil
	var wake chan struct{}
	if x.related != nil {
		wake = x.related.wake
	}
	var cut <-chan struct{}
	if modern {
		cut = g.cut
	}
	var idle *time.Timer
	var idleC <-chan time.Time // nil while the timer could do nothing
	if o.sid == "" && acceptsSSE(r) {
		idle = keepAliveTimer(keepAlive)
		idleC = idle.C
	}
	defer func() {
		if idle != nil {
			idle.Stop()
			keepAliveTimers.Put(idle)
		}
	}()
	for {
		select {
		case <-idleC:
			if !o.sse { // a slow answer: the headers go now
				o.begin()
				o.early = true
			}
			if end := o.write([]byte(keepAliveComment)); end != awaitAnswered {
				return end
			}
			idle.Reset(keepAlive)
		case <-cut:
			if g.revoked() {
				if !o.sse {
					tokenRotated(o.w, nil)
				} else {
					o.failEarly(errTokenRevoked, errTokenRotated)
				}
				return awaitRevoked
			}
			cut = g.cut
		case a := <-x.answered:
			if a.line == nil && isClosed(s.closed) {
				return o.sessionEnded()
			}
			return o.answer(x, a, modern)
		case <-wake:
			if end := o.related(x); end != awaitAnswered {
				return end
			}
			switch {
			case idle != nil:
				idle.Reset(keepAlive)
			case o.sse:
				idle = keepAliveTimer(keepAlive)
				idleC = idle.C
			}
		case <-r.Context().Done():
			// 2026-07-28: a closed response is the cancellation (the
			// caller cancels it). A legacy client's disconnect cancels
			// nothing: its answer is dropped.
			return awaitGone
		case <-s.closed:
			select {
			case a := <-x.answered: // answered as the session ended
				if a.line != nil {
					return o.answer(x, a, modern)
				}
			default:
			}
			return o.sessionEnded()
		}
	}
}

// keepAliveTimers holds await's stopped keep-alive timers for reuse: a
// legacy POST's is armed for every request, and one made anew costs
// each its allocations. (A stopped timer's channel holds no stale tick.)
var keepAliveTimers sync.Pool

// keepAliveTimer is a keep-alive timer armed for d, a stopped one reused
// when there is one.
func keepAliveTimer(d time.Duration) *time.Timer {
	if t, ok := keepAliveTimers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// sessionEnded ends a POST's response whose session ended first.
func (o *postOut) sessionEnded() awaitEnd {
	if !o.sse {
		httpError(o.w, nil, errPostSessionEnded)
	} else {
		o.failEarly(errPostSessionEnded)
	}
	return awaitGone
}

// failEarly ends a response that the keep-alive alone made an event
// stream with the error its JSON body would have been, as an event
// answering the request: its client waits for that answer (a stream's
// client asked for it, and knows it ended).
func (o *postOut) failEarly(kind poolError, args ...any) {
	if o.early {
		o.events(nil, jsonrpc.AppendErrorResponse(nil, o.id, newError(kind, false, "", args...)))
	}
}

// jsonContentType is an answer's Content-Type, shared by every response
// (net/http copies a header's values as the response begins; Set would
// make the slice anew for each).
var jsonContentType = []string{"application/json"}

// postOut is a POST's response as await writes it.
type postOut struct {
	w     http.ResponseWriter
	rc    http.ResponseController // by value: one allocation fewer a request
	p     *Pool                   // whose stop cuts its writes short (writingOut)
	sid   string                  // the Mcp-Session-Id to hand out with a successful answer: the initialize's that opened it; else ""
	id    []byte                  // the request's id, which an error in its answer's stead names (failEarly)
	code  int                     // the answer's JSON-RPC error code, once answer has it (0: a result)
	sse   bool                    // the response is an event stream
	early bool                    // the keep-alive alone made it one: the answer was slow
	why   error                   // why the response was ended before its answer (behind)
	buf   []byte                  // the events of one write
}

// newPostOut is the response w to request id, which hands out session id
// sid with a successful answer, when sid is not "", for pool p.
func newPostOut(p *Pool, w http.ResponseWriter, sid string, id []byte) *postOut {
	return &postOut{w: w, rc: *http.NewResponseController(w), p: p, sid: sid, id: id}
}

// related writes everything x's queue holds, in one write and one flush;
// it reports awaitAnswered when the response goes on.
func (o *postOut) related(x *exchange) awaitEnd {
	lines, size, cut := x.related.take()
	defer x.budget.release(size) // written, or let go
	if cut != nil {
		return o.behind(cut)
	}
	return o.events(lines, nil)
}

// behind ends the response of a client that fell behind its stream, or
// whose session's responses hold too much unread (why): an event stream
// just ends, as a GET stream does; one not yet begun says why.
func (o *postOut) behind(why error) awaitEnd {
	o.why = why
	if !o.sse {
		httpError(o.w, nil, errFellBehind, why)
	}
	return awaitSlow
}

// events writes lines, then last when not nil, as SSE events, in one
// write and one flush that the client must take within
// streamWriteTimeout.
func (o *postOut) events(lines [][]byte, last []byte) awaitEnd {
	if len(lines) == 0 && last == nil {
		return awaitAnswered
	}
	if !o.sse {
		o.begin()
	}
	b := o.buf[:0]
	for _, line := range lines {
		b = appendEvent(b, line)
	}
	if last != nil {
		b = appendEvent(b, last)
	}
	o.buf = b[:0]
	if len(b) > keepBuf {
		o.buf = nil // a burst's buffer is not kept for the rest of a long stream
	}
	return o.write(b)
}

// begin turns the response into an event stream: its headers, which go
// out with its first write.
func (o *postOut) begin() {
	o.sse = true
	h := o.w.Header()
	if o.sid != "" && o.code == 0 { // an event stream's headers go before its answer: a failure there leaves the id unknown
		h.Set("Mcp-Session-Id", o.sid)
	}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // 2026-07-28: proxies must not hold events back
	o.w.WriteHeader(http.StatusOK)
}

// write writes and flushes b, within streamWriteTimeout.
func (o *postOut) write(b []byte) awaitEnd {
	err := o.p.stopDeadline(&o.rc, streamWriteTimeout)
	if err == nil || errors.Is(err, http.ErrNotSupported) {
		_, err = o.w.Write(b)
	}
	if err == nil {
		err = o.rc.Flush()
	}
	switch {
	case err == nil, errors.Is(err, http.ErrNotSupported):
		return awaitAnswered
	case isTimeout(err):
		o.why = errSlowHTTPClient
		return awaitSlow
	default:
		return awaitGone
	}
}

// answer writes the answer: an event after the related messages queued
// before it, or the JSON body (with the status 2026-07-28 gives its
// code); no answer (the client cancelled the request) ends an event
// stream, or is 202 with no body. A client that fell behind its stream
// (its queue was cut off) is let go without it, as it would have been
// had the answer come a moment later; so is one whose answer would have
// taken its session's responses past their budget (a.over).
func (o *postOut) answer(x *exchange, a response, modern bool) awaitEnd {
	var lines [][]byte
	var size int
	var cut error
	if x.related != nil {
		lines, size, cut = x.related.take() // what was related before the answer goes first
	}
	defer x.budget.release(size + a.held()) // written, or let go
	o.code = a.code
	switch {
	case cut != nil:
		return o.behind(cut)
	case a.over:
		return o.behind(x.budget.over)
	case a.line == nil:
		if !o.sse {
			o.w.WriteHeader(http.StatusAccepted)
		}
		return awaitCancelled
	case o.sse || len(lines) > 0:
		return o.events(lines, a.line)
	}
	h := o.w.Header()
	if o.sid != "" && a.code == 0 {
		h.Set("Mcp-Session-Id", o.sid)
	}
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(a.line))} // written and flushed here, within the deadline: not chunked for that
	if modern {
		o.w.WriteHeader(modernStatus(a.code))
	}
	return o.write(a.line)
}

// listen is a legacy client's GET stream: the session's messages that
// answer no POST, each an SSE event with an id. A stream that ends (its
// client went away, took nothing for streamWriteTimeout, or fell behind:
// toStream) leaves what it had not written whole, and the requests it
// wrote that are still unanswered, to the session's next stream
// (endStream): an event cut
// short may have reached the client, or not, and so may one the client
// never read, and a request lost would leave its asker waiting. Sent
// again they may arrive twice; the client answers by id, and only the
// first answer reaches the asker. A client that resumes with
// Last-Event-ID gets again only what came after that event.
func (h *httpFront) listen(w http.ResponseWriter, r *http.Request, hs *httpSession) {
	if _, ok := w.(http.Flusher); !ok {
		httpError(w, nil, errNoStreaming)
		return
	}
	last, _ := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	if !hs.startStream(last) {
		httpError(w, nil, errStreamOpen)
		return
	}
	defer hs.endStream()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	// A client that stops reading must not hold the stream (and its
	// session, which does not expire while it has one) for ever: a write
	// it does not take within streamWriteTimeout ends the stream.
	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	defer h.p.writingOut(rc)()
	write := func(put func() error) bool { // put's write, flushed
		if err := h.p.stopDeadline(rc, streamWriteTimeout); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		return put() == nil && rc.Flush() == nil
	}
	headers := func() error { return nil }
	keepAlive := func() error {
		_, err := io.WriteString(w, keepAliveComment)
		return err
	}
	if !write(headers) {
		return
	}
	hs.s.streamOpened()
	idle := time.NewTimer(h.keepAlive) // a stream with nothing to say for it is sent a comment
	defer idle.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-hs.s.closed:
			return
		default:
		}
		if hs.fellBehind() {
			return
		}
		e, ok := hs.next()
		if !ok {
			select {
			case <-hs.wake:
			case <-idle.C:
				if !write(keepAlive) {
					return
				}
				idle.Reset(h.keepAlive)
			case <-r.Context().Done():
				return
			case <-hs.s.closed:
				return
			}
			continue
		}
		if e.reqID != "" && !hs.keepAsked(e) {
			continue // written before, and nothing waits for its answer now
		}
		event := func() error {
			_, err := fmt.Fprintf(w, "id: %d\nevent: message\ndata: %s\n\n", e.id, e.line)
			return err
		}
		if !write(event) {
			hs.putBack(e)
			return
		}
		idle.Reset(h.keepAlive)
	}
}

// open starts a legacy HTTP session with a fresh, unguessable id, for a
// client let in with token. A session the cap evicts for it is closed
// here, out of h.opening, which every open on every server takes: its
// own child (share "session") may take its stop's graces to exit. The
// newcomer's initialize waits for that close, so its child starts only
// once the evicted one is gone: a server runs no more children for its
// legacy sessions than the cap.
func (h *httpFront) open(name, token string) (*httpSession, string, error) {
	hs, sid, evicted, err := h.register(name, token)
	if evicted != nil {
		evicted.s.close(errCapEvicted)
	}
	if err != nil {
		return nil, "", err
	}
	if token != h.token() { // rotated since the gate let it in, and rotated missed it
		hs.s.close(errTokenRotated)
		return nil, "", errTokenRotated
	}
	return hs, sid, nil
}

// register makes a new legacy session of server name and lists it under
// a fresh id, making room for it under the cap; evicted is the session
// that made room, taken out of the list but not closed: the caller
// closes it, after h.opening.
func (h *httpFront) register(name, token string) (hs *httpSession, sid string, evicted *httpSession, err error) {
	// One open at a time: the cap holds under a flood of initializes.
	h.opening.Lock()
	defer h.opening.Unlock()
	evicted, err = h.makeRoom(name)
	if err != nil {
		return nil, "", nil, err
	}
	_, err = h.p.newSession(name, sessionSetup{transport: "http", bind: func(s *session) (func() bool, outSink) {
		hs = h.newHTTPSession(s, token) // whole before its server can reach it: its callbacks read hs.s
		if testHookStreamSink != nil {
			return hs.streaming, testHookStreamSink(hs.toStream)
		}
		return hs.streaming, hs.toStream
	}})
	if err != nil {
		return nil, "", evicted, err
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	sid = hex.EncodeToString(b[:])
	h.mu.Lock()
	h.sessions[sid] = hs // an ended session is forgotten by the next lookup, makeRoom or expire
	h.mu.Unlock()
	return hs, sid, evicted, nil
}

// testHookStreamSink, when set, wraps the GET-stream output of each
// legacy session opened (tests: what the makers of its messages tell).
var testHookStreamSink func(outSink) outSink

// newHTTPSession is legacy session s's HTTP side, for a client let in
// with token.
func (h *httpFront) newHTTPSession(s *session, token string) *httpSession {
	now := time.Now()
	return &httpSession{s: s, token: token, limit: h.p.opts.SessionQueue, bound: h.p.opts.MaxMessageBytes, grace: h.p.opts.QuestionGrace, wake: make(chan struct{}, 1), lastUsed: now, lastPost: now,
		held: newHeldBudget(sessionHeldBound(h.p.opts.MaxMessageBytes))}
}

// statelessFor returns server srv's stateless session, opening it if
// there is none, with one more exchange under way on it.
func (h *httpFront) statelessFor(srv *server) (*statelessHTTP, error) {
	if st := h.takeStateless(srv); st != nil {
		return st, nil
	}
	h.opening.Lock()
	defer h.opening.Unlock()
	if st := h.takeStateless(srv); st != nil {
		return st, nil
	}
	s, err := h.p.newSession(srv.name, sessionSetup{transport: "http", stateless: true, sink: dropMessage})
	if err != nil {
		return nil, err
	}
	st := &statelessHTTP{s: s, exchanges: 1, lastUsed: h.p.clock.Now()}
	h.mu.Lock()
	h.stateless[srv.name] = st
	h.mu.Unlock()
	return st, nil
}

// takeStateless counts one more exchange on srv's stateless session, if
// it has a live one.
func (h *httpFront) takeStateless(srv *server) *statelessHTTP {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.stateless[srv.name]
	if st == nil || st.s.srv != srv || !st.s.alive() {
		return nil
	}
	st.exchanges++
	return st
}

// release ends an exchange on a stateless session.
func (h *httpFront) release(st *statelessHTTP) {
	h.mu.Lock()
	st.exchanges--
	st.lastUsed = h.p.clock.Now()
	h.mu.Unlock()
}

// dropMessage is a stateless session's output: everything for its
// clients goes to their exchanges; what answers none (there is nothing:
// no logs, no server-to-client requests in 2026-07-28) has nowhere to go.
func dropMessage([]byte, outFacts) {}

// errTooManySessions refuses a legacy HTTP session past the cap when
// every one of the server's sessions is in use: its client has a POST
// under way or sent one in the last evictQuiet.
var errTooManySessions = errors.New("too many HTTP sessions for this server, each in use (a request in the last second): end one (DELETE) and retry")

// errCapEvicted is why a session the cap evicted for a newcomer's ended.
var errCapEvicted = errors.New("evicted: the server's HTTP session cap was reached and this session's client had sent no request for the longest")

// evictQuiet is how long a legacy session's client must have sent no
// POST, and have none under way, before the cap may evict its session
// for a newcomer's. A client in the midst of its work (its session just
// opened, its calls coming one after another) is not cut off: past the
// cap with every client that busy, the newcomer gets 503 and retries,
// rather than every session of a flood of initializes ending before its
// client could use it.
var evictQuiet = time.Second

// makeRoom keeps a server's legacy HTTP sessions under the cap
// (Options.MaxHTTPSessions): clients rarely DELETE, and each session
// otherwise lives 30 idle minutes. At the cap the session whose client
// has been quiet longest (no POST, none under way) is taken out of the
// list and returned, for the caller to close; an open GET stream does not
// keep it, for a client may hold one open and never call. With none
// quiet for evictQuiet, the newcomer is refused.
func (h *httpFront) makeRoom(name string) (*httpSession, error) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var quietest *httpSession
	var quietestID string
	var quietestSince time.Time
	n := 0
	for sid, hs := range h.sessions {
		if !hs.s.alive() {
			delete(h.sessions, sid)
			continue
		}
		if hs.s.srv.name != name {
			continue
		}
		n++
		since, quiet := hs.quietSince()
		if quiet && now.Sub(since) >= evictQuiet && (quietest == nil || since.Before(quietestSince)) {
			quietest, quietestID, quietestSince = hs, sid, since
		}
	}
	if n < h.p.opts.MaxHTTPSessions {
		return nil, nil
	}
	if quietest == nil {
		return nil, errTooManySessions
	}
	delete(h.sessions, quietestID) // its slot is the newcomer's
	return quietest, nil
}

// quietSince returns when the session's client last sent a POST, or had
// one answered, and whether none is under way now.
func (hs *httpSession) quietSince() (time.Time, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.lastPost, hs.posts == 0
}

// streaming reports whether the session's GET stream is open: only then
// can the client be sent a request (sampling, elicitation).
func (hs *httpSession) streaming() bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.stream
}

// toStream is a legacy session's output: a message that answers no POST
// is queued for the GET stream without blocking. With no stream open, a
// notification is dropped (a list change waits unless one of its kind
// does; a withdrawal waits if a stream wrote its request, else the
// request goes with it), and a request (one a stream was open for when its asker picked
// the session) waits for the next stream. Past the
// queue's bound notifications are dropped, the oldest queued first to
// make room for a request; a request that still finds no room is refused.
// A client whose stream has more than hs.bound bytes waiting (one
// message always fits) has fallen behind, as a POST's would (exchange):
// its notifications are dropped, those waiting and those to come, and
// its stream ends; the requests wait for the next. What the message is
// (its method, a request's id, what a withdrawal withdraws) its maker
// told (f): nothing here parses it again.
func (hs *httpSession) toStream(line []byte, f outFacts) {
	e := streamLine{line: line, method: f.method, reqID: f.id.wire()}
	withdraws := f.withdraws.wire() // the request a notifications/cancelled withdraws
	hs.mu.Lock()
	fellBehind := false
	if e.reqID == "" {
		if hs.stream && !hs.behind && len(hs.waiting) > 0 && hs.size+len(line) > hs.bound {
			hs.behind, fellBehind = true, true
			hs.dropNotificationsLocked(0)
		}
		// With no stream to take it, or one that fell behind, it is
		// dropped, but for a list change none like it waits for: the
		// client, back, lists again rather than miss a change; and for a
		// withdrawal of a request a stream wrote, which the client may
		// show still: it waits as the request did. One never written
		// goes instead, unasked.
		if !hs.stream || hs.behind {
			kept := listChange(e.method) && !hs.waitsLocked(e.method) ||
				withdraws != "" && !hs.dropUnwrittenLocked(withdraws)
			if !kept {
				hs.mu.Unlock()
				if fellBehind {
					hs.behindLog()
				}
				return
			}
		}
	}
	if len(hs.waiting) >= hs.limit {
		i := slices.IndexFunc(hs.waiting, func(q streamLine) bool { return q.reqID == "" })
		if e.reqID == "" || i < 0 {
			hs.mu.Unlock()
			if e.reqID != "" {
				hs.refuse(e)
			}
			return
		}
		hs.size -= len(hs.waiting[i].line)
		hs.waiting = slices.Delete(hs.waiting, i, i+1)
	}
	hs.lastEvent++
	e.id = hs.lastEvent
	hs.waiting = append(hs.waiting, e)
	hs.size += len(line)
	if !hs.stream && e.reqID != "" {
		hs.parkLocked() // the stream ended since its asker picked the session
	}
	hs.mu.Unlock()
	if fellBehind {
		hs.behindLog()
	}
	hs.poke()
}

// behindLog says that the stream's client fell behind.
func (hs *httpSession) behindLog() {
	s := hs.s
	s.p.log.Warn("ending the GET stream of an HTTP client that fell behind: its notifications are dropped",
		"session", s.id, "server", s.srv.name, "limitBytes", hs.bound)
}

// listChange reports whether a notification's method says a list
// changed: a client that missed one, and no other, lists again.
func listChange(method string) bool {
	switch method {
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		return true
	}
	return false
}

// waitsLocked reports whether a notification of method waits.
func (hs *httpSession) waitsLocked(method string) bool {
	return slices.ContainsFunc(hs.waiting, func(e streamLine) bool { return e.reqID == "" && e.method == method })
}

// poke wakes the GET stream, if it waits.
func (hs *httpSession) poke() {
	select {
	case hs.wake <- struct{}{}:
	default:
	}
}

// dropNotificationsLocked drops the notifications waiting past the first
// keep bytes of them, but for the first list change of each kind (the
// client lists again; later ones say nothing more), and keeps the
// requests, whose askers wait.
func (hs *httpSession) dropNotificationsLocked(keep int) (dropped int) {
	kept := 0
	var changes []string
	hs.waiting = slices.DeleteFunc(hs.waiting, func(e streamLine) bool {
		if e.reqID != "" {
			return false
		}
		if listChange(e.method) && !slices.Contains(changes, e.method) {
			changes = append(changes, e.method)
			return false
		}
		if kept+len(e.line) <= keep {
			kept += len(e.line)
			return false
		}
		hs.size -= len(e.line)
		dropped++
		return true
	})
	return dropped
}

// fellBehind reports whether the open stream's client fell behind: the
// stream ends.
func (hs *httpSession) fellBehind() bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.behind
}

// refuse answers a request the GET stream has no room for, in its
// client's place, with an error: its asker (a child's question, a modern
// child's question of a call, the pool's roots/list) takes it as the
// client's answer, and nothing waits for a request never sent. It runs
// apart: the caller of toStream may hold its asker's locks.
func (hs *httpSession) refuse(e streamLine) {
	line := jsonrpc.AppendErrorResponse(nil, []byte(e.reqID), newError(errNoClient, false, "", e.method))
	msg, err := jsonrpc.Parse(line)
	if err != nil {
		return
	}
	s := hs.s
	s.p.log.Warn("refusing a request to an HTTP client whose GET stream has too much waiting",
		"session", s.id, "server", s.srv.name, "method", e.method)
	// Its caller may be none of the pool's goroutines (an HTTP client's
	// request that asks the client's roots, a timer taking a question
	// back to ask it again): once the pool closes, the asker ends with it.
	s.p.goUnlessClosed(func() { s.onResponse(&msg) })
}

// startStream opens the session's GET stream, unless one is open. A
// client resuming after event last has what it was sent up to there.
func (hs *httpSession) startStream(last uint64) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.stream {
		return false
	}
	hs.stream = true
	hs.behind = false
	if hs.park != nil { // the client is back within the grace: its questions stay its own
		hs.park.Stop()
		hs.park = nil
	}
	if last > 0 && last <= hs.lastEvent { // one of this session's ids
		hs.dropWaitingLocked(func(e streamLine) bool { return e.id <= last })
	}
	return true
}

// dropUnwrittenLocked takes request id out of waiting if no stream has
// written it, and reports whether it did.
func (hs *httpSession) dropUnwrittenLocked(id string) bool {
	i := slices.IndexFunc(hs.waiting, func(e streamLine) bool { return e.reqID == id && !e.written })
	if i < 0 {
		return false
	}
	hs.size -= len(hs.waiting[i].line)
	hs.waiting = slices.Delete(hs.waiting, i, i+1)
	return true
}

// dropWaitingLocked takes out of waiting the lines f picks.
func (hs *httpSession) dropWaitingLocked(f func(streamLine) bool) {
	hs.waiting = slices.DeleteFunc(hs.waiting, func(e streamLine) bool {
		if f(e) {
			hs.size -= len(e.line)
			return true
		}
		return false
	})
}

// next takes the stream's next line to write.
func (hs *httpSession) next() (streamLine, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.waiting) == 0 {
		return streamLine{}, false
	}
	e := hs.waiting[0]
	hs.waiting[0] = streamLine{}
	hs.waiting = hs.waiting[1:]
	hs.size -= len(e.line)
	return e, true
}

// keepAsked notes a request the stream is about to write among the
// asked, kept until the client answers it. One a stream wrote before is
// written again only while its asker still waits (false: it is not). The
// asked are bounded: past the bound the oldest is let go, and is not
// written again.
func (hs *httpSession) keepAsked(e streamLine) bool {
	if e.written && !stillAsked(hs.s, e.reqID) { // other locks than hs.mu: not under it
		return false
	}
	e.written = true
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.asked) >= hs.limit {
		hs.asked = slices.Delete(hs.asked, 0, 1)
	}
	hs.asked = append(hs.asked, e)
	return true
}

// putBack returns a line the stream could not write whole to the head of
// the queue: the next stream writes it whole. A request is among the
// asked already, which go first.
func (hs *httpSession) putBack(e streamLine) {
	if e.reqID != "" {
		return
	}
	hs.mu.Lock()
	if len(hs.waiting) < hs.limit && (!hs.behind || listChange(e.method) && !hs.waitsLocked(e.method)) {
		hs.waiting = slices.Insert(hs.waiting, 0, e)
		hs.size += len(e.line)
	}
	hs.mu.Unlock()
}

// endStream closes the GET stream: the requests it wrote whose answers
// have not come go back ahead of what waits, for the next stream to
// write again (keepAsked skips those whose askers stop waiting), and the
// grace for the client to open it starts. Of the notifications it left
// unwritten the next stream gets the first endedStreamBytes: a client
// back after a blip misses nothing, and one gone for good (a session
// lasts HTTPSessionIdle without a stream) holds little.
func (hs *httpSession) endStream() {
	hs.mu.Lock()
	if hs.s.alive() {
		hs.waiting = append(hs.asked, hs.waiting...)
		for _, e := range hs.asked {
			hs.size += len(e.line)
		}
	} else {
		hs.waiting, hs.size = nil, 0
	}
	dropped := hs.dropNotificationsLocked(endedStreamBytes)
	hs.asked = nil
	hs.stream = false
	hs.behind = false
	hs.lastUsed = time.Now()
	if slices.ContainsFunc(hs.waiting, func(e streamLine) bool { return e.reqID != "" }) {
		hs.parkLocked()
	}
	hs.mu.Unlock()
	if dropped > 0 {
		s := hs.s
		s.p.log.Warn("dropping notifications an ended GET stream left unwritten past what the next one gets",
			"session", s.id, "server", s.srv.name, "dropped", dropped, "keptBytes", endedStreamBytes)
	}
}

// endedStreamBytes bounds the notifications a GET stream that ended
// leaves to the session's next one.
const endedStreamBytes = 1 << 20

// parkLocked arms the grace for the requests that wait with no stream
// open, unless it is armed: it counts from the stream's end.
func (hs *httpSession) parkLocked() {
	if hs.park != nil {
		return
	}
	hs.parkGen++
	gen := hs.parkGen
	hs.park = hs.s.p.afterFunc(hs.grace, func() { hs.takeBack(gen) })
}

// takeBack runs when the grace of park gen has passed with no stream
// open: the client has left without a DELETE (the TypeScript SDK's
// close() ends the stream and nothing more), or would have come back by
// now (the SDK's reconnection tries within 2.5 s). Each child's question
// still waiting here is taken back and asked again, of another session
// that can answer it or answered -32006 to the child (backend.askAgain),
// so that the call that caused it does not wait for its timeout; and its
// line goes, so a client that comes back later is not asked it again
// (one that answers it anyway, from an earlier stream, is dropped: the
// question is no longer its). The other requests (a modern child's
// question of the client's own call, the pool's roots/list) wait for
// the next stream as before.
func (hs *httpSession) takeBack(gen uint64) {
	hs.mu.Lock()
	if hs.stream || hs.park == nil || hs.parkGen != gen || !hs.s.alive() {
		hs.mu.Unlock()
		return // the client came back (if it left again, a later park counts), or its close answered the child
	}
	hs.park = nil
	var reqs []streamLine
	for _, e := range hs.waiting {
		if e.reqID != "" {
			reqs = append(reqs, e)
		}
	}
	hs.mu.Unlock()
	s := hs.s
	for _, e := range reqs { // other locks than hs.mu: not under it
		id, ok := jsonrpc.ParseUint([]byte(e.reqID))
		if !ok {
			continue
		}
		for _, b := range s.srv.backendsOf(s) {
			// Taken, it is no longer s's: an answer its client sends
			// late is dropped as an unknown one.
			if childID, ok := b.reqs.takeAnswer(id, s); ok {
				hs.answered(e.reqID)
				s.p.log.Debug("asking again a question an HTTP client left unread", "session", s.id, "server", s.srv.name, "method", e.method)
				b.askAgain(childID, e.line)
				break
			}
		}
	}
}

// answered notes the client's answer to the request id: no stream writes
// it again.
func (hs *httpSession) answered(id string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	mine := func(e streamLine) bool { return e.reqID == id }
	hs.asked = slices.DeleteFunc(hs.asked, mine)
	hs.dropWaitingLocked(mine)
}

// stillAsked reports whether s's client is still waited on for its answer
// to request id: a child's question, a modern child's question of a call
// (inputbridge.go), or the pool's roots/list. (A request of another kind
// is written once, and not again after its stream ends.)
func stillAsked(s *session, id string) bool {
	if n, ok := jsonrpc.ParseUint([]byte(id)); ok {
		if s.p.rounds.asks(n, s) {
			return true
		}
		for _, b := range s.srv.backendsOf(s) {
			if b.reqs.asks(n, s) {
				return true
			}
		}
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rootsAsk == id
}

func (h *httpFront) lookup(sid, name string) *httpSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	hs := h.sessions[sid]
	if hs != nil && !hs.s.alive() {
		delete(h.sessions, sid)
		return nil
	}
	if hs == nil || hs.s.srv.name != name {
		return nil
	}
	return hs
}

// expire ends legacy sessions idle for HTTPSessionIdle, and stateless
// ones their server's statelessLinger after their last exchange; it runs
// until the pool closes.
func (h *httpFront) expire() {
	t := time.NewTicker(expireEvery)
	defer t.Stop()
	for {
		select {
		case <-h.p.closing:
			return
		case <-t.C:
			h.expireIdle(h.p.clock.Now())
		}
	}
}

// expireIdle ends what is idle at now.
func (h *httpFront) expireIdle(now time.Time) {
	h.mu.Lock()
	var ending []*session
	for sid, hs := range h.sessions {
		if !hs.s.alive() {
			delete(h.sessions, sid)
			continue
		}
		if hs.idleAt(now, HTTPSessionIdle) {
			ending = append(ending, hs.s)
		}
	}
	type quietOne struct {
		st    *statelessHTTP
		after time.Duration
	}
	var quiet []quietOne
	for _, st := range h.stateless {
		if st.exchanges == 0 {
			quiet = append(quiet, quietOne{st: st})
		}
	}
	h.mu.Unlock()
	// Each server's linger, and whether a session holds a call for its
	// client's retry (it then stays), are asked without h.mu: they take
	// the server's and the request tables' locks.
	for i := range quiet {
		after, ok := quiet[i].st.s.srv.statelessLinger()
		quiet[i].after = after
		if !ok || h.p.holds.waitFor(quiet[i].st.s) {
			quiet[i].st = nil
		}
	}
	why := map[*session]error{}
	h.mu.Lock()
	for _, q := range quiet {
		st := q.st
		if st != nil && h.stateless[st.s.srv.name] == st && st.exchanges == 0 && now.Sub(st.lastUsed) >= q.after {
			delete(h.stateless, st.s.srv.name) // under h.mu: no exchange can take it any more
			ending = append(ending, st.s)
			why[st.s] = &statelessQuiet{since: st.lastUsed, after: q.after}
		}
	}
	h.mu.Unlock()
	closeAll(ending, func(s *session) error {
		if err := why[s]; err != nil {
			return err
		}
		return errHTTPSessionIdle
	})
}

var errHTTPSessionIdle = errors.New("HTTP session idle for " + HTTPSessionIdle.String())

// statelessQuiet is why a server's stateless session ends: no exchange
// since its last one ended, at since, for after. Its child's idle time
// counts from since (quietSince, server.leave): the session stayed for
// its clients' next requests, not as a client of its own.
type statelessQuiet struct {
	since time.Time
	after time.Duration
}

func (e *statelessQuiet) Error() string {
	return "no 2026-07-28 request for " + e.after.String()
}

// quietSince is when a session closed for reason last did something, for
// one that ended for having done nothing since (statelessQuiet); else
// zero: it leaves now.
func quietSince(reason error) time.Time {
	var q *statelessQuiet
	if errors.As(reason, &q) {
		return q.since
	}
	return time.Time{}
}

// touch notes a POST of the session: delta is +1 when one begins waiting
// for its answer, -1 when it stops, 0 for a message that waits for none.
func (hs *httpSession) touch(delta int) {
	hs.mu.Lock()
	hs.posts += delta
	hs.lastUsed = time.Now()
	hs.lastPost = hs.lastUsed
	hs.mu.Unlock()
}

// idleAt reports whether, at now, the session has had no stream and no
// POST waiting for longer than d.
func (hs *httpSession) idleAt(now time.Time, d time.Duration) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return !hs.stream && hs.posts == 0 && now.Sub(hs.lastUsed) > d
}

// sessionVersionRefused is the refusal of a legacy session's request
// (one with a session id) that may not be served: its
// MCP-Protocol-Version header names a revision the pool does not speak,
// which 2025-06-18 and later answer with 400; nil when it may. A request
// without the header is served (clients older than the header send
// none).
func sessionVersionRefused(r *http.Request, sid string) *httpRefusal {
	v := r.Header.Get(protocolVersionHeader)
	if sid == "" || v == "" || v == Modern || slices.Contains(legacyVersions, v) {
		return nil
	}
	return refuse(errSessionVersion, v, Modern, strings.Join(newestFirst(legacyVersions), ", "))
}

// protocolVersionHeader is the MCP-Protocol-Version header's name as
// net/http keeps it: looked up in this form, a header's name is not
// copied into its canonical one on every request.
const protocolVersionHeader = "Mcp-Protocol-Version"

// notLocal reports whether a request may not use the front door: a
// DNS-rebound name (the Host header). A browser's Origin is the gate's to
// judge: the listener's own, or one the user listed, wherever it is.
func notLocal(r *http.Request) bool {
	return !loopbackHost(r.Host)
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// modernMeta reports whether a request names its protocol version in
// _meta, as every 2026-07-28 request does.
func modernMeta(body []byte, m jsonrpc.Message) bool {
	return m.Meta.Present() && jsonrpc.Member(m.Meta.Of(body), metaProtocolVersion).Present()
}

func acceptsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// appendEvent appends line to b as an SSE message event.
func appendEvent(b, line []byte) []byte {
	b = append(b, "event: message\ndata: "...)
	b = append(b, line...)
	return append(b, "\n\n"...)
}

// httpError answers request id (nil: none known) with row kind of the
// error table, args filling its message: the row's HTTP status and a
// JSON-RPC error body.
func httpError(w http.ResponseWriter, id []byte, kind poolError, args ...any) {
	refuse(kind, args...).write(w, id)
}
