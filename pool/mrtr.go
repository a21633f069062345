package pool

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// A legacy child asks its client questions (sampling, elicitation, roots)
// with requests of its own, in the middle of a call. A 2026-07-28 client
// takes no such requests: its server answers the call with an
// InputRequiredResult and the client retries the call with the answers
// (Multi Round-Trip Requests). The pool bridges the two: it answers the
// modern client's call with resultType "input_required", holds the child's
// call where it is, and when the client retries with inputResponses and
// the requestState, it hands the answer to the child and the held call's
// result to the retry.

// mrtrMethods are the client requests 2026-07-28 lets a server answer with
// an InputRequiredResult.
var mrtrMethods = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// childQuestions map a child's request to the client capability it needs.
var childQuestions = map[string]string{
	"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots",
}

// questionNeeds is the client capability a child's question (method,
// with params) needs, as clientCaps.has names it: childQuestions', and
// for an elicitation its mode, "elicitation.form" (no mode is form mode)
// or "elicitation.url" (2025-11-25: a server must not ask in a mode its
// client did not declare; a mode the pool does not know, no client has).
// "" for a request that is no question.
func questionNeeds(method string, params []byte) string {
	capability := childQuestions[method]
	if capability == "elicitation" {
		m, _ := jsonrpc.String(params, jsonrpc.Member(params, "mode"))
		return "elicitation." + cmp.Or(m, "form")
	}
	return capability
}

// requiredCapability is the data of the -32021 a 2026-07-28 call gets
// for a question needing capability (questionNeeds) that its request did
// not declare, and the capability as the error's message names it.
func requiredCapability(capability string) (data map[string]any, name string) {
	required, name := map[string]any{capability: map[string]any{}}, capability
	if mode, ok := strings.CutPrefix(capability, "elicitation."); ok {
		required = map[string]any{"elicitation": map[string]any{mode: map[string]any{}}}
		if mode == "url" {
			mode = "URL"
		}
		name = "elicitation in " + mode + " mode"
	}
	return map[string]any{"requiredCapabilities": required}, name
}

// mrtrHold is one child question carried to a modern client: the client's
// call the child is working on, held until the client retries.
type mrtrHold struct {
	state   string   // the requestState the client must echo; unguessable
	owner   *session // the session whose call it holds: its share counts it (mrtrHolds.put)
	gate    *grant   // what the HTTP request whose call it holds was let in with: a rotation of its token ends the hold (revoke); nil off HTTP
	key     string   // the inputRequests key
	b       *backend
	p       *pending
	childID []byte // the child's request, answered with the client's input
	server  string
	method  string // the client's call, which the retry must repeat
	name    string
	created time.Time
	request json.RawMessage // the inputRequests entry, asked again if the retry lacks its answer

	// Guarded by b's request table: the held call's answer, if the child
	// finished it before the client came back (then the retry gets it at
	// once).
	final []byte
	// kept is closed with final set: a retry that finds the call ended a
	// moment before its answer was kept waits for it.
	kept chan struct{}
}

// mrtrHolds are the holds waiting for their retry, by requestState.
type mrtrHolds struct {
	mu  sync.Mutex
	m   map[string]*mrtrHold
	per map[*session]int // holds by owner, each at most its MaxSessionInFlight
	// puts counts puts since the last sweep of holds that need no retry
	// any more: one sweep per len(m)/2 puts keeps put's cost constant.
	puts int
	// n is len(m), for none: every tools/call, prompts/get and
	// resources/read asks, and almost always there is no hold to find.
	n atomic.Int64
}

// holdKeep is how long an ended call's answer waits for its retry. (A
// variable for tests.)
var holdKeep = 10 * time.Minute

// put registers x, unless its owner holds its share of calls waiting for
// a retry already (Options.MaxSessionInFlight): a held call has left the
// session's requests in flight, and a client that never comes back must
// not pile them up on the child without end. Nor does it register a hold
// whose request's token was rotated away (x.gate): the rotation may have
// looked for the old token's holds already (revoke), and its request,
// ended by the rotation, is not to be retried. Nor one for a stdio
// session that can send no retry (canRetry): its end may have looked for
// its holds already (endHolds). Now and then it forgets
// holds whose call ended unanswered or whose answer waited too long:
// clients need not come back.
func (h *mrtrHolds) put(x *mrtrHold) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m, h.per = map[string]*mrtrHold{}, map[*session]int{}
	}
	if h.puts++; h.puts > len(h.m)/2 {
		h.puts = 0
		for state, old := range h.m {
			if old.spent(time.Now()) {
				h.dropLocked(state)
			}
		}
	}
	if h.per[x.owner] >= x.owner.p.opts.MaxSessionInFlight || x.gate.rotatedAway() || !x.owner.canRetry() {
		return false
	}
	h.m[x.state] = x
	h.per[x.owner]++
	h.n.Store(int64(len(h.m)))
	return true
}

// spent reports whether, at now, x waits for no retry any more: its call
// ended unanswered, or its answer waited too long.
func (x *mrtrHold) spent(now time.Time) bool {
	done, kept := x.b.reqs.heldState(x)
	return done && (!kept || now.Sub(x.created) > holdKeep)
}

// waitFor reports whether owner holds a call that still waits for its
// client's retry: the session must not end under it (a person may take
// minutes to answer the question).
func (h *mrtrHolds) waitFor(owner *session) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.per[owner] == 0 {
		return false
	}
	now := time.Now()
	for _, x := range h.m {
		if x.owner == owner && !x.spent(now) {
			return true
		}
	}
	return false
}

// take removes and returns the hold for state: a requestState is good for
// one retry.
func (h *mrtrHolds) take(state string) *mrtrHold {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropLocked(state)
}

// takeIf is take for a client's retry: the hold for state, removed only
// when belongs says the retry is its call's (the same server, method and
// tool, prompt or URI), so that a retry naming another call (a client's
// mistake, or a guess) does not spend the state its own retry needs.
// held reports whether state names a hold at all.
func (h *mrtrHolds) takeIf(state string, belongs func(*mrtrHold) bool) (x *mrtrHold, held bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	x = h.m[state]
	if x == nil {
		return nil, false
	}
	if !belongs(x) {
		return nil, true
	}
	return h.dropLocked(state), true
}

func (h *mrtrHolds) dropLocked(state string) *mrtrHold {
	x := h.m[state]
	if x == nil {
		return nil
	}
	delete(h.m, state)
	if h.per[x.owner]--; h.per[x.owner] <= 0 {
		delete(h.per, x.owner)
	}
	h.n.Store(int64(len(h.m)))
	return x
}

// revoke takes out the holds of requests let in with another token than
// now, the HTTP front door's since its rotation, for the caller to end:
// what the old token let in ends with it.
func (h *mrtrHolds) revoke(now string) (old []*mrtrHold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for state, x := range h.m {
		if x.gate != nil && x.gate.token != now {
			old = append(old, h.dropLocked(state))
		}
	}
	return old
}

// revokeOf takes out the holds owned by owner, for the caller to end.
func (h *mrtrHolds) revokeOf(owner *session) (old []*mrtrHold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.per[owner] == 0 {
		return nil
	}
	for state, x := range h.m {
		if x.owner == owner {
			old = append(old, h.dropLocked(state))
		}
	}
	return old
}

// canRetry reports whether a retry of a call held for the session can
// still come: not from a stdio client whose input closed or whose session
// ended, as its retry could come on that connection alone. Over HTTP a
// retry is a request of its own, on any connection.
func (s *session) canRetry() bool { return s.transport != "stdio" || s.askable() }

// endHolds cancels at the child the calls held for the retries of the
// session's client once it can send none (canRetry: its input closed,
// or it ended), rather than keep them the 10 minutes (holdKeep) a person
// is given. The flag canRetry reads is set before the holds are looked
// for, and put looks at it under the holds' lock, so none is missed.
func (s *session) endHolds(reason string) {
	if s.canRetry() {
		return
	}
	for _, x := range s.p.holds.revokeOf(s) {
		x.b.cancel(x.p, reason)
	}
}

// none reports, without the lock, that no hold waits: a retry can only
// follow the answer that named its hold, and that answer is sent after
// put.
func (h *mrtrHolds) none() bool { return h.n.Load() == 0 }

// failUndeclared fails the one modern call a child's question can be
// for, only, whose own request did not declare what the question needs
// (routeQuestion): -32021 (2026-07-28: a server must not ask what the
// client did not declare), and the child is told so.
func (b *backend) failUndeclared(msg *jsonrpc.Message, childID []byte, only *pending) {
	data, name := requiredCapability(questionNeeds(msg.Method, msg.Params.Of(msg.Raw)))
	b.sendRaw(jsonrpc.AppendErrorResponse(nil, childID, newError(errClientUndeclared, false, "", name)))
	o := failure(endClientCannot, errMissingCapability, b.srv.name, name)
	o.extra = data
	o.reason = "the client did not declare " + name
	b.finish(only, o)
}

// carryAsMRTR answers a child's question through the modern client's
// call c that routeQuestion chose: an input_required result to the
// call's client, the call held for its retry; or the child gets -32006
// when the question cannot reach that client.
func (b *backend) carryAsMRTR(msg *jsonrpc.Message, childID []byte, c *caller) {
	p, owner, ex := c.p, c.sess, c.x
	x := &mrtrHold{state: newRequestState(), owner: owner, gate: gateOf(ex), key: "sb-" + strconv.FormatUint(b.p.nextID.Add(1), 10), b: b, p: p,
		childID: childID, server: b.srv.name, method: p.method, name: p.name, created: time.Now(),
		request: questionOf(msg), kept: make(chan struct{})}
	if !b.p.holds.put(x) {
		// The client has its share of calls waiting for its answers, or
		// its token was rotated away, or it closed its input or left:
		// this question cannot reach it.
		refusal := newError(errNoClient, false, "", msg.Method)
		if owner.noInput.Load() {
			refusal = newError(errAskedClosedInput, false, "")
		}
		b.sendRaw(jsonrpc.AppendErrorResponse(nil, childID, refusal))
		return
	}
	sess, ex, origID, ok := b.reqs.hold(x)
	if !ok {
		// The call ended (or another question took it) meanwhile.
		b.p.holds.take(x.state)
		b.sendRaw(jsonrpc.AppendErrorResponse(nil, childID, newError(errNoClient, false, "", msg.Method)))
		return
	}
	// The call no longer belongs to the session: its end must not cancel it.
	sess.deliverResponse(p, origID, ex, jsonrpc.AppendResponse(nil, origID, inputRequired(x)), 0, nil)
}

// urlElicitationForModern answers a 2026-07-28 client's call that a
// legacy child refused with -32042 until the user has been to its URLs:
// with input_required asking the client to send the user there
// (urlElicitationResponse), or, for a call whose request did not declare
// elicitation in URL mode, -32021 (2026-07-28: a server must not ask
// what the client did not declare). Both nil: the answer is not such a
// refusal of a call that can carry input_required; it goes as it is.
func (b *backend) urlElicitationForModern(method string, clientID []byte, caps clientCaps, msg *jsonrpc.Message) (line []byte, refusal *jsonrpc.Error) {
	if !msg.Error.Present() || !mrtrMethods[method] {
		return nil, nil
	}
	info, legacy := b.legacyInfo()
	if !legacy {
		return nil, nil
	}
	line, ok := urlElicitationResponse(msg, clientID, info)
	switch {
	case !ok:
		return nil, nil
	case !caps.elicitationURL:
		data, name := requiredCapability("elicitation.url")
		return nil, newErrorData(errMissingCapability, true, b.srv.name, data, b.srv.name, name)
	}
	return line, nil
}

// progressKey is a progress token (its JSON) as one token compares with
// another however it was written: a string by its value (escapes read),
// a number by its text. "" for none.
func progressKey(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return ""
		}
		return "s" + v
	}
	return "n" + string(raw)
}

// inputRequired is the InputRequiredResult carrying the child's question,
// naming the child in _meta as its other results do (modernResponse).
func inputRequired(x *mrtrHold) []byte {
	info, _ := x.b.legacyInfo()
	return inputRequiredResult(x.key, x.request, x.state, info)
}

func newRequestState() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return statePrefix + hex.EncodeToString(b[:])
}

// statePrefix begins every requestState the pool gives out; stateMark
// finds one in a message without parsing it.
const statePrefix = "sb1."

var stateMark = []byte(`"` + statePrefix)

// isPoolState reports whether state has the shape of one the pool gives
// out (newRequestState), as no child's state plausibly has.
func isPoolState(state string) bool {
	h, ok := strings.CutPrefix(state, statePrefix)
	if !ok || len(h) != 32 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// heldAnswerWait bounds how long a retry waits for the answer of a call
// that ended as it arrived (the ender keeps it right after ending it).
const heldAnswerWait = time.Second

// resumeMRTR takes a client's retry of a call the pool answered with
// input_required, carried by ex when not nil. It reports whether the
// request was such a retry (and is answered or under way).
func (s *session) resumeMRTR(msg *jsonrpc.Message, id []byte, ex *exchange) bool {
	if !mrtrMethods[msg.Method] || s.p.holds.none() && !bytes.Contains(msg.Raw, stateMark) {
		return false // and the params need no scan
	}
	params := msg.Params.Of(msg.Raw)
	state, ok := jsonrpc.String(params, jsonrpc.Member(params, "requestState"))
	if !ok {
		return false
	}
	name, _ := jsonrpc.String(params, jsonrpc.Member(params, "name"))
	if name == "" {
		name, _ = jsonrpc.String(params, jsonrpc.Member(params, "uri"))
	}
	x, held := s.p.holds.takeIf(state, func(x *mrtrHold) bool {
		return x.server == s.srv.name && x.method == msg.Method && x.name == name
	})
	switch {
	case x == nil && held:
		// Another call's state: the hold stays for its own retry.
		s.replyErrorTo(ex, id, newError(errNotOurState, false, ""))
		return true
	case x == nil && !isPoolState(state):
		return false // the child's own requestState
	case x == nil:
		// Spent, expired, or given out by a pool that has stopped. As a
		// new call it would run the legacy child's tool again, which may
		// have done its work before it asked.
		s.replyErrorTo(ex, id, newError(errUnknownState, false, ""))
		return true
	}
	s.noteModern(msg)
	b, p := x.b, x.p
	var answer json.RawMessage
	if r := jsonrpc.Member(params, "inputResponses"); r.Present() {
		answer = mustRaw(r.Of(params), x.key)
	}

	key := keyOf(id, ex)
	s.mu.Lock()
	if _, dup := s.inflight[key]; dup {
		s.mu.Unlock()
		s.replyErrorTo(ex, id, newError(errDuplicateID, false, "", id))
		return true
	}
	s.trackLocked(key, id, p) // origID becomes id below
	s.mu.Unlock()

	if final, done, mine := b.reqs.retryState(x); done && final == nil && mine {
		// Ended, its answer not kept yet: whoever ended it keeps it now
		// (or, cancelled, never will).
		t := time.NewTimer(heldAnswerWait)
		select {
		case <-x.kept:
		case <-t.C:
		}
		t.Stop()
	}
	caps := s.requestCaps(msg, ex)
	final, done := b.reqs.takeOver(x, s, id, ex, answer != nil, caps, progressTokenOf(msg))
	switch {
	case final != nil:
		slot := s.ending(p, id, ex)
		m, err := jsonrpc.Parse(final)
		if err != nil {
			s.answerError(ex, id, newError(errUnreadableHeld, false, ""), slot)
			return true
		}
		switch line, refusal := b.urlElicitationForModern(p.method, id, caps, &m); {
		case refusal != nil:
			s.answerError(ex, id, refusal, slot)
			return true
		case line != nil:
			s.answer(ex, line, 0, slot)
			return true
		}
		code := 0
		if m.Error.Present() {
			code, _ = errorFields(m.Error.Of(final))
		}
		info, _ := b.legacyInfo() // a held call is a legacy child's (carryAsMRTR)
		s.answer(ex, modernResponse(&m, p.method, id, info), code, slot)
	case done:
		s.answerError(ex, id, newError(errHeldCallEnded, true, s.srv.name), s.ending(p, id, ex))
	case answer == nil:
		// The client did not answer: ask again, as the spec prefers to
		// an error. The question is the same; only the state is new.
		slot := s.ending(p, id, ex)
		x.state, x.owner, x.gate = newRequestState(), s, gateOf(ex)
		if !s.p.holds.put(x) {
			switch {
			case x.gate.rotatedAway(): // as the retry came: its call ends as the rotation ended the token's others
				b.cancel(p, errTokenRotated.Error())
				s.answerError(ex, id, newError(errTokenRevoked, false, "", errTokenRotated), slot)
				return true
			case !s.canRetry(): // its stdio client left as the retry came: no other retry can come
				b.cancel(p, "the client can send no retry")
				s.answerError(ex, id, newError(errClosedInputAsked, true, s.srv.name, s.srv.name), slot)
				return true
			}
			// another question took the room this retry gave back
			s.answerError(ex, id, s.shareError(errSessionBusy, s.p.opts.MaxSessionInFlight), slot)
			return true
		}
		s.answer(ex, jsonrpc.AppendResponse(nil, id, inputRequired(x)), 0, slot)
	default:
		b.sendRaw(jsonrpc.AppendResponse(nil, x.childID, answer))
	}
	return true
}
