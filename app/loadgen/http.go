package loadgen

import (
	"bytes"
	"context"
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
			answer := h.post(body)
			if answer == nil {
				h.noHandshake()
				continue
			}
			h.wg.Go(func() { h.deliver(answer) })
			continue
		}
		h.wg.Go(func() { h.deliver(h.post(body)) })
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
// sends and extra, and returns the answer: nil for none (no response,
// which the driver counts as hung; or 202 Accepted).
func (h *httpStream) post(body []byte, extra ...header) []byte {
	headers := append(h.headers(), header{"Content-Type", "application/json"}, header{"Accept", "application/json, text/event-stream"})
	r, err := h.conns.do(h.target, http.MethodPost, append(headers, extra...), body)
	if err != nil || r.status == http.StatusAccepted {
		return nil
	}
	if sid := r.header.Get("Mcp-Session-Id"); h.sid == "" && sid != "" {
		h.sid = sid
	}
	return r.body
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
