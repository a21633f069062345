package pool

import (
	"errors"
	"fmt"
	"maps"
	"net/http"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// Every error the pool answers itself, to a client or to a child, is a
// row of one table: its JSON-RPC code, its message, and what its data
// says. An error about a client's request says in its data whether that
// request may have run on a child (mayHaveExecuted: it had reached one),
// whether sending it again may work (retryable), and the server; the
// caller says whether it may have run, the row says the rest, so no two
// ways of ending a request can disagree about it (TestErrorTable). Only a
// stop reason after which the server takes no requests (finalStop: it was
// removed or disabled) makes an error that quotes it not retryable.
//
// A request the HTTP front door refuses itself, before a session has it,
// gets an HTTP status as well: its row says which (httpError, refuse). A
// row whose message is "%v" says what its one argument carries: its
// message is that error's, well-formed where it is made.

// poolError names a row of the table.
type poolError uint8

const (
	// Ending a client's request.
	errTimeout             poolError = iota + 1 // the child did not answer within the request timeout
	errTimeoutRetired                           // the same, on a child whose server was removed or disabled meanwhile
	errChildDied                                // the child exited with the request written: never re-sent
	errChildStopped                             // the pool stopped the child with the request written: never re-sent
	errServerFailed                             // a crash loop: the server fails fast until restarted
	errServerStopped                            // the server stopped (by the user, idle, reconfigured) before answering
	errPoolRestarting                           // the pool stopped and handed the session back before the child answered
	errListenRestarted                          // an open subscriptions/listen whose pool died: its stream ended with it
	errCancelledByUser                          // the user cancelled it in Switchboard (Pool.Cancel)
	errAnswerTooLarge                           // the child's answer was over the size limit
	errMissingCapability                        // the child needs a capability the client did not declare (2026-07-28)
	errServerBusy                               // the server has its limit of requests waiting
	errHeldCallEnded                            // a held call (MRTR) ended before the client's retry came back
	errQuestionsUnanswered                      // a client did not answer a child's questions in time (MRTR, either way)
	errQuestionRefused                          // a legacy client answered a modern child's question with an error
	errCannotAsk                                // the child's question needs what this legacy client did not declare
	errNoStreamToAsk                            // the child's question is for a legacy HTTP client with no GET stream open
	errCannotRetry                              // the call could not be retried with the client's answers
	errTooManyRounds                            // a modern child asked for input more rounds than any call needs
	errUnaskedTask                              // a child other clients share answered with a task, though none was asked
	errClosedInputAsked                         // a legacy client that closed its input was to answer a modern child's questions

	// Refusing a client's request before it reaches a child.
	errSessionBusy     // the session has its share of requests in flight
	errSessionBytes    // the session's requests in flight hold its share of bytes
	errSessionSubs     // the session holds its share of resource subscriptions
	errStatelessBusy   // errSessionBusy of a server's stateless session, which its stateless clients share
	errStatelessBytes  // errSessionBytes of a server's stateless session
	errStatelessSubs   // errSessionSubs of a server's stateless session
	errListenTooLarge  // a subscriptions/listen asks for more resources than one listen may hold
	errHeldForRoots    // the session's messages held until it answers roots/list hold its share of bytes
	errHeldNotes       // and its notifications held, its share of them
	errDuplicateID     // the id is already in flight in this session
	errMessageTooLarge // the client's message was over the size limit
	errNotOurState     // a requestState of another call
	errUnknownState    // a requestState of the pool's that it holds no call for
	errUnreadableHeld  // a held call's kept answer could not be read back
	errBadParams       // params the pool reads itself (initialize, subscriptions/listen) are malformed
	errNotInitialized  // a request of neither era: no initialize before it, no 2026-07-28 _meta in it

	errParse             // a line that is not JSON
	errInvalid           // JSON that is not a JSON-RPC message the pool accepts
	errServerUnavailable // the child could not be started or handshaken: why
	errServerDisabled    // the server is disabled, or not started for a value it lacks (ServerConfig.NotStarted)
	errNotConfigured     // the server is no longer in the config
	errCannotStart       // the child cannot be started at all (no working directory): fails fast until restarted
	errStartTimeout      // the child did not finish its handshake within the request timeout
	errServerGone        // the server stopped: what its later requests get
	errRootsChildren     // the server runs its limit of children, one per set of roots, each with sessions
	errNoLogging         // a legacy client's logging/setLevel for a modern child that offers no logging
	errNoTasks           // a tasks/* request for a child other clients share, whose tasks are not offered
	errSessionChildren   // a share "session" server runs its limit of children, one for each session

	// Refused at the HTTP front door, with an HTTP status of its own.
	errNotLocal           // the Host is not a loopback name (DNS rebinding)
	errOriginRefused      // a browser's Origin is neither the listener's nor one the user listed
	errNoToken            // no bearer token, or not the one the front door asks for
	errNotJSON            // a POST body that is not application/json (a "simple" cross-site request)
	errTokenRevoked       // the token the request was let in with was rotated away while it was served
	errNoEndpoint         // a path that is not /mcp/NAME
	errNoServer           // no server of that name, or the pool closed
	errShuttingDown       // the pool is closing
	errSessionVersion     // a legacy session's request names a revision the pool does not serve
	errNeedsSessionID     // a GET or DELETE with no Mcp-Session-Id (2026-07-28 has no sessions)
	errUnknownSession     // an Mcp-Session-Id the front door does not hold
	errMethodNotAllowed   // a method other than POST, GET and DELETE
	errBodiesBusy         // the pool is reading its limit of large bodies at once
	errReadBody           // the body could not be read
	errBatch              // a JSON-RPC batch
	errNoSession          // the server's session could not be opened for the request
	errNoSessionID        // a legacy request with no Mcp-Session-Id that is not initialize
	errPostSessionEnded   // the session ended before the POST's answer
	errFellBehind         // the client fell behind its response, or its session's responses hold too much unread
	errNoStreaming        // the response cannot be flushed: no event stream
	errStreamOpen         // a second GET stream of one session
	errNoParamsMeta       // a 2026-07-28 request with no params object to hold its _meta
	errNoMeta             // a 2026-07-28 request with no _meta object
	errMetaLacks          // its _meta lacks a member every request carries
	errRemovedMethod      // a method 2026-07-28 removed
	errBadLogLevel        // its _meta's log level names no level
	errUnsupportedVersion // a revision the pool does not serve per request
	errHeaderMissing      // a header that mirrors the body is missing
	errHeaderMismatch     // a header that mirrors the body says another value
	errParamAmbiguous     // an argument an Mcp-Param header mirrors is given twice, or in two spellings
	errParamNotInBody     // an Mcp-Param header for an argument the body does not have

	// Answering a child's request to a client.
	errNoClient         // no connected client can answer it
	errAskedClientLeft  // the client asked disconnected before answering
	errClientUndeclared // the client did not declare the capability (2026-07-28)
	errAskedClosedInput // the client asked closed its input: it cannot answer
	errAskAmbiguous     // calls of several clients were in flight: the question may be any one's
)

// errorRow is one row of the table.
type errorRow struct {
	code int
	// format is the message, with fmt verbs for the caller's args.
	// notRun, when set, is the message for a request that never reached
	// a child.
	format, notRun string
	// aboutRequest: the data says mayHaveExecuted (as the caller says),
	// retryable and server.
	aboutRequest bool
	retryable    bool
	// status is the HTTP status the front door answers it with when it
	// refuses a request itself (httpError, refuse); 0: only a session
	// answers it.
	status int
}

var errorTable = [...]errorRow{
	errTimeout: {code: jsonrpc.CodeRequestTimeout, format: "server %q did not answer %s within %s",
		aboutRequest: true, retryable: true},
	errTimeoutRetired: {code: jsonrpc.CodeRequestTimeout, format: "server %q did not answer %s within %s, and takes no more requests: %v",
		aboutRequest: true, retryable: false},
	errChildDied: {code: jsonrpc.CodeBackendDied, format: "server %q exited (%s) while handling %s; it was not re-sent because it may have executed%s",
		aboutRequest: true, retryable: true},
	errChildStopped: {code: jsonrpc.CodeBackendDied, format: "server %q was stopped (%v) while handling %s; it was not re-sent because it may have executed",
		aboutRequest: true, retryable: true},
	errServerFailed: {code: jsonrpc.CodeBackendUnavailable, format: "server %q failed: it exited %d times in %s (last: %s)%s",
		aboutRequest: true, retryable: false},
	errServerStopped: {code: jsonrpc.CodeBackendUnavailable, format: "server %q stopped (%v) before answering %s",
		aboutRequest: true, retryable: true},
	errPoolRestarting: {code: jsonrpc.CodeBackendDied,
		format:       "Switchboard restarted while %[2]s was in flight on server %[1]q; it was not re-sent because it may have executed",
		notRun:       "Switchboard restarted before %[2]s reached server %[1]q; it did not run, send it again",
		aboutRequest: true, retryable: true},
	errListenRestarted: {code: jsonrpc.CodeBackendDied,
		format:       "Switchboard restarted and this subscriptions/listen stream on server %q ended with it (changes since then were not sent): listen again",
		aboutRequest: true, retryable: true},
	errCancelledByUser: {code: jsonrpc.CodeRequestCancelled, format: "request cancelled in Switchboard (%[2]s on server %[1]q)",
		aboutRequest: true, retryable: true},
	errAnswerTooLarge: {code: jsonrpc.CodeMessageTooLarge, format: "server %q answered with %d bytes or more, over the %d-byte limit",
		aboutRequest: true, retryable: false},
	errMissingCapability: {code: codeMissingCapability, format: "Missing required client capability: %[2]s",
		aboutRequest: true, retryable: false},
	errServerBusy: {code: jsonrpc.CodeOverloaded, format: "server %q has %d requests waiting; refusing more",
		aboutRequest: true, retryable: true},
	errHeldCallEnded: {code: jsonrpc.CodeRequestCancelled, format: "the call ended while waiting for the client's input; call again",
		aboutRequest: true, retryable: true},
	errQuestionsUnanswered: {code: jsonrpc.CodeRequestTimeout, format: "the client did not answer server %q's questions within %s",
		aboutRequest: true, retryable: true},
	errQuestionRefused: {code: jsonrpc.CodeNoClient, format: "the client refused the server's question: %[2]s",
		aboutRequest: true, retryable: false},
	errCannotAsk: {code: jsonrpc.CodeNoClient, format: "server %q needs %s, which this client did not declare",
		aboutRequest: true, retryable: false},
	errNoStreamToAsk: {code: jsonrpc.CodeNoClient, format: "server %q needs %s, and this client has no GET stream open to be asked it on: open one and call again",
		aboutRequest: true, retryable: true},
	errCannotRetry: {code: jsonrpc.CodeInternalError, format: "cannot retry the call with the client's answers",
		aboutRequest: true, retryable: false},
	errTooManyRounds: {code: jsonrpc.CodeInternalError, format: "server %q asked for input %d times in one call; the call was given up",
		aboutRequest: true, retryable: false},
	errUnaskedTask: {code: jsonrpc.CodeInternalError, format: "server %q answered %s with a task, though none was asked: it is shared by other clients, whose tasks this client would see and they its, so Switchboard passes none of its tasks on (share \"session\" gives each session a child of its own, and its tasks)",
		aboutRequest: true, retryable: false},
	errClosedInputAsked: {code: jsonrpc.CodeNoClient, format: "server %q asked this client questions, and the client closed its input: it cannot answer them",
		aboutRequest: true, retryable: true},

	errSessionBusy: {code: jsonrpc.CodeOverloaded,
		format: "this session has %d requests in flight, its limit: wait for answers before sending more (other sessions are not affected)"},
	errSessionBytes: {code: jsonrpc.CodeOverloaded,
		format: "this session's requests in flight hold %d bytes and this one has %d, past its limit of %d: wait for answers before sending more (other sessions are not affected)"},
	errSessionSubs: {code: jsonrpc.CodeOverloaded,
		format: "this session holds %d subscriptions (resources and listens) and this request asks for %d more, past its limit of %d: unsubscribe or end a listen before subscribing to more (other sessions are not affected)"},
	errStatelessBusy: {code: jsonrpc.CodeOverloaded,
		format: "stateless requests to server %q have %d requests in flight, their limit, which every stateless client of the server shares: wait for answers before sending more (sessions are not affected)"},
	errStatelessBytes: {code: jsonrpc.CodeOverloaded,
		format: "stateless requests to server %q in flight hold %d bytes and this one has %d, past their limit of %d, which every stateless client of the server shares: wait for answers before sending more (sessions are not affected)"},
	errStatelessSubs: {code: jsonrpc.CodeOverloaded,
		format: "stateless requests to server %q hold %d subscriptions (listens and their resources) and this request asks for %d more, past their limit of %d, which every stateless client of the server shares: end a listen before listening to more (sessions are not affected)"},
	errListenTooLarge: {code: jsonrpc.CodeInvalidParams,
		format: "subscriptions/listen asks for %d resources, more than the %d one listen may hold (a quarter of a session's %d subscriptions): listen to fewer"},
	errHeldForRoots: {code: jsonrpc.CodeOverloaded,
		format: "this session sent %d bytes that wait for its answer to the pool's roots/list, and this message has %d, past its limit of %d: answer roots/list (other sessions are not affected)"},
	errHeldNotes: {code: jsonrpc.CodeOverloaded,
		format: "this session sent %d notifications that wait for its answer to the pool's roots/list, its limit: answer roots/list (other sessions are not affected)"},
	errDuplicateID:     {code: jsonrpc.CodeInvalidRequest, format: "request id %s is already in flight in this session"},
	errMessageTooLarge: {code: jsonrpc.CodeMessageTooLarge, format: "message exceeds the %d-byte limit", status: http.StatusRequestEntityTooLarge},
	errNotOurState:     {code: jsonrpc.CodeInvalidParams, format: "requestState does not belong to this request"},
	errUnknownState: {code: jsonrpc.CodeInvalidParams,
		format: "requestState is not one Switchboard holds a call for: it was used already, its call ended, or it was given out before Switchboard restarted; send the call again without it"},
	errUnreadableHeld:    {code: jsonrpc.CodeInternalError, format: "the held call's answer is unreadable"},
	errBadParams:         {code: jsonrpc.CodeInvalidParams, format: "%s: %v"},
	errNotInitialized:    {code: jsonrpc.CodeInvalidParams, format: "invalid params: %s came with no initialize before it and no 2026-07-28 _meta: a legacy client sends initialize first; a 2026-07-28 request names its protocolVersion and clientCapabilities in params._meta"},
	errParse:             {code: jsonrpc.CodeParseError, format: "%v", status: http.StatusBadRequest},               // what the parser says: a jsonrpc.ErrParse, with where
	errInvalid:           {code: jsonrpc.CodeInvalidRequest, format: "%v", status: http.StatusBadRequest},           // what the parser says: a jsonrpc.ErrInvalid, with what
	errServerUnavailable: {code: jsonrpc.CodeBackendUnavailable, format: "%v", aboutRequest: true, retryable: true}, // what the child's start or handshake failed with
	// An ErrDisabled (disabledError: disabled, or not started for a
	// value it lacks), and an ErrUnknownServer (removedError, or
	// Pool.server's: no such server, and why the config does not load).
	// Not until the config changes: sending it again cannot work.
	errServerDisabled: {code: jsonrpc.CodeBackendUnavailable, format: "%v", aboutRequest: true, retryable: false},
	errNotConfigured:  {code: jsonrpc.CodeBackendUnavailable, format: "%v", aboutRequest: true, retryable: false},
	errCannotStart: {code: jsonrpc.CodeBackendUnavailable,
		format:       "server %q cannot start: %v; it is not tried again until it is restarted or its config changes",
		aboutRequest: true, retryable: false},
	errStartTimeout: {code: jsonrpc.CodeRequestTimeout, format: "server %q did not finish starting within %s%s; nothing was sent to it, try again",
		aboutRequest: true, retryable: true},
	errServerGone: {code: jsonrpc.CodeBackendUnavailable, format: "server %q stopped: %v", aboutRequest: true, retryable: true},
	errRootsChildren: {code: jsonrpc.CodeOverloaded,
		format: "server %q runs its limit of children (%d), one for each set of client roots, and every one has sessions: requests with other roots are refused until one of them is left (sessions with those roots are not affected)"},

	errNoLogging:        {code: jsonrpc.CodeMethodNotFound, format: "method not found: server %q offers no logging"},
	errNoTasks:          {code: jsonrpc.CodeMethodNotFound, format: "method not found: server %q is shared by other clients, whose tasks this client would see and they its, so Switchboard offers none of its tasks (share \"session\" gives each session a child of its own, and its tasks)"},
	errNoClient:         {code: jsonrpc.CodeNoClient, format: "no connected client can answer %s"},
	errAskedClientLeft:  {code: jsonrpc.CodeNoClient, format: "the client that was asked disconnected"},
	errClientUndeclared: {code: jsonrpc.CodeNoClient, format: "the client did not declare %s"},
	errAskedClosedInput: {code: jsonrpc.CodeNoClient, format: "the client that was asked closed its input: it cannot answer"},
	errAskAmbiguous: {code: jsonrpc.CodeNoClient, format: "no client was asked: server %q asked %s while calls of several clients were in flight on its shared child, " +
		"and a legacy server does not say which call asks (\"share\": \"session\" gives each session its own child)"},
	errSessionChildren: {code: jsonrpc.CodeOverloaded,
		format: "server %q runs its limit of children (%d), one for each session (share \"session\"): a new session is refused until one of those sessions ends (the sessions that have a child are not affected)"},

	errNotLocal: {status: http.StatusForbidden, code: jsonrpc.CodeInvalidRequest, format: "forbidden: Host %s is not a loopback name"},
	errOriginRefused: {status: http.StatusForbidden, code: jsonrpc.CodeInvalidRequest,
		format: "forbidden: Origin %s is not this server's (list it in http.allowedOrigins to allow it)"},
	errNoToken: {status: http.StatusUnauthorized, code: jsonrpc.CodeInvalidRequest,
		format: "unauthorized: send Authorization: Bearer <token> (`switchboard http-token` prints it)"},
	errNotJSON: {status: http.StatusUnsupportedMediaType, code: jsonrpc.CodeInvalidRequest,
		format: "unsupported media type: a POST body must be application/json"},
	// It carries errTokenRotated.
	errTokenRevoked: {status: http.StatusUnauthorized, code: jsonrpc.CodeInvalidRequest, format: "unauthorized: %v"},
	errNoEndpoint:   {status: http.StatusNotFound, code: jsonrpc.CodeInvalidRequest, format: "not found: the MCP endpoint is /mcp/NAME"},
	// What Pool.server says: no such server (which are configured, and
	// why the config does not load), the server disabled (disabledError),
	// or ErrPoolClosed.
	errNoServer: {status: http.StatusNotFound, code: jsonrpc.CodeBackendUnavailable, format: "%v"},
	// It carries errPoolClosing.
	errShuttingDown: {status: http.StatusServiceUnavailable, code: jsonrpc.CodeBackendUnavailable, format: "%v"},
	errSessionVersion: {status: http.StatusBadRequest, code: jsonrpc.CodeInvalidRequest,
		format: "bad request: unsupported MCP-Protocol-Version %q (supported: %s, %s)"},
	errNeedsSessionID:   {status: http.StatusMethodNotAllowed, code: jsonrpc.CodeInvalidRequest, format: "%s needs an Mcp-Session-Id"},
	errUnknownSession:   {status: http.StatusNotFound, code: jsonrpc.CodeInvalidRequest, format: "unknown or expired session: initialize again"},
	errMethodNotAllowed: {status: http.StatusMethodNotAllowed, code: jsonrpc.CodeInvalidRequest, format: "%s is not allowed"},
	// It carries readBody's errBodyBudget, with how much was read.
	errBodiesBusy: {status: http.StatusServiceUnavailable, code: jsonrpc.CodeOverloaded, format: "%v"},
	errReadBody:   {status: http.StatusBadRequest, code: jsonrpc.CodeParseError, format: "read body: %v"},
	errBatch:      {status: http.StatusBadRequest, code: jsonrpc.CodeInvalidRequest, format: "JSON-RPC batches are not supported"},
	// What opening the session failed with: what Pool.server says (as
	// errNoServer), the server removed meanwhile (removedError), its
	// legacy sessions at their cap (errTooManySessions).
	errNoSession: {status: http.StatusServiceUnavailable, code: jsonrpc.CodeBackendUnavailable, format: "%v"},
	errNoSessionID: {status: http.StatusBadRequest, code: jsonrpc.CodeInvalidRequest,
		format: "missing Mcp-Session-Id: initialize first, or send a 2026-07-28 request with _meta"},
	errPostSessionEnded: {status: http.StatusServiceUnavailable, code: jsonrpc.CodeBackendUnavailable, format: "the session ended"},
	// Why the response was cut short: its queue's cut (relatedQueue: its
	// client fell behind, errSlowHTTPClient), or its session's responses
	// over their budget (heldBudget.over).
	errFellBehind:    {status: http.StatusServiceUnavailable, code: jsonrpc.CodeOverloaded, format: "%v"},
	errNoStreaming:   {status: http.StatusInternalServerError, code: jsonrpc.CodeInternalError, format: "streaming unsupported"},
	errStreamOpen:    {status: http.StatusConflict, code: jsonrpc.CodeInvalidRequest, format: "this session already has a GET stream"},
	errNoParamsMeta:  {status: http.StatusBadRequest, code: jsonrpc.CodeInvalidParams, format: "invalid params: a 2026-07-28 request needs params._meta"},
	errNoMeta:        {status: http.StatusBadRequest, code: jsonrpc.CodeInvalidParams, format: "invalid params: missing _meta"},
	errMetaLacks:     {status: http.StatusBadRequest, code: jsonrpc.CodeInvalidParams, format: "invalid params: _meta lacks %s"},
	errRemovedMethod: {status: http.StatusNotFound, code: jsonrpc.CodeMethodNotFound, format: "method not found: %s is not part of %s"},
	errBadLogLevel:   {status: http.StatusBadRequest, code: jsonrpc.CodeInvalidParams, format: "invalid params: %s %s is not a log level (%s)"},
	errUnsupportedVersion: {status: http.StatusBadRequest, code: codeUnsupportedVersion,
		format: "unsupported protocol version %q: this endpoint serves %s per request (legacy clients initialize first)"},
	errHeaderMissing:  {status: http.StatusBadRequest, code: codeHeaderMismatch, format: "header mismatch: missing %s header (body says %q)"},
	errHeaderMismatch: {status: http.StatusBadRequest, code: codeHeaderMismatch, format: "header mismatch: %s header %q does not match body value %q"},
	errParamAmbiguous: {status: http.StatusBadRequest, code: codeHeaderMismatch,
		format: "header mismatch: %s is ambiguous (a key given twice, or in two spellings)"},
	errParamNotInBody: {status: http.StatusBadRequest, code: codeHeaderMismatch, format: "header mismatch: %s header %q, but the body has no %s"},
}

// newError builds row kind's error. ran says whether the request it is
// about may have run on a child; server names the server in its data;
// args fill the message. extra adds data members.
func newError(kind poolError, ran bool, server string, args ...any) *jsonrpc.Error {
	return newErrorData(kind, ran, server, nil, args...)
}

func newErrorData(kind poolError, ran bool, server string, extra map[string]any, args ...any) *jsonrpc.Error {
	row := errorTable[kind]
	format := row.format
	if !ran && row.notRun != "" {
		format = row.notRun
	}
	e := &jsonrpc.Error{Code: row.code, Message: fmt.Sprintf(format, args...)}
	if row.aboutRequest || extra != nil {
		data := make(map[string]any, len(extra)+3)
		if row.aboutRequest {
			data["retryable"] = row.retryable && !quotesFinalStop(args)
			data["mayHaveExecuted"] = ran
			data["server"] = server
		}
		for k, v := range extra {
			data[k] = v
		}
		e.Data = data
	}
	return e
}

// asRPCError is err, about a request of server's that did not reach a
// child, as the error a client gets: a table row already, the server
// disabled or gone, or the backend's own failure (a child that could not
// start, a handshake that failed) as "unavailable".
func asRPCError(err error, server string) *jsonrpc.Error {
	var e *jsonrpc.Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, ErrDisabled):
		return newError(errServerDisabled, false, server, err)
	case errors.Is(err, ErrUnknownServer):
		return newError(errNotConfigured, false, server, err)
	}
	return newError(errServerUnavailable, false, server, err)
}

// mayHaveExecuted is e, a refusal of a request that did not reach a
// child, for one whose call did (a retry with its client's answers): an
// error about a request says the call may have executed.
func mayHaveExecuted(e *jsonrpc.Error) *jsonrpc.Error {
	data, ok := e.Data.(map[string]any)
	if _, about := data["mayHaveExecuted"]; !ok || !about {
		return e
	}
	c := *e
	data = maps.Clone(data)
	data["mayHaveExecuted"] = true
	c.Data = data
	return &c
}

// disabledError is why server cfg takes no sessions or requests:
// disabled in the config, or not started for a value it lacks.
func disabledError(cfg ServerConfig) error {
	if cfg.NotStarted != "" {
		return &notStartedError{name: cfg.Name, why: cfg.NotStarted}
	}
	return fmt.Errorf("%w: %q", ErrDisabled, cfg.Name)
}

// notStartedError is a server the config holds back although the user
// did not disable it (ServerConfig.NotStarted): it says why, not
// "disabled". It is an ErrDisabled.
type notStartedError struct{ name, why string }

func (e *notStartedError) Error() string {
	return fmt.Sprintf("server %q is not started: %s", e.name, e.why)
}

func (e *notStartedError) Is(target error) bool { return target == ErrDisabled }

// removedError is a server removed from the config, to a session that
// was in it.
func removedError(name string) error {
	return fmt.Errorf("%w %q (it was removed from the config)", ErrUnknownServer, name)
}

// removedEnd is why a removed server's session ended, as its shim prints
// it (the Farewell, Welcome.Ended): it names the server, and is an
// errServerRemoved.
type removedEnd struct{ server string }

func (e removedEnd) Error() string {
	return fmt.Sprintf("the session ended: server %q was removed from the configuration", e.server)
}

func (e removedEnd) Unwrap() error { return errServerRemoved }

// finalStop is a reason a server's children are stopped for after which
// the server takes no requests: sending one again cannot work.
type finalStop struct{ msg string }

func (e *finalStop) Error() string { return e.msg }

// disabledStop is the reason the children of server cfg, disabled by a
// reload, are stopped for.
func disabledStop(cfg ServerConfig) error {
	if cfg.NotStarted != "" {
		return &finalStop{msg: "the server can no longer be started: " + cfg.NotStarted}
	}
	return &finalStop{msg: "the server was disabled in the config"}
}

// quotesFinalStop reports whether one of an error's args is a finalStop.
func quotesFinalStop(args []any) bool {
	for _, a := range args {
		var f *finalStop
		if err, ok := a.(error); ok && errors.As(err, &f) {
			return true
		}
	}
	return false
}
