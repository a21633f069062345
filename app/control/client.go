package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/app/leaks"
	"github.com/switchboard-mcp/switchboard/app/localsock"
	"github.com/switchboard-mcp/switchboard/pool"
)

// Client talks to the running pool's control API on its socket. Every
// call returns ErrNoPool when no pool listens there (no socket, or nobody
// listening on it), and another error when the socket cannot be reached.
type Client struct {
	hc *http.Client
}

// NewClient is a client of the control socket at sock. Nothing is dialled
// until a call. Each call is bounded by its own rule (question, act).
func NewClient(sock string) *Client {
	return &Client{hc: &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := localsock.Dial(ctx, sock)
			if err != nil {
				return nil, dialError(sock, err)
			}
			return c, nil
		}},
	}}
}

// dialError is the error of a failed dial of the control socket at sock:
// ErrNoPool only when no pool is there (no socket, or nobody listening
// on it). Any other failure (a pool too busy to take the connection, one
// stopping or upgrading, a socket that may not be opened) says a pool may
// run: a caller that went on without it (listing and killing leaks
// without its list of its own children) would take its children for
// leaks.
func dialError(sock string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w (no control socket at %s)", ErrNoPool, sock)
	}
	return fmt.Errorf("dial the control socket %s: %w", sock, err)
}

// Status is GET /v1/status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, &st)
	return st, err
}

// Leaks is GET /v1/leaks.
func (c *Client) Leaks(ctx context.Context) ([]leaks.Leak, error) {
	var ls []leaks.Leak
	err := c.do(ctx, http.MethodGet, "/v1/leaks", nil, &ls)
	return ls, err
}

// Config is GET /v1/config, decoded into v.
func (c *Client) Config(ctx context.Context, v any) error {
	return c.do(ctx, http.MethodGet, "/v1/config", nil, v)
}

// Kill is POST /v1/kill.
func (c *Client) Kill(ctx context.Context, req KillRequest) ([]KillResult, error) {
	var resp KillResponse
	err := c.do(ctx, http.MethodPost, "/v1/kill", req, &resp)
	return resp.Results, err
}

// ShowDashboard is POST /v1/dashboard; an error that Is ErrHeadless when
// the pool runs without one.
func (c *Client) ShowDashboard(ctx context.Context) error {
	err := c.do(ctx, http.MethodPost, "/v1/dashboard", struct{}{}, &struct{}{})
	if errors.Is(err, ErrConflict) {
		return ErrHeadless
	}
	return err
}

// HTTPToken is GET /v1/http-token: the token the running pool's front
// door takes. A pool too old to be asked gives an error that Is
// errors.ErrUnsupported.
func (c *Client) HTTPToken(ctx context.Context) (string, error) {
	var v struct {
		Token string `json:"token"`
	}
	ctx, cancel := question(ctx, "/v1/http-token")
	defer cancel()
	err := unanswered(ctx, c.do(ctx, http.MethodGet, "/v1/http-token", nil, &v))
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound {
		return "", fmt.Errorf("%w: the running Switchboard cannot be asked for its HTTP token (%v)", errors.ErrUnsupported, err)
	}
	return v.Token, err
}

// RotateHTTPToken is POST /v1/http-token/rotate; it returns the new token.
func (c *Client) RotateHTTPToken(ctx context.Context) (string, error) {
	var v struct {
		Token string `json:"token"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/http-token/rotate", struct{}{}, &v)
	return v.Token, err
}

// RestartServer is POST /v1/restart; an error that Is
// pool.ErrUnknownServer for a name the config lacks.
func (c *Client) RestartServer(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, "/v1/restart", ServerAction{Server: name}, &struct{}{})
}

// StopServer is POST /v1/stop; errors as RestartServer's.
func (c *Client) StopServer(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, "/v1/stop", ServerAction{Server: name}, &struct{}{})
}

// Upgrade is POST /v1/upgrade; an error that Is ErrConflict when the pool
// cannot take one now.
func (c *Client) Upgrade(ctx context.Context, binary string) (UpgradeAccepted, error) {
	var acc UpgradeAccepted
	err := c.do(ctx, http.MethodPost, "/v1/upgrade", UpgradeRequest{Binary: binary}, &acc)
	return acc, err
}

// MakeWay is POST /v1/make-way: the pool stops for the tray app that
// asks, which takes its place with the environment it answers. An error
// that Is ErrConflict says why it does not.
func (c *Client) MakeWay(ctx context.Context, req MakeWayRequest) (MakeWayAccepted, error) {
	var acc MakeWayAccepted
	err := c.do(ctx, http.MethodPost, "/v1/make-way", req, &acc)
	return acc, err
}

// Quit is POST /v1/quit: the pool stops as the tray's Quit does; its
// process exits once it has. An error that Is ErrConflict says why it
// does not.
func (c *Client) Quit(ctx context.Context) (QuitAccepted, error) {
	var acc QuitAccepted
	err := c.do(ctx, http.MethodPost, "/v1/quit", struct{}{}, &acc)
	return acc, err
}

// Stacks is GET /v1/stacks: the running pool's goroutine stacks, copied
// to w as they arrive.
func (c *Client) Stacks(ctx context.Context, w io.Writer) error {
	ctx, cancel := question(ctx, "/v1/stacks")
	defer cancel()
	resp, err := c.send(ctx, http.MethodGet, "/v1/stacks", nil, time.Time{})
	if err != nil {
		return unanswered(ctx, err)
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return unanswered(ctx, err)
}

// do sends body (GET: none) and decodes a 200 answer into v: a question
// (GET) or an action (POST, act).
func (c *Client) do(ctx context.Context, method, path string, body, v any) error {
	if method != http.MethodGet {
		return c.act(ctx, path, body, v)
	}
	ctx, cancel := question(ctx, path)
	defer cancel()
	resp, err := c.send(ctx, method, path, body, time.Time{})
	if err != nil {
		return unanswered(ctx, err)
	}
	defer resp.Body.Close()
	return unanswered(ctx, json.NewDecoder(resp.Body).Decode(v))
}

// QuestionTimeout bounds a question to the pool (status, config, leaks,
// stacks), and the wait for it to take an action (act): a pool that works
// answers at once, and one that is stuck must not hold the user at the
// command it runs to find out why. A var for tests.
var QuestionTimeout = 15 * time.Second

// actionTimeout bounds an action the pool has taken (an upgrade checks
// the new binary first, a kill gives the process 2 s to exit).
const actionTimeout = time.Minute

// deadlineHeader carries an action's deadline: the wall-clock time (RFC
// 3339) after which the pool must not begin it. A time, not a timeout: a
// pool stopped (SIGSTOP) or stuck reads the request only when it runs
// again, and must then see that its client gave up on it.
const deadlineHeader = "Switchboard-Deadline"

// honoursHeader, in an answer, says the pool honours deadlineHeader: it
// refuses an action it reads after the deadline. A pool from before
// deadlines sets none, and may carry out an action its client gave up on.
const honoursHeader = "Switchboard-Honours-Deadline"

// act sends an action (POST path) and decodes a 200 answer into v. It
// first asks the pool whether it honours deadlines (ping), and sends the
// action once it has the answer. The pool answers 102 Processing as it
// reads the action, and refuses it, not done, after the deadline it
// carries (action, server side). With no answer within QuestionTimeout
// (or ctx's deadline, when sooner) the client gives up: nothing was done,
// and the pool will not do it later, as it was not sent or the pool
// honours its deadline; a pool from before deadlines may still do it.
// The deadline is an eighth of that wait earlier, time for the 102 of a
// request read just before it to come back. An action the pool has taken
// is waited for up to actionTimeout.
func (c *Client) act(ctx context.Context, path string, body, v any) error {
	sent := time.Now()
	wait := QuestionTimeout
	if d, ok := ctx.Deadline(); ok && d.Sub(sent) < wait {
		wait = d.Sub(sent)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, actionTimeout,
		fmt.Errorf("%w: it took POST %s and gave no answer within %s; it may have been done", ErrUnresponsive, path, actionTimeout))
	defer cancel()
	ctx, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	var mayDoLater atomic.Bool // set before the action goes to a pool that does not honour its deadline
	untaken := time.AfterFunc(wait, func() {
		what := "nothing was done, and the pool will not do it later"
		if mayDoLater.Load() {
			what = "it was not done yet, but the pool may still do it later: it is from before actions carried a deadline"
		}
		giveUp(fmt.Errorf("%w: it did not take POST %s within %s; %s", ErrUnresponsive, path, wait, what))
	})
	defer untaken.Stop()
	honours, err := c.ping(ctx)
	if err != nil {
		return unanswered(ctx, err)
	}
	mayDoLater.Store(!honours)
	// The first byte of an answer (the 102, or an answer from a pool
	// older than deadlines) means the pool has the request: no giving up
	// after that (a Stop that comes too late finds ctx given up).
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotFirstResponseByte: func() { untaken.Stop() }})
	resp, err := c.send(ctx, http.MethodPost, path, body, sent.Add(wait-wait/8))
	if err != nil {
		return unanswered(ctx, err)
	}
	defer resp.Body.Close()
	return unanswered(ctx, json.NewDecoder(resp.Body).Decode(v))
}

// ping is GET /v1/ping: whether the pool honours an action's deadline,
// which its answer says (honoursHeader); a pool from before deadlines
// answers 404, without it.
func (c *Client) ping(ctx context.Context) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://switchboard/v1/ping", nil)
	if err != nil {
		return false, err
	}
	// The action goes on a connection of its own: on a Windows named
	// pipe (under Wine) one kept from the ping failed the action with
	// EOF, and a POST is not retried.
	req.Close = true
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(err, ErrNoPool) {
			return false, ErrNoPool
		}
		return false, err
	}
	resp.Body.Close()
	return resp.Header.Get(honoursHeader) != "", nil
}

// question is ctx bounded by QuestionTimeout, whose expiry says the pool
// did not answer path.
func question(ctx context.Context, path string) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, QuestionTimeout,
		fmt.Errorf("%w: no answer to GET %s within %s", ErrUnresponsive, path, QuestionTimeout))
}

// unanswered is err, or the reason the question's context ended when
// that is why it failed (the pool did not answer).
func unanswered(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrUnresponsive) {
			return cause
		}
	}
	return err
}

// send sends body (GET: none) and returns a 200 answer for the caller to
// read and close; another status becomes an apiError with the server's
// message. A deadline that is not zero is sent in deadlineHeader.
func (c *Client) send(ctx context.Context, method, path string, body any, deadline time.Time) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://switchboard"+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if !deadline.IsZero() {
		req.Header.Set(deadlineHeader, deadline.UTC().Format(time.RFC3339Nano))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(err, ErrNoPool) {
			return nil, ErrNoPool
		}
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var e struct{ Error string }
	if json.Unmarshal(msg, &e) == nil && e.Error != "" {
		return nil, &apiError{status: resp.StatusCode, msg: e.Error}
	}
	return nil, &apiError{status: resp.StatusCode, msg: resp.Status + ": " + string(bytes.TrimSpace(msg))}
}

// apiError is a refusal from the control API: the server's message, and
// the status the CLI branches on (409 Is ErrConflict, 404
// pool.ErrUnknownServer).
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func (e *apiError) Is(target error) bool {
	switch e.status {
	case http.StatusConflict:
		return target == ErrConflict
	case http.StatusNotFound:
		return target == pool.ErrUnknownServer
	}
	return false
}
