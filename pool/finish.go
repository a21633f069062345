package pool

import (
	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// endKind is how a request ended. What each kind does (endRules) is the
// one statement of how requests end: finish applies it, whoever ends the
// request.
type endKind uint8

const (
	endAnswered     endKind = iota // the child answered: its answer goes to the client
	endChildGone                   // its child died, stopped or failed: the pool answers; nobody to tell
	endTimedOut                    // the request timeout: the pool answers; the child is told
	endByClient                    // the client cancelled it or went away: no answer; the child is told
	endByUser                      // cancelled in Switchboard: the pool answers; the child is told
	endPoolStops                   // the pool stops and hands the session back: the pool answers; the child is told
	endUnusable                    // the child's answer cannot be delivered (too large): the pool answers
	endClientCannot                // the client cannot do what the child needs: the pool answers; the child is told
	endRefused                     // it never reached its backend (full, failed, stopped): the pool answers
	endDropped                     // the pool's own request, no longer needed (a handshake probe): nothing
	endNotForChild                 // a subscription change the child need not hear (others still hold it, or it is not ready): the pool answers {}, or the child's refusal of the subscribe it relied on
	endByChild                     // the child ended it unanswered (the pool's subscriptions/listen, named in its notifications/cancelled): nobody to tell
	endWaitAnswered                // a client's request that waited for its child's handshake (initwait.go), answered by the pool: initialize and server/discover from the handshake, logging/setLevel itself
	endWentOn                      // a client's request that waited for its child's handshake goes on past the wait (initwait.go): a logging/setLevel sent on to the child, a subscriptions/listen opened; nothing to answer now
	endGivenBack                   // a client's request that waited for its child's handshake goes back to its shim (handback.go): no answer; the next pool answers
)

// endRule is what ending a request of a kind does.
type endRule struct {
	status    string // in history; endAnswered: ok or error, from the child's answer
	tellChild bool   // notifications/cancelled to the child, if the request may have reached it
	answers   bool   // the client gets the pool's error
	counter   func(*Pool)
}

var endRules = [...]endRule{
	endAnswered:     {status: StatusOK},
	endChildGone:    {status: StatusFailed, answers: true},
	endTimedOut:     {status: StatusTimeout, answers: true, tellChild: true, counter: func(p *Pool) { p.timeouts.Add(1) }},
	endByClient:     {status: StatusCancelled, tellChild: true, counter: func(p *Pool) { p.cancelled.Add(1) }},
	endByUser:       {status: StatusCancelled, answers: true, tellChild: true, counter: func(p *Pool) { p.cancelled.Add(1) }},
	endPoolStops:    {status: StatusFailed, answers: true, tellChild: true},
	endUnusable:     {status: StatusFailed, answers: true},
	endClientCannot: {status: StatusFailed, answers: true, tellChild: true},
	endRefused:      {status: StatusFailed, answers: true},
	endDropped:      {},
	endNotForChild:  {status: StatusOK},
	endByChild:      {status: StatusCancelled},
	endWaitAnswered: {status: StatusOK},
	endWentOn:       {status: StatusOK},
	endGivenBack:    {status: StatusCancelled},
}

// outcome is how one request ended, with what its kind needs: the
// child's answer, or the pool's error (a row of errors.go's table, built
// by finish once it knows whether the request may have run), and the
// reason the child is told.
type outcome struct {
	kind   endKind
	answer jsonrpc.Message // endAnswered; a copy, so that the reader's own stays on its stack; endNotForChild: the refusal, if any
	err    poolError       // the kinds that answer with an error
	args   []any           // err's message arguments
	extra  map[string]any  // err's extra data members
	rpcErr *jsonrpc.Error  // an error already made (a refusal: hsErr, a busy server)
	reason string          // what the child is told (tellChild); endByClient, endGivenBack: also history's Err
	result []byte          // endWaitAnswered: the result the pool answers with
	batch  *outBatch       // endAnswered: the child's reader's batch the answer may wait in
}

func answered(msg *jsonrpc.Message) outcome { return outcome{kind: endAnswered, answer: *msg} }

func failure(kind endKind, err poolError, args ...any) outcome {
	return outcome{kind: kind, err: err, args: args}
}

// finish ends p with o: the one way a request ends, whoever ends it
// (its answer, its timeout, a cancel, a disconnect, its child's death, a
// stop, a refusal). It takes p out of its backend's table (exactly one
// caller wins; finish reports whether it was this one),
// tells the child notifications/cancelled when the kind says so and the
// child may have seen it, answers the pool's own waiter, and settles a
// client's request (settle). Nothing here runs under a lock.
func (b *backend) finish(p *pending, o outcome) bool {
	if p.wait {
		// A wait is in neither its session's requests in flight nor its
		// count of answers under way: counted before it is claimed, its
		// session cannot look idle, and end (closeWhenIdle), between the
		// claim and the answer. The loser of a race to end it (the
		// wait's own reader against retire) finds the winner counted.
		p.sess.answerComing()
	}
	e, won := b.reqs.end(p)
	if !won {
		if p.wait {
			p.sess.answerGone()
		}
		return false
	}
	if p.wait && testHookWaitClaimed != nil {
		testHookWaitClaimed(p.sess)
	}
	rule := endRules[o.kind]
	if rule.tellChild && e.mayHaveRun {
		b.sendRaw(cancelForChild(p.id, o.reason))
	}
	if o.kind == endAnswered && p.method == "tools/list" && o.answer.Result.Present() {
		b.learnHints(o.answer.Result.Of(o.answer.Raw)) // a client's, or the pool's own (listToolsForHints)
		b.srv.learnToolParams(o.answer.Result.Of(o.answer.Raw))
	}
	if p.method == "logging/setLevel" && p.logs != 0 && e.sess != nil { // one its child answers (sendLevel)
		b.levelEnded(e.sess, p, &o) // before the client reads the answer
	}
	if o.kind == endAnswered && p.token != 0 && p.method == "tools/call" && e.held == nil && b.offersTasks() {
		b.keepTaskToken(p, &o.answer) // answered with its task: its progress goes on (tasks.go)
	}
	if p.sub != nil && p.sub.add { // a session's, a listen's, or the pool's own for them (carried, a ready child's, one in another's place)
		b.subscribeEnded(p, &o, e.mayHaveRun)
	}
	if p.open { // the pool's upstream listen: the child may have ended it
		b.upstreamEnded(p, o.kind)
	}
	if p.reply != nil { // the pool's own request
		if o.kind == endAnswered {
			p.reply <- append([]byte(nil), o.answer.Raw...)
		} else {
			close(p.reply)
		}
		return true
	}
	if e.sess == nil {
		return true // (only the pool's own requests have no session)
	}
	settle(b, p, e, o)
	return true
}

// endRoute is how settle's answer reaches the client, by who ended the
// request: finish, or an end of a request no table has.
type endRoute uint8

const (
	routeTable endRoute = iota // finish: its table ended it
	routeRound                 // a bridged call (inputRound.endCall): answered only while its session still tracks it (its client's id may be another request's now); untracked, its client cancelled it or left, and nothing is undone
	routeHeld                  // a request held for its roots (session.endHeldLocked): its answer was counted as it left the queue; ended.slot is its ledger slot
)

// settle is the end of a client's request, once no table has it, as its
// kind's rule says: it counts it, answers the client (or keeps the
// answer for a modern client's retry), and emits its one
// EventRequestDone. finish calls it for what its table ended; the two
// ends no table has call it too, so that every end is counted, answered
// and recorded here: a bridged call whose round ends without its
// client's answers, or whose retry with them cannot be built
// (inputRound.endCall), and a request held for its session's roots
// (session.endHeldLocked). b is the backend whose table
// had it, nil for a held request; only a child's answer (endAnswered)
// needs it. Nothing here runs under a lock.
func settle(b *backend, p *pending, e ended, o outcome) {
	rule, pl, server := endRules[o.kind], e.sess.p, e.sess.srv.name
	if rule.counter != nil {
		rule.counter(pl)
	}
	if o.kind == endAnswered && e.writing {
		// The answer beat its writer's bookkeeping: the child had the
		// whole request (it answered it), and the request's events say
		// so in order, written before done; the writer, finding it ended,
		// says nothing.
		pl.emit(&Event{Kind: EventRequestWritten, Server: server, Session: e.sess.id, PID: e.pid, PoolID: p.id})
	}

	ev := Event{Kind: EventRequestDone, Server: server, Session: e.sess.id, PID: e.pid, PoolID: p.id,
		Method: p.method, Name: p.name, Status: rule.status, Written: e.mayHaveRun}
	var line []byte
	var input []byte // a legacy child's -32042 as the input_required a modern client reads
	switch {
	case o.kind == endAnswered:
		ev.Written = true // it ran: the child answered it
		if o.answer.Error.Present() {
			ev.Status = StatusError
			ev.ErrCode, ev.Err = errorFields(o.answer.Error.Of(o.answer.Raw))
			pl.errorsN.Add(1)
		}
		asked, refusal := b.askLegacyClient(p, e, &o.answer, &ev)
		if !asked && refusal == nil && e.modern && e.held == nil {
			input, refusal = b.urlElicitationForModern(p.method, e.origID, e.caps, &o.answer)
		}
		if !asked && refusal == nil && input == nil {
			refusal = b.unaskedTask(p.method, &o.answer) // a shared child's task is no client's (tasks.go)
		}
		switch {
		case refusal != nil:
			line = jsonrpc.AppendErrorResponse(nil, e.origID, refusal)
			ev.Status, ev.ErrCode, ev.Err = StatusFailed, refusal.Code, refusal.Message
		case asked:
			// Its questions went to the client; the call goes on as a
			// new request with the answers, and this round ends, in
			// history too, when the round does (inputbridge.go).
			return
		case input != nil:
			line = input // the client's retry is a new call (mrtr.go)
		case e.held != nil:
			line = append([]byte(nil), o.answer.Raw...) // rewritten for the retry that takes it (mrtr.go)
		default:
			line = b.responseFor(&o.answer, p.method, e)
		}
	case o.kind == endNotForChild && o.answer.Error.Present():
		// The subscribe it relied on (another holder's) was refused:
		// so is it, with the child's own words.
		ev.Status = StatusError
		ev.ErrCode, ev.Err = errorFields(o.answer.Error.Of(o.answer.Raw))
		pl.errorsN.Add(1)
		line = b.responseFor(&o.answer, p.method, e)
	case o.kind == endNotForChild:
		line = jsonrpc.AppendResponse(nil, e.origID, []byte("{}"))
	case o.kind == endWaitAnswered:
		line = jsonrpc.AppendResponse(nil, e.origID, o.result)
	case rule.answers:
		// A retry with its client's answers (inputbridge.go) that never
		// reached the child is still a call whose first round ran there.
		ran := e.mayHaveRun || p.inputRounds > 0
		rpcErr := o.rpcErr
		switch {
		case rpcErr == nil:
			rpcErr = newErrorData(o.err, ran, server, o.extra, o.args...)
		case ran && !e.mayHaveRun:
			rpcErr = mayHaveExecuted(rpcErr)
		}
		pl.errorsN.Add(1)
		line = jsonrpc.AppendErrorResponse(nil, e.origID, rpcErr)
		ev.ErrCode, ev.Err = rpcErr.Code, rpcErr.Message
	default:
		ev.Err = o.reason
	}
	switch {
	case e.held != nil: // the session forgot it when it was held (mrtr.go)
		if line != nil {
			b.reqs.keep(e.held, line)
		}
	case e.route == routeRound:
		if line != nil {
			e.sess.answerIfCurrent(p, e.origID, e.x, line, ev.ErrCode)
		}
	case e.route == routeHeld: // (every kind that ends one answers it)
		e.sess.answer(e.x, line, ev.ErrCode, e.slot)
	case input != nil: // a result, though the child's answer was an error
		e.sess.deliverResponse(p, e.origID, e.x, line, 0, o.batch)
	case line != nil:
		e.sess.deliverResponse(p, e.origID, e.x, line, ev.ErrCode, o.batch)
	case o.kind == endWentOn: // the request goes on: its POST, if any, still waits for what follows
		e.sess.answerGone() // (a wait: nothing to answer now)
	default:
		e.sess.forget(p, e.origID, e.x)
	}
	if line != nil {
		ev.Size, ev.Payload = len(line), pl.capture(line)
	}
	pl.emit(&ev)
}

// responseFor is the child's answer as the client gets it: its own id
// back, and for a 2026-07-28 client of a legacy child what that revision
// requires of the result; for a legacy client of a 2026-07-28 child, a
// read of a missing resource in its own revision's words.
func (b *backend) responseFor(msg *jsonrpc.Message, method string, e ended) []byte {
	switch {
	case e.modern:
		if info, legacy := b.legacyInfo(); legacy {
			return modernResponse(msg, method, e.origID, info)
		}
	case method == "resources/read" && msg.Error.Present() && !b.childIsLegacy():
		return legacyResponse(msg, method, e.origID)
	}
	return responseForClient(nil, msg, e.origID)
}

// expire is the request timeout: the client gets an error, the child a
// cancellation. The error names the timeout p ran under, not the
// server's current one; a call held for its client's answer past how
// long a hold is kept (mrtr.go) says the client did not answer.
func (b *backend) expire(p *pending) {
	d, held := b.reqs.timeoutOf(p)
	o := outcome{kind: endTimedOut, err: errTimeout, args: []any{b.srv.name, p.method, d},
		reason: "request timed out in switchboard"}
	b.mu.Lock()
	retired := b.retiredBy
	b.mu.Unlock()
	if retired != nil {
		// Its server was removed or disabled meanwhile: sending it
		// again cannot work, and the error says why.
		o.err, o.args = errTimeoutRetired, append(o.args, retired)
	}
	if held {
		o.err, o.args = errQuestionsUnanswered, []any{b.srv.name, holdKeep}
		o.reason = "the client did not answer the server's question in time"
	}
	b.finish(p, o)
}

// cancel ends p because its client cancelled it or went away. The client
// gets no answer (MCP: a cancelled request is not answered); the child
// gets notifications/cancelled if it saw the request. Late answers are
// orphans. A call the child answered with questions for its client ends
// with them (inputbridge.go).
func (b *backend) cancel(p *pending, reason string) {
	if !b.finish(p, outcome{kind: endByClient, reason: reason}) {
		if x := b.p.rounds.of(p); x != nil {
			x.drop(reason)
		}
	}
}
