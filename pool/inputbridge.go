package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// The other direction of mrtr.go: a 2026-07-28 child answers a call with
// resultType "input_required", but a legacy client knows no such result;
// it takes the server's questions as requests of their own. The pool asks
// the legacy client each question as a server-to-client request, collects
// the answers, and retries the call at the child with inputResponses and
// the child's requestState; the client sees one call and one result.
// A roots/list among the questions is never the client's: the pool
// answers it from the roots it gives a legacy child (roots.go).
//
// The call keeps one timeout over its rounds, the one it came with: a
// question a person answers (an elicitation, a sampling: personAnswers)
// pauses it, as a legacy child's question pauses its calls', bounded by
// holdKeep or what was left of it, whichever is longer, and the retry
// goes on with what was left (requestTable.carry).
// The round ends with its call: cancelled, or its client gone.
//
// A round that ends without the client's answers withdraws the questions
// still open at the client (MCP: the sender of a request may cancel it),
// so that no form or prompt waits there for an answer nobody will use;
// its call's row in history, in flight while the client is asked (as the
// snapshot lists it), ends with the round: ok when the answers came, else
// as the round ended (the user's cancel: cancelled, as any cancelled call).

// inputRound is one input_required answer being turned into questions to
// a legacy client.
type inputRound struct {
	b      *backend
	sess   *session
	call   *pending        // the call the child answered with input_required
	origID []byte          // the client's id of the call
	to     *exchange       // the HTTP POST waiting for the call's answer; nil: the session's output
	state  json.RawMessage // the child's requestState, echoed back; nil if none
	pid    int             // the child that asked
	asking string          // the methods of the questions the client is asked, for the snapshot (infos)
	start  bridgedCall     // the client's call, over all its rounds, for the snapshot

	// The call's timeout (which its errors name), what was left of it
	// when the child asked, and when that was; person: a question waits
	// for a person, and the call's timeout with it.
	timeout, remaining time.Duration
	asked              time.Time
	person             bool

	done Event // the call's EventRequestDone for this round, as settle made it: emitted as the round ends answered and the call goes on (retry)

	// sending is held by the asker from before the round is shared until
	// its questions are delivered (a delivery never waits), so that an
	// end withdraws them after them, never before.
	sending sync.Mutex

	timer  *time.Timer
	mu     sync.Mutex
	left   map[uint64]string // question id -> inputRequests key, not yet answered
	answer map[string]json.RawMessage
	over   bool
	posed  bool // its questions go to the client: an end withdraws those left
}

// bridgedCall is a legacy client's call as its rounds of a 2026-07-28
// child's questions go: each round's retry is a request of its own, but
// the snapshot shows when the client's call came and was first written,
// and a user's cancel finds it under the pool id it was last listed with
// (session.bridged, Pool.Cancel).
type bridgedCall struct {
	received, written time.Time
	listed            uint64 // the pool id of the round its client's answers ended
}

// inputRounds are the rounds waiting for a legacy client's answers, by the
// pool id of each question.
type inputRounds struct {
	mu sync.Mutex
	m  map[uint64]*inputRound
}

func (r *inputRounds) add(id uint64, x *inputRound) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[uint64]*inputRound{}
	}
	r.m[id] = x
}

// of is the round of call p that waits for its client's answers, if any.
func (r *inputRounds) of(p *pending) *inputRound {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.m {
		if x.call == p {
			return x
		}
	}
	return nil
}

func (r *inputRounds) take(id uint64) *inputRound {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.m[id]
	delete(r.m, id)
	return x
}

// askedOf lists the rounds that wait for sess's answers.
func (r *inputRounds) askedOf(sess *session) (rounds []*inputRound) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.m {
		if x.sess == sess && !slices.Contains(rounds, x) {
			rounds = append(rounds, x)
		}
	}
	return rounds
}

// ofCall is the round that waits for its client's answers for the call
// whose last round had pool id id (what the snapshot lists: infos), if
// any.
func (r *inputRounds) ofCall(id uint64) *inputRound {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.m {
		if x.call.id == id {
			return x
		}
	}
	return nil
}

// goneOn returns the pool id a legacy client's call goes on under, now
// that its client answered the round it was listed with as poolID (0 if
// none of sessions has such a call).
func goneOn(sessions []*session, poolID uint64) uint64 {
	for _, s := range sessions {
		s.mu.Lock()
		for key, c := range s.bridged {
			if p := s.inflight[key]; c.listed == poolID && p != nil {
				s.mu.Unlock()
				return p.id
			}
		}
		s.mu.Unlock()
	}
	return 0
}

// waitReason is the stateReason of a call whose questions wait for its
// client's answers, as the snapshot shows it; asking names them.
const waitReason = "waiting for the client's answer to %s: the server asked it during this call"

// infos lists the calls whose questions wait for their clients' answers,
// in flight as the snapshot shows them: no child has them now (the child
// answered their last round with the questions), but their clients wait
// for their answers, and a user may cancel them (Pool.Cancel).
func (r *inputRounds) infos(now time.Time) []RequestInfo {
	r.mu.Lock()
	var rounds []*inputRound
	for _, x := range r.m {
		if !slices.Contains(rounds, x) {
			rounds = append(rounds, x)
		}
	}
	r.mu.Unlock()
	out := make([]RequestInfo, 0, len(rounds))
	for _, x := range rounds {
		x.mu.Lock()
		over := x.over
		x.mu.Unlock()
		if over {
			continue
		}
		p := x.call
		out = append(out, RequestInfo{PoolID: p.id, Session: x.sess.id, Server: x.b.srv.name, Method: p.method, Name: p.name,
			OriginalID: string(x.origID), PID: x.pid, ReceivedAt: x.start.received, AgeMs: now.Sub(x.start.received).Milliseconds(),
			WrittenToChild: true, WrittenAt: x.start.written, StateReason: fmt.Sprintf(waitReason, x.asking)})
	}
	return out
}

// takeFrom takes the round of question id if from was asked it: an
// answer from another session leaves it where it is, for its own
// client's answer (and for an end of the round meanwhile to take).
func (r *inputRounds) takeFrom(id uint64, from *session) *inputRound {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.m[id]
	if x == nil || x.sess != from {
		return nil
	}
	delete(r.m, id)
	return x
}

// asks reports whether sess was asked question id of a round that still
// waits for its answer.
func (r *inputRounds) asks(id uint64, sess *session) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.m[id]
	return x != nil && x.sess == sess
}

// maxInputRounds bounds the input_required rounds of one call: real
// servers ask a few times at most.
const maxInputRounds = 32

// askLegacyClient turns a modern child's input_required answer to a
// legacy client's call into questions to that client. It reports whether
// it took the answer (false: deliver it as it is), or the error the
// client gets instead when it cannot answer the questions. Once it took
// it, the round records the call's end of this round as it ends: done as
// the call goes on (retry), else settle's record of the call's end
// (endCall).
func (b *backend) askLegacyClient(p *pending, e ended, msg *jsonrpc.Message, done *Event) (asked bool, refusal *jsonrpc.Error) {
	sess, origID := e.sess, e.origID
	if e.modern || e.held != nil || sess == nil || !msg.Result.Present() {
		return false, nil
	}
	b.mu.Lock()
	modernChild := b.hs != nil && b.hs.era == EraModern
	b.mu.Unlock()
	if !modernChild { // the common case: no scan of the result
		return false, nil
	}
	res := msg.Result.Of(msg.Raw)
	if t, _ := jsonrpc.String(res, jsonrpc.Member(res, "resultType")); t != "input_required" {
		return false, nil
	}
	var r struct {
		InputRequests map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"inputRequests"`
		RequestState json.RawMessage `json:"requestState"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return false, nil
	}
	if p.inputRounds >= maxInputRounds {
		// A child that asks again and again (the pool answers roots/list
		// itself, so no client paces it) must not loop for ever.
		return false, newError(errTooManyRounds, true, b.srv.name, b.srv.name, p.inputRounds)
	}
	for _, q := range r.InputRequests {
		if q.Method == "roots/list" {
			continue
		}
		switch declared, receives := sess.answerable(q.Method, q.Params); {
		case !declared:
			return false, newError(errCannotAsk, true, b.srv.name, b.srv.name, q.Method)
		case !receives: // as a legacy child's question with nobody to ask: at once, not at the timeout
			return false, newError(errNoStreamToAsk, true, b.srv.name, b.srv.name, q.Method)
		}
	}
	x := &inputRound{b: b, sess: sess, call: p, origID: origID, to: e.x, state: r.RequestState, pid: e.pid, left: map[uint64]string{},
		answer: map[string]json.RawMessage{}, timeout: e.timeout, remaining: b.reqs.timeLeft(e.deadline), asked: time.Now(), done: *done}
	x.done.Size, x.done.Payload = len(msg.Raw), b.capture(msg.Raw)
	written := e.written
	if written.IsZero() {
		// The child answered before the writer marked the call written
		// (e.writing): it was written by now.
		written = time.Now()
	}
	x.start = bridgedCall{received: p.received, written: written}
	sess.mu.Lock()
	if c, ok := sess.bridged[keyOf(origID, e.x)]; ok { // a round after the first
		x.start = c
	}
	sess.mu.Unlock()
	if x.timeout == 0 { // (a client's call always has one)
		x.timeout, x.remaining = b.requestTimeout(), b.requestTimeout()
	}
	questions := make([]outMessage, 0, len(r.InputRequests))
	ids := make([]uint64, 0, len(r.InputRequests))
	var methods []string
	for key, q := range r.InputRequests {
		if q.Method == "roots/list" { // never a client's: the pool answers it, as it does a legacy child's
			x.answer[key] = b.rootsResult()
			continue
		}
		id := b.p.newAskID()
		x.left[id] = key
		x.person = x.person || personAnswers(q.Method)
		ids = append(ids, id)
		methods = append(methods, q.Method)
		questions = append(questions, outMessage{legacyQuestion(id, q.Method, q.Params), asking(q.Method, id)})
	}
	if len(questions) == 0 { // only a requestState, or only what the pool answers: retry at once
		x.retry()
		return true, nil
	}
	slices.Sort(methods)
	x.asking = strings.Join(slices.Compact(methods), ", ")
	// The round is complete before it is shared; its timer is armed once
	// it is (so that an end by the timer finds every question to take
	// back), under its lock, unless an answer already ended it. A call
	// its client cancelled meanwhile (untracked before its cancel looks
	// for its round) asks nothing.
	x.sending.Lock()
	for _, id := range ids {
		b.p.rounds.add(id, x)
	}
	wait, named := x.remaining, x.timeout // the call's timeout runs on
	if x.person && holdKeep > wait {      // paused, bounded; never shorter than what was left
		wait, named = holdKeep, holdKeep
	}
	x.mu.Lock()
	if !x.over {
		x.timer = b.p.afterFunc(wait, func() {
			x.end(newError(errQuestionsUnanswered, true, b.srv.name, b.srv.name, named))
		})
	}
	x.mu.Unlock()
	if testHookRoundShared != nil {
		testHookRoundShared(x)
	}
	switch {
	case !sess.tracks(p, origID, e.x):
		x.sending.Unlock()
		x.drop("the client cancelled the call")
		return true, nil
	case sess.noInput.Load(): // its client can answer nothing (session.unanswerable)
		x.sending.Unlock()
		x.end(newError(errClosedInputAsked, true, b.srv.name, b.srv.name))
		return true, nil
	}
	// An end meanwhile (a close's dropRounds before its session is marked
	// closed, a user's cancel) saw nothing posed, and withdraws nothing:
	// then nothing is asked.
	x.mu.Lock()
	over := x.over
	x.posed = !over
	x.mu.Unlock()
	if over {
		x.sending.Unlock()
		return true, nil
	}
	for _, q := range questions {
		sess.deliver(q.line, q.facts)
	}
	x.sending.Unlock()
	return true, nil
}

// answerRound takes a legacy client's answer to one of the pool's
// questions. It reports whether the answer was one.
func (s *session) answerRound(msg *jsonrpc.Message) bool {
	id, ok := jsonrpc.ParseUint(msg.IDBytes())
	if !ok {
		return false
	}
	x := s.p.rounds.takeFrom(id, s)
	if testHookRoundLookedUp != nil {
		testHookRoundLookedUp(id)
	}
	if x == nil { // none, or not this client's to answer
		return false
	}
	if msg.Error.Present() {
		x.mu.Lock()
		delete(x.left, id) // answered: not withdrawn
		x.mu.Unlock()
		_, m := errorFields(msg.Error.Of(msg.Raw))
		x.end(newError(errQuestionRefused, true, x.b.srv.name, x.b.srv.name, m))
		return true
	}
	x.mu.Lock()
	key, pending := x.left[id]
	if pending && !x.over {
		delete(x.left, id)
		x.answer[key] = append(json.RawMessage(nil), msg.Result.Of(msg.Raw)...)
	}
	done := len(x.left) == 0 && !x.over
	if done {
		x.over = true
	}
	timer := x.timer
	x.mu.Unlock()
	if done {
		stopTimer(timer)
		x.retry()
	}
	return true
}

// testHookRoundShared, when set, runs in askLegacyClient once the round
// x is shared, before its questions are posed.
var testHookRoundShared func(x *inputRound)

// testHookRoundLookedUp, when set, runs as answerRound has looked up
// the round of the question a client answered.
var testHookRoundLookedUp func(id uint64)

// stopTimer stops t, if the round had armed it.
func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// end gives up the round: the client gets err for its call, unless it
// cancelled the call meanwhile (its id may be another request's now). It
// reports whether it ended the round (false: its answers, or another
// end, came first).
func (x *inputRound) end(err *jsonrpc.Error) bool { return x.giveUp(err, err.Message) }

// drop gives up the round of a call that ended unanswered, for why: its
// client cancelled it, or the session ends. It reports what end does.
func (x *inputRound) drop(why string) bool { return x.giveUp(nil, why) }

// giveUp is end (err) and drop (nil): the questions still open at the
// client are withdrawn, and the call ends as any call does (settle),
// though no table has it now (the child answered its round): with err,
// as roundEnd says, or, for why, as its client's cancel. The child is not
// told: it has nothing of the call under way.
func (x *inputRound) giveUp(err *jsonrpc.Error, why string) bool {
	x.mu.Lock()
	if x.over {
		x.mu.Unlock()
		return false
	}
	x.over = true
	left := x.left
	x.left = nil
	posed := x.posed
	timer := x.timer
	x.mu.Unlock()
	stopTimer(timer)
	for id := range left {
		x.b.p.rounds.take(id)
	}
	if posed && len(left) > 0 {
		x.sending.Lock() // once they are out
		x.withdraw(left, why)
		x.sending.Unlock()
	}
	x.endCall(err, why)
	return true
}

// endCall ends the round's call as any call ends (settle), though no
// table has it now (the child answered its round): with err, as roundEnd
// says, or, for why (err nil), as its client's cancel. Its record is
// settle's, in place of the round's answered end (done): the call did
// not go on.
func (x *inputRound) endCall(err *jsonrpc.Error, why string) {
	o := outcome{kind: endByClient, reason: why} // the client cancelled the call, or left
	if err != nil {
		o = outcome{kind: roundEnd(err.Code), rpcErr: err}
	}
	// It ran: the child answered its round.
	e := ended{sess: x.sess, origID: x.origID, x: x.to, pid: x.pid, mayHaveRun: true, route: routeRound}
	settle(x.b, x.call, e, o)
}

// roundEnd is how a call ends whose round ended with an error of code:
// a user's cancel, a client that did not answer in time, a stop, or a
// client that cannot answer.
func roundEnd(code int) endKind {
	switch code {
	case jsonrpc.CodeRequestCancelled:
		return endByUser
	case jsonrpc.CodeRequestTimeout:
		return endTimedOut
	case jsonrpc.CodeBackendDied:
		return endPoolStops
	}
	return endClientCannot
}

// withdraw sends the client notifications/cancelled for the questions
// nobody waits for now, by their ids, for why (the notification the pool
// sends a child for its request: cancelForChild), unless its session has
// closed (its output takes nothing more).
func (x *inputRound) withdraw(questions map[uint64]string, why string) {
	if isClosed(x.sess.closed) {
		return
	}
	for id := range questions {
		x.sess.deliver(cancelForChild(id, why), withdrawal(id))
	}
}

// dropRounds ends the rounds that wait for the answers of a session the
// pool closes while its client is still there, for why: their questions
// are withdrawn while its output takes them. At a stop (a hand-back, a
// shutdown) the call then gets what every call still running gets,
// "restarted" (abandon): it ran at the child. It reports whether it
// sent anything.
func (s *session) dropRounds(why error) (told bool) {
	stops := errors.Is(why, errHandedBack) || errors.Is(why, errPoolClosing)
	for _, x := range s.p.rounds.askedOf(s) {
		if stops {
			told = x.end(newError(errPoolRestarting, true, s.srv.name, s.srv.name, x.call.method)) || told
			continue
		}
		told = x.drop(why.Error()) || told
	}
	return told
}

// tracks reports whether p is still the session's request of the client's
// id, carried by x: not cancelled, its session not gone.
func (s *session) tracks(p *pending, id []byte, x *exchange) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight[keyOf(id, x)] == p && !isClosed(s.closed)
}

// retry sends the call to the child again, as the same client request,
// with the answers and the child's requestState, and what was left of
// the call's timeout; this round then ends answered. A retry it cannot
// build ends the call there, with the pool's error, as any call ends
// (endCall): counted, answered and recorded once.
func (x *inputRound) retry() {
	p, s := x.call, x.sess
	msg, err := jsonrpc.Parse(p.line)
	raw, ok := retryParams(&msg, x.answer, x.state)
	if err != nil || !ok {
		e := newError(errCannotRetry, true, x.b.srv.name)
		x.endCall(e, e.Message)
		return
	}
	x.b.p.emit(&x.done) // this round ended answered
	id := x.b.p.nextID.Add(1)
	line := jsonrpc.AppendRequest(nil, id, p.method, raw)
	next := &pending{id: id, sess: s, b: x.b, origID: x.origID, x: x.to, method: p.method, name: p.name, line: line,
		token: p.token, origToken: p.origToken, received: time.Now(), inputRounds: p.inputRounds + 1, logs: p.logs, bare: p.bare}
	x.b.reqs.carryProgress(p, next)
	key := keyOf(x.origID, x.to)
	s.mu.Lock()
	if s.inflight[key] != p || isClosed(s.closed) {
		s.mu.Unlock()
		return // the client cancelled or went away meanwhile
	}
	s.trackLocked(key, x.origID, next)
	if s.bridged == nil {
		s.bridged = map[string]bridgedCall{}
	}
	s.bridged[key] = bridgedCall{received: x.start.received, written: x.start.written, listed: p.id} // until the call ends (dropLocked)
	s.mu.Unlock()
	left := x.remaining
	if !x.person { // nobody was waited for: the call's timeout ran on
		left -= time.Since(x.asked)
	}
	x.b.reqs.carry(next, x.timeout, x.timeout-left)
	s.p.emit(&Event{Kind: EventRequestReceived, Time: next.received, Server: s.srv.name, Session: s.id, PoolID: id,
		Method: next.method, Name: next.name, OriginalID: string(x.origID), Size: len(line),
		Payload: x.b.capture(line)})
	switch err := x.b.send(next); {
	case errors.Is(err, errPastDeadline): // nothing was left of the call's timeout
		x.b.expire(next)
	case err != nil: // (ended meanwhile: finish does nothing)
		x.b.finish(next, outcome{kind: endRefused, rpcErr: asRPCError(err, s.srv.name)})
	}
}
