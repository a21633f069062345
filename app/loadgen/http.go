package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// HTTPOpener opens each session as a Streamable HTTP client of url (a
// 2025-06-18 client: initialize, then every message POSTed with its
// Mcp-Session-Id, each request on its own POST, as HTTP clients send
// them). Answers are handed to the driver as lines, in arrival order.
func HTTPOpener(url, token string, conns int) Opener {
	return httpOpener(url, token, conns, func(hs *httpStream) io.Writer { return hs })
}

// httpOpener opens each session as an httpStream whose lines writer
// turns into POSTs.
func httpOpener(url, token string, conns int, writer func(*httpStream) io.Writer) Opener {
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	return func(ctx context.Context, _ int) (*Stream, error) {
		pr, pw := io.Pipe()
		ctx, cancel := context.WithCancel(ctx)
		// A reader waiting for an answer that will not come (the run was
		// interrupted, the pool went away) gets the reason instead.
		context.AfterFunc(ctx, func() { pw.CloseWithError(fmt.Errorf("HTTP session: %w", context.Cause(ctx))) })
		hs := &httpStream{ctx: ctx, url: url, token: token, client: client, answers: pw}
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
	url     string
	token   string // the front door's bearer token, if it wants one
	client  *http.Client
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

// post sends one message of the session and returns the answer, or nil
// for none.
func (h *httpStream) post(body []byte) []byte {
	req, err := h.newPost(body)
	if err != nil {
		return nil
	}
	if h.sid != "" {
		req.Header.Set("Mcp-Session-Id", h.sid)
	}
	answer, header := h.do(req)
	if sid := header.Get("Mcp-Session-Id"); answer != nil && sid != "" {
		h.sid = sid
	}
	return answer
}

// newPost is a POST of body with the headers every client sends.
func (h *httpStream) newPost(body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	return req, nil
}

// do sends req and returns the answer and its headers; a nil answer for
// none (no response: the driver counts it as hung; or 202 Accepted).
func (h *httpStream) do(req *http.Request) ([]byte, http.Header) {
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, nil
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode == http.StatusAccepted {
		return nil, resp.Header
	}
	return answer, resp.Header
}

// end deletes the session.
func (h *httpStream) end() {
	if h.sid == "" {
		return
	}
	req, err := http.NewRequest(http.MethodDelete, h.url, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", h.sid)
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	if resp, err := h.client.Do(req); err == nil {
		resp.Body.Close()
	}
}
