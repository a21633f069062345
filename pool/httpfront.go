package pool

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// HTTPSessionIdle is how long a legacy HTTP session may go without a
// request and without an open GET stream before the pool ends it: HTTP
// clients often vanish without a DELETE.
const HTTPSessionIdle = 30 * time.Minute

// HTTPHandler is the HTTP front door: POST /mcp/NAME (Streamable HTTP)
// for server NAME, both eras. A legacy client's initialize opens a pool
// session named by the Mcp-Session-Id header of the answer; a modern
// (2026-07-28) request, which carries its protocol version in _meta and
// no session id, is served statelessly, and closing its response ends
// (cancels) it. Requests whose Origin or Host is not loopback get 403.
// Call it once per pool; serve it on a loopback listener only.
func (p *Pool) HTTPHandler() http.Handler {
	h := &httpFront{p: p, sessions: map[string]*httpSession{}}
	p.wg.Go(h.expire)
	return h
}

// httpFront owns the legacy HTTP sessions, by Mcp-Session-Id.
type httpFront struct {
	p        *Pool
	opening  sync.Mutex // serialises open, so the session cap holds
	mu       sync.Mutex
	sessions map[string]*httpSession
}

// httpSession is a pool session whose messages go to HTTP responses: a
// request's answer (and, on an SSE response, the progress of it) to the
// POST that carried it; everything else to the GET stream, if one is
// open. Its dispatcher goroutine alone takes from the session's queue.
type httpSession struct {
	s *session

	mu       sync.Mutex
	waiters  map[string]*httpWaiter // by the request's id bytes
	tokens   map[string]*httpWaiter // by progress token bytes, SSE only
	stream   chan []byte            // the GET stream, or nil
	lastUsed time.Time
}

// httpWaiter is one POST waiting for its answer.
type httpWaiter struct {
	ch chan []byte // related notifications, then the response
}

func (h *httpFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.gate(w, r) { // httpauth.go
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/mcp/")
	if !ok || name == "" || strings.Contains(name, "/") {
		httpError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "not found: the MCP endpoint is /mcp/NAME")
		return
	}
	if _, err := h.p.server(name); err != nil {
		httpError(w, http.StatusNotFound, nil, jsonrpc.CodeBackendUnavailable, err.Error())
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	switch r.Method {
	case http.MethodPost:
		h.post(w, r, name, sid)
	case http.MethodGet, http.MethodDelete:
		if sid == "" { // 2026-07-28: no sessions, no GET stream
			w.Header().Set("Allow", http.MethodPost)
			httpError(w, http.StatusMethodNotAllowed, nil, jsonrpc.CodeInvalidRequest, r.Method+" needs an Mcp-Session-Id")
			return
		}
		hs := h.lookup(sid, name)
		if hs == nil {
			httpError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "unknown or expired session")
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
		httpError(w, http.StatusMethodNotAllowed, nil, jsonrpc.CodeInvalidRequest, r.Method+" is not allowed")
	}
}

// post serves one JSON-RPC message.
func (h *httpFront) post(w http.ResponseWriter, r *http.Request, name, sid string) {
	limit := h.p.opts.MaxMessageBytes
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		httpError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError, "read body: "+err.Error())
		return
	}
	if len(body) > limit {
		httpError(w, http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeMessageTooLarge,
			fmt.Sprintf("message exceeds the %d-byte limit", limit))
		return
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		httpError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported")
		return
	}
	msg, err := jsonrpc.Parse(body)
	if err != nil {
		code := jsonrpc.CodeInvalidRequest
		if errors.Is(err, jsonrpc.ErrParse) {
			code = jsonrpc.CodeParseError
		}
		httpError(w, http.StatusBadRequest, nil, code, err.Error())
		return
	}
	var hs *httpSession
	modern := false
	switch {
	case sid != "":
		if hs = h.lookup(sid, name); hs == nil {
			httpError(w, http.StatusNotFound, msg.IDBytes(), jsonrpc.CodeInvalidRequest, "unknown or expired session: initialize again")
			return
		}
	case msg.Kind == jsonrpc.KindRequest && msg.Method == "initialize" && !modernHTTP(r, body, msg):
		if hs, sid, err = h.open(name); err != nil {
			httpError(w, http.StatusServiceUnavailable, msg.IDBytes(), jsonrpc.CodeBackendUnavailable, err.Error())
			return
		}
		w.Header().Set("Mcp-Session-Id", sid)
	case msg.Kind != jsonrpc.KindRequest:
		// 2026-07-28 defines no client notifications over HTTP; a
		// legacy one without its session is dropped too.
		w.WriteHeader(http.StatusAccepted)
		return
	case modernHTTP(r, body, msg):
		if bad := validateModern(r.Header, body, msg); bad != nil {
			bad.write(w, msg.IDBytes())
			return
		}
		modern = true
		if hs, err = h.newHTTPSession(name); err != nil {
			httpError(w, http.StatusServiceUnavailable, msg.IDBytes(), jsonrpc.CodeBackendUnavailable, err.Error())
			return
		}
		// One pool session per stateless request, ended with it: a
		// response closed early cancels the request at the child.
		defer hs.s.close(nil)
	default:
		httpError(w, http.StatusBadRequest, msg.IDBytes(), jsonrpc.CodeInvalidRequest,
			"missing Mcp-Session-Id: initialize first, or send a 2026-07-28 request with _meta")
		return
	}

	if msg.Kind != jsonrpc.KindRequest {
		hs.touch()
		hs.s.handle(body)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	id := string(msg.IDBytes())
	token := progressToken(body, msg)
	sse := token != "" && acceptsSSE(r)
	wt := &httpWaiter{ch: make(chan []byte, 16)}
	if !hs.wait(id, token, sse, wt) {
		httpError(w, http.StatusBadRequest, msg.IDBytes(), jsonrpc.CodeInvalidRequest, "a request with this id is already in flight")
		return
	}
	defer hs.unwait(id, token, wt)
	hs.s.handle(body)

	var flusher http.Flusher
	for {
		select {
		case line := <-wt.ch:
			if m, err := jsonrpc.Parse(line); err == nil && m.Kind == jsonrpc.KindResponse {
				if flusher != nil {
					writeEvent(w, flusher, line)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if modern {
					w.WriteHeader(modernStatus(line))
				}
				_, _ = w.Write(line)
				return
			}
			if flusher == nil { // the first related message: switch to SSE
				f, ok := w.(http.Flusher)
				if !ok {
					continue
				}
				flusher = f
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Cache-Control", "no-cache")
				w.Header().Set("X-Accel-Buffering", "no") // 2026-07-28: proxies must not hold events back
				w.WriteHeader(http.StatusOK)
			}
			writeEvent(w, flusher, line)
		case <-r.Context().Done():
			// 2026-07-28: a closed response is the cancellation (the
			// stateless session's deferred close does it). A legacy
			// client's disconnect cancels nothing: its answer is dropped.
			return
		case <-hs.s.closed:
			httpError(w, http.StatusServiceUnavailable, msg.IDBytes(), jsonrpc.CodeBackendUnavailable, "the session ended")
			return
		}
	}
}

// listen is a legacy client's GET stream: the session's messages that
// answer no POST.
func (h *httpFront) listen(w http.ResponseWriter, r *http.Request, hs *httpSession) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpError(w, http.StatusInternalServerError, nil, jsonrpc.CodeInternalError, "streaming unsupported")
		return
	}
	ch := make(chan []byte, 64)
	hs.mu.Lock()
	if hs.stream != nil {
		hs.mu.Unlock()
		httpError(w, http.StatusConflict, nil, jsonrpc.CodeInvalidRequest, "this session already has a GET stream")
		return
	}
	hs.stream = ch
	hs.mu.Unlock()
	defer func() {
		hs.mu.Lock()
		hs.stream = nil
		hs.lastUsed = time.Now()
		hs.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	for {
		select {
		case line := <-ch:
			writeEvent(w, flusher, line)
		case <-r.Context().Done():
			return
		case <-hs.s.closed:
			return
		}
	}
}

// open starts a legacy HTTP session with a fresh, unguessable id.
func (h *httpFront) open(name string) (*httpSession, string, error) {
	// One open at a time: the cap holds under a flood of initializes.
	h.opening.Lock()
	defer h.opening.Unlock()
	if err := h.makeRoom(name); err != nil {
		return nil, "", err
	}
	hs, err := h.newHTTPSession(name)
	if err != nil {
		return nil, "", err
	}
	s := hs.s
	var b [16]byte
	_, _ = rand.Read(b[:])
	sid := hex.EncodeToString(b[:])
	h.mu.Lock()
	h.sessions[sid] = hs
	h.mu.Unlock()
	h.p.wg.Go(func() {
		<-s.closed
		h.mu.Lock()
		delete(h.sessions, sid)
		h.mu.Unlock()
	})
	return hs, sid, nil
}

// errTooManySessions refuses a legacy HTTP session past the cap when none
// of the server's sessions is idle.
var errTooManySessions = errors.New("too many HTTP sessions for this server, none idle: end one (DELETE) and retry")

// makeRoom keeps a server's legacy HTTP sessions under the cap
// (Options.MaxHTTPSessions): clients rarely DELETE, and each session
// otherwise lives 30 idle minutes. The oldest idle one (no stream, no
// request waiting) is expired first.
func (h *httpFront) makeRoom(name string) error {
	h.mu.Lock()
	var oldest *httpSession
	var oldestID string
	n := 0
	for sid, hs := range h.sessions {
		if hs.s.srv.name != name {
			continue
		}
		n++
		if hs.idleSince(0) && (oldest == nil || hs.lastUsedAt().Before(oldest.lastUsedAt())) {
			oldest, oldestID = hs, sid
		}
	}
	if n >= h.p.opts.MaxHTTPSessions && oldest != nil {
		delete(h.sessions, oldestID)
	}
	h.mu.Unlock()
	if n < h.p.opts.MaxHTTPSessions {
		return nil
	}
	if oldest == nil {
		return errTooManySessions
	}
	oldest.s.close(errors.New("expired: the server's HTTP session cap was reached and this session was the oldest idle one"))
	return nil
}

func (hs *httpSession) lastUsedAt() time.Time {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.lastUsed
}

// newHTTPSession opens a pool session of server name whose messages go to
// HTTP responses, and starts its dispatcher. The session can be sent a
// request only while its GET stream is open (streaming), which it knows
// from the start.
func (h *httpFront) newHTTPSession(name string) (*httpSession, error) {
	hs := &httpSession{waiters: map[string]*httpWaiter{}, tokens: map[string]*httpWaiter{}, lastUsed: time.Now()}
	s, err := h.p.newSession(name, sessionSetup{transport: "http", receiver: hs.streaming})
	if err != nil {
		return nil, err
	}
	hs.s = s // before hs is shared: only its dispatcher and its requests see it
	h.p.wg.Go(hs.dispatch)
	return hs, nil
}

// streaming reports whether the session's GET stream is open: only then
// can the client be sent a request (sampling, elicitation).
func (hs *httpSession) streaming() bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.stream != nil
}

func (h *httpFront) lookup(sid, name string) *httpSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	hs := h.sessions[sid]
	if hs == nil || hs.s.srv.name != name || !hs.s.alive() {
		return nil
	}
	return hs
}

// expire ends legacy sessions idle for HTTPSessionIdle; it runs until the
// pool closes.
func (h *httpFront) expire() {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-h.p.closing:
			return
		case <-t.C:
		}
		h.mu.Lock()
		var idle []*httpSession
		for _, hs := range h.sessions {
			if hs.idleSince(HTTPSessionIdle) {
				idle = append(idle, hs)
			}
		}
		h.mu.Unlock()
		for _, hs := range idle {
			hs.s.close(errors.New("HTTP session idle for " + HTTPSessionIdle.String()))
		}
	}
}

// dispatch hands each message of the session to the HTTP response it
// belongs to; what belongs to none is dropped. It ends with the session.
func (hs *httpSession) dispatch() {
	for {
		select {
		case line := <-hs.s.out:
			hs.route(line)
		case <-hs.s.closed:
			return
		}
	}
}

func (hs *httpSession) route(line []byte) {
	m, err := jsonrpc.Parse(line)
	if err != nil {
		return
	}
	hs.mu.Lock()
	var to chan []byte
	switch {
	case m.Kind == jsonrpc.KindResponse:
		if wt := hs.waiters[string(m.IDBytes())]; wt != nil {
			to = wt.ch
		}
	case m.Method == "notifications/progress":
		params := m.Params.Of(line)
		if tok := jsonrpc.Member(params, "progressToken"); tok.Present() {
			if wt := hs.tokens[string(tok.Of(params))]; wt != nil {
				to = wt.ch
			}
		}
	default:
		if sub := subscriptionOf(line, m); sub != nil { // a subscriptions/listen's stream
			if wt := hs.waiters[string(sub)]; wt != nil {
				to = wt.ch
			}
		}
	}
	if to == nil && m.Kind != jsonrpc.KindResponse {
		to = hs.stream
	}
	hs.mu.Unlock()
	if to == nil {
		return
	}
	select {
	case to <- line:
	default: // a reader that cannot keep up loses notifications, never answers (16 > 1 answer)
	}
}

func (hs *httpSession) wait(id, token string, sse bool, wt *httpWaiter) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.waiters[id] != nil {
		return false
	}
	hs.waiters[id] = wt
	if sse {
		hs.tokens[token] = wt
	}
	hs.lastUsed = time.Now()
	return true
}

func (hs *httpSession) unwait(id, token string, wt *httpWaiter) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.waiters[id] == wt {
		delete(hs.waiters, id)
	}
	if hs.tokens[token] == wt {
		delete(hs.tokens, token)
	}
	hs.lastUsed = time.Now()
}

func (hs *httpSession) touch() {
	hs.mu.Lock()
	hs.lastUsed = time.Now()
	hs.mu.Unlock()
}

func (hs *httpSession) idleSince(d time.Duration) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.stream == nil && len(hs.waiters) == 0 && time.Since(hs.lastUsed) > d
}

// notLocal says why a request may not use the front door: a browser page
// from another origin, or a DNS-rebound name (the Host header).
func notLocal(r *http.Request) string {
	if !loopbackHost(r.Host) {
		return "forbidden: Host " + r.Host + " is not a loopback name"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !loopbackHost(u.Host) {
			return "forbidden: Origin " + o + " is not local"
		}
	}
	return ""
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
	if !m.Params.Present() {
		return false
	}
	params := m.Params.Of(body)
	meta := jsonrpc.Member(params, "_meta")
	return meta.Present() && jsonrpc.Member(meta.Of(params), metaProtocolVersion).Present()
}

// progressToken is the request's params._meta.progressToken, as bytes.
func progressToken(body []byte, m jsonrpc.Message) string {
	if !m.Params.Present() {
		return ""
	}
	params := m.Params.Of(body)
	meta := jsonrpc.Member(params, "_meta")
	if !meta.Present() {
		return ""
	}
	tok := jsonrpc.Member(meta.Of(params), "progressToken")
	if !tok.Present() {
		return ""
	}
	return string(tok.Of(meta.Of(params)))
}

func acceptsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

func writeEvent(w io.Writer, f http.Flusher, line []byte) {
	_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", line)
	f.Flush()
}

// httpError answers with an HTTP status and a JSON-RPC error body.
func httpError(w http.ResponseWriter, status int, id []byte, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(jsonrpc.AppendErrorResponse(nil, id, &jsonrpc.Error{Code: code, Message: msg}))
}
