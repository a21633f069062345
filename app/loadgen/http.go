package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// HTTPOpener opens each session as a Streamable HTTP client of url (a
// 2025-06-18 client: initialize, then every message POSTed with its
// Mcp-Session-Id, each request on its own POST, as HTTP clients send
// them). Answers are handed to the driver as lines, in arrival order.
func HTTPOpener(url, token string) Opener {
	return httpOpener(url, token, func(hs *httpStream) io.Writer { return hs })
}

// httpOpener opens each session as an httpStream whose lines writer
// turns into POSTs. Each session has connections of its own, as each
// client process does: as many as it has requests in flight.
func httpOpener(url, token string, writer func(*httpStream) io.Writer) Opener {
	return func(ctx context.Context, _ int) (*Stream, error) {
		target, err := parseTarget(url)
		if err != nil {
			return nil, err
		}
		pr, pw := io.Pipe()
		ctx, cancel := context.WithCancel(ctx)
		hs := &httpStream{ctx: ctx, target: target, token: token, answers: pw}
		// A reader waiting for an answer that will not come (the run was
		// interrupted, the pool went away) gets the reason instead, and
		// POSTs still waiting for an answer end with their connections.
		context.AfterFunc(ctx, func() {
			pw.CloseWithError(fmt.Errorf("HTTP session: %w", context.Cause(ctx)))
			hs.conns.closeAll()
		})
		return &Stream{W: writer(hs), R: pr, Close: func() error {
			pr.Close() // late answers have no reader any more
			cancel()   // nor do unanswered POSTs
			hs.wg.Wait()
			hs.end()
			return nil
		}}, nil
	}
}

// httpStream turns the driver's request lines into POSTs.
type httpStream struct {
	ctx     context.Context
	target  target
	token   string // the front door's bearer token, if it wants one
	conns   connPool
	sid     string // set by the initialize answer, before any other POST
	wg      sync.WaitGroup
	mu      sync.Mutex // one answer line at a time into answers
	answers *io.PipeWriter
}

// Write takes whole lines (the driver writes one message per call).
func (h *httpStream) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimSpace(p), []byte("\n")) {
		body := append([]byte(nil), line...)
		if h.sid == "" {
			// The initialize: its POST now, for the session id every
			// later POST needs; its answer to the reader, which is the
			// caller, after this returns.
			answer, failed := h.post(body)
			if answer == nil || failed {
				h.noHandshake()
				continue
			}
			h.wg.Go(func() { h.deliver(answer) })
			continue
		}
		h.wg.Go(func() {
			answer, _ := h.post(body)
			h.deliver(answer)
		})
	}
	return len(p), nil
}

// errNoHandshake ends a stream whose first POST got no answer: the
// driver's handshake would otherwise wait for it for ever.
var errNoHandshake = errors.New("the handshake's POST got no answer (is the server up?)")

// noHandshake ends the stream for the driver, whose handshake got no
// answer: because the run was interrupted, or with errNoHandshake.
func (h *httpStream) noHandshake() {
	err := errNoHandshake
	if h.ctx.Err() != nil {
		err = context.Cause(h.ctx)
	}
	h.answers.CloseWithError(err)
}

// deliver hands an answer to the driver.
func (h *httpStream) deliver(answer []byte) {
	if answer == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, _ = h.answers.Write(append(bytes.TrimSpace(answer), '\n'))
}

// post sends one message of the session, with the headers every client
// sends and extra, and returns the answer: nil for none (202 Accepted).
// A request that got no JSON-RPC answer (its connection broke: the server
// went away or restarted; or the server answered with an HTTP error of
// its own) is answered here with a JSON-RPC error under its id, and
// failed is set: the driver counts an error, as a client that knows its
// request failed, not a request that hangs. Nothing is answered once the
// run is over.
func (h *httpStream) post(body []byte, extra ...header) (answer []byte, failed bool) {
	headers := append(h.headers(), header{"Content-Type", "application/json"}, header{"Accept", "application/json, text/event-stream"})
	r, err := h.conns.do(h.target, http.MethodPost, append(headers, extra...), body)
	switch {
	case err != nil && h.ctx.Err() != nil:
		return nil, true
	case err != nil:
		return failedAnswer(body, "POST failed: "+err.Error()), true
	case r.status == http.StatusAccepted:
		return nil, false
	case r.status/100 != 2 && !answers(r.body, body):
		return failedAnswer(body, fmt.Sprintf("HTTP %d: %.200s", r.status, bytes.TrimSpace(r.body))), true
	}
	if sid := r.header.Get("Mcp-Session-Id"); h.sid == "" && sid != "" {
		h.sid = sid
	}
	return r.body, false
}

// failedAnswer is the JSON-RPC error the load tool gives a request that
// got no answer, for why; nil when body is not a request.
func failedAnswer(body []byte, why string) []byte {
	id := idOf(body)
	if id == nil {
		return nil
	}
	msg, _ := json.Marshal("switchboard-bench: " + why)
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32603,"message":` + string(msg) + `}}`)
}

// answers reports whether reply is a JSON-RPC answer to the request body.
func answers(reply, body []byte) bool {
	id := idOf(reply)
	return id != nil && bytes.Equal(id, idOf(body))
}

// idOf is the id of a JSON-RPC message, nil when it has none.
func idOf(msg []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &m) != nil || string(m.ID) == "null" {
		return nil
	}
	return m.ID
}

// headers are the session's token and id.
func (h *httpStream) headers() []header {
	hs := make([]header, 0, 6)
	if h.token != "" {
		hs = append(hs, header{"Authorization", "Bearer " + h.token})
	}
	if h.sid != "" {
		hs = append(hs, header{"Mcp-Session-Id", h.sid})
	}
	return hs
}

// end deletes the session, on a connection of its own: the session's
// went with its context.
func (h *httpStream) end() {
	if h.sid != "" {
		_, _ = doOnce(h.target, http.MethodDelete, h.headers(), nil, 5*time.Second)
	}
}
