package pool

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// reqState is where a request is on its way to a child:
//
//	new ──register──▶ queued ──startWrite──▶ writing ──wrote──▶ written
//	                    ▲                       │                  │
//	                    ├──unwrite (none taken)─┘                  │
//	                    └──requeue (its child died, safe to repeat)┘
//	any state ──end──▶ done
//
// end happens exactly once: whoever ends a request (its answer, its
// timeout, a cancel, a disconnect, the child's death, a stop) owns its
// answer (finish). A request that was writing or written when its child
// died and is re-queued keeps everWritten: it may have run there.
type reqState uint8

const (
	stNew     reqState = iota // made, not yet in a backend's table
	stQueued                  // in the write queue
	stWriting                 // being written (writeLoop or send); may or may not reach the child
	stWritten                 // every byte of it written to the child
	stDone                    // ended; owned by whoever ended it
)

var stateNames = [...]string{"new", "queued", "writing", "written", "done"}

func (s reqState) String() string { return stateNames[s] }

// pending is one request forwarded to a child, or sent by the pool itself.
// (Its small fields are at the end, packed, so that it fits in 256 bytes.)
type pending struct {
	// Set when it is made, never changed after: read without a lock.
	id       uint64 // pool id, as written to the child
	b        *backend
	method   string
	name     string      // tool, prompt or resource
	line     []byte      // the request as written to the child
	token    uint64      // pool progress token, 0 if none
	received time.Time   // when the pool took it: its timeout runs from then
	reply    chan []byte // the pool's own requests: the raw answer, or closed when it failed

	// Guarded by the backend's request table (requestTable.update).
	// sess, origID, x and origToken change only when a modern client's
	// retry takes a held call over (requestTable.takeOver, mrtr.go). Two
	// read origToken without the lock, and meet no writer: the retry of a
	// legacy client's call (inputRound.retry), never held, and
	// keepTaskToken, in finish once the call ended not held, which a
	// take-over after the end needs (it writes only an answer kept for
	// the hold the call ended in).
	sess         *session  // nil for the pool's own requests
	origID       []byte    // the client's exact id bytes
	x            *exchange // the HTTP POST waiting for its answer (exchange.go); nil: the session's output
	origToken    []byte    // the client's progress token, nil if none
	held         *mrtrHold
	written      time.Time     // when it was last fully written
	deadline     time.Duration // when it times out, as time since its table's base: received plus its timeout; 0 for none (set by register)
	progressSeen float64       // the last progress value its client was sent: a retried call's progress never goes back

	// slot is the request's ledger slot + 1 (ledger.go), 0 if none:
	// taken and released under the session's mu, read by the writers.
	slot atomic.Int32

	pid          int32      // guarded by the table: the child it is being or was last written to (32 bits, to fit)
	state        reqState   // guarded by the table, as the rest of this line
	modern       bool       // the client spoke 2026-07-28 in this request (modern.go)
	caps         clientCaps // a modern request's own: what its _meta declared (a child's question needs them)
	inputRounds  uint8      // the input_required rounds the call has taken so far (inputbridge.go)
	everWritten  bool       // sticky: it reached a child before a re-queue
	retried      bool       // re-sent once after its child died
	progressSent bool       // progressSeen is set
	open         bool       // set when made: it stays open until cancelled (the pool's subscriptions/listen), no timeout
	logs         uint8      // set when made: 1 + the logSeverity its request asks logs at, 0 if none (loglevel.go)
	bare         bool       // set when made: a legacy client's line without the _meta a modern child needs, fitted for one as written (fitLine)
	wait         bool       // set when made: a client's request waiting for its child's handshake (registerWait), whose sess never changes

	// sub is set when made for a resources/subscribe or unsubscribe that
	// changes what the sessions hold: send counts it as it queues it
	// (backend.countLocked), so the child hears subscribes and
	// unsubscribes in the order they were counted.
	sub *subChange
}

// mayHaveRunLocked reports whether p may have reached a child: it is
// being written or was written, now or before a re-queue.
func (p *pending) mayHaveRunLocked() bool {
	return p.state == stWriting || p.state == stWritten || p.everWritten
}

// reverseEntry remembers a request the child sent to a client.
type reverseEntry struct {
	childID []byte
	sess    *session
	paused  []uint64 // the pool ids of the calls whose timeouts wait for its answer (addQuestion)
	// posing is closed by its asker once it has delivered the question
	// to sess, nil once the asker noted that (posed): a withdrawal
	// meanwhile follows the question, by waiting for it
	// (voidQuestionsTo) or by leaving the withdrawal to the asker
	// (voidLocked).
	posing <-chan struct{}
	// progress is the question's progressToken (progressKey), "" for
	// none: progress under it is taken from sess alone (progressAsked).
	progress string
}

// openQuestion is a child's question the pool forgot without its
// client's answer: the session asked it and the pool id it was asked
// under, for the notifications/cancelled that withdraws it there.
type openQuestion struct {
	id   uint64
	sess *session
	// posing, if not nil, is closed once the question's asker has
	// delivered it to sess: its withdrawal waits for that, and comes
	// after it.
	posing <-chan struct{}
}

// requestTable is a backend's requests in flight: its pending requests by
// pool id, its progress tokens, and the child's own requests to clients
// (the reverse map). Like go-sdk's jsonrpc2 conn (updateInFlight), every
// change happens in a closure under the table's mutex, and nothing is
// written, sent on a channel that may block, emitted or recorded while it
// is held: callers take what the closure decided and act after. Nothing
// outside this file touches the maps; TestRequestTableMapsStayInside
// checks it.
//
// The table's mutex is a leaf: it is taken under backend.mu (the write
// queue's lock) and under server.mu (serving), never the other way round,
// and nothing else is locked under it.
//
// Timeouts are one timer per table, not one per request: it is armed for
// the earliest deadline and, when it fires, expires what is due and is
// armed again for the earliest left. A request that ends leaves the timer
// alone, so a call costs no timer of its own (an allocation, and a
// timer-heap insert and delete on the hot path); a timer that finds
// nothing due just re-arms.
type requestTable struct {
	mu     sync.Mutex
	in     inFlight
	expire func(*pending)                          // called, without the lock, for each request past its deadline
	sweep  *time.Timer                             // runs sweepDue at in.nextDeadline; made by the first register with a timeout
	after  func(time.Duration, func()) *time.Timer // makes sweep: time.AfterFunc, or the pool's (Pool.afterFunc)
	base   time.Time                               // deadlines are durations since base (8 bytes in pending, not a time.Time's 24)
}

// inFlight is the table's state, reached only through update.
type inFlight struct {
	pending map[uint64]*pending     // pool id -> request
	tokens  map[uint64]*pending     // pool progress token -> request
	reverse map[uint64]reverseEntry // pool id of a child's request -> the session asked
	idle    chan struct{}           // closed when pending empties; nil when nobody waits (whenIdle)

	// elicited: a URL-mode elicitation's elicitationId -> the session
	// asked it, for the child's completion (elicitcomplete.go); made by
	// the first.
	elicited map[string]elicited

	// paused: the requests whose timeouts waited, or wait, for a
	// client's answer to a child's question, by pool id (pauseLocked),
	// and the retries that carry their calls' timeouts (carry). Made by
	// the first.
	paused map[uint64]timeoutPause

	// unposed: the questions voided while their askers were still
	// delivering them and left to those askers (voidLocked: the child
	// died), by pool id, with why: each asker withdraws its own once it
	// is out (posed). Made by the first.
	unposed map[uint64]string

	// nextDeadline is when the sweep timer fires, zero when it is not
	// armed. Once it has passed, a sweep is on its way and will look at
	// every request, so a later deadline needs no arming.
	nextDeadline time.Duration
}

// newRequestTable makes a table whose timeouts call expire (nil: no
// request of this table has a timeout).
func newRequestTable(expire func(*pending)) *requestTable {
	return &requestTable{in: inFlight{pending: map[uint64]*pending{}, tokens: map[uint64]*pending{},
		reverse: map[uint64]reverseEntry{}}, expire: expire, after: time.AfterFunc, base: time.Now()}
}

// update runs f with the table's state under its mutex. f must not block,
// write, emit or take another lock.
func (t *requestTable) update(f func(*inFlight)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.in)
}

// registration is what register did with a request.
type registration uint8

const (
	registered        registration = iota // queued in the table
	alreadyEnded                          // ended before it could be registered (its session closed)
	cancelledByUser                       // a user's cancel came as its session handed it on from its held messages (session.handedOn)
	cancelledByClient                     // its client's cancel came as its session held it, or handed it on
	tableFull                             // the backend has its limit of requests waiting
	pastDeadline                          // its timeout ran out before it came here (held for its session's roots): its sender expires it
)

// register adds a new request, queued, and returns its session as
// registered. n is how many requests were waiting before it. A timeout
// above zero gives the request a deadline, timeout after it was received,
// after which the table's expire is called for it unless it ended first.
// The deadline is set once: a later change of the server's timeout
// applies to requests registered after it (timeoutOf). A call's retry
// with its client's answers goes on with what was left of the call's
// timeout instead (carry), and a request held for its session's roots
// with the one it came under. A request whose deadline has passed already
// is refused, never queued, with its deadline set for timeoutOf.
func (t *requestTable) register(p *pending, limit int, timeout time.Duration) (r registration, sess *session, n int) {
	t.update(func(in *inFlight) {
		n = len(in.pending)
		r = p.sess.handedOn(p.id) // a cancel came first, or it goes on
		// Its deadline, 0 for none: a carried timeout's, or timeout's.
		var deadline time.Duration
		if w, carried := in.paused[p.id]; carried {
			deadline = p.received.Sub(t.base) + w.timeout - w.used
		} else if timeout > 0 {
			deadline = p.received.Sub(t.base) + timeout
		}
		switch {
		case p.state != stNew:
			r = alreadyEnded
		case r != registered:
		case deadline != 0 && deadline <= time.Since(t.base):
			p.deadline = deadline
			r = pastDeadline
		case n >= limit:
			r = tableFull
		default:
			p.state = stQueued
			in.pending[p.id] = p
			if p.token != 0 {
				in.tokens[p.token] = p
			}
			if deadline != 0 {
				now := time.Since(t.base)
				p.deadline = deadline
				if in.nextDeadline == 0 || p.deadline < in.nextDeadline {
					t.armLocked(in, p.deadline, now)
				}
			}
			r, sess = registered, p.sess
		}
	})
	return r, sess, n
}

// timeoutOf is the timeout p's deadline was set from, 0 if none: the
// one it ran under, which the config may have changed since. held: p
// waits for its client's answer, its deadline the pause's bound
// (pauseLocked), not its own timeout's.
func (t *requestTable) timeoutOf(p *pending) (d time.Duration, held bool) {
	t.update(func(in *inFlight) { d, held = t.timeoutLocked(in, p) })
	return d, held
}

// timeoutLocked is timeoutOf under the table's lock.
func (t *requestTable) timeoutLocked(in *inFlight, p *pending) (d time.Duration, held bool) {
	w, paused := in.paused[p.id]
	switch {
	case p.deadline == 0:
	case paused:
		d, held = w.timeout, w.n > 0 && p.deadline > t.ownDeadline(p, w)
	default:
		d = p.deadline - p.received.Sub(t.base)
	}
	return d, held
}

// carry makes p, a call's retry with its client's answers to the child's
// questions (inputbridge.go), go on with what was left of the call's
// timeout rather than with a timeout of its own: timeout is the call's,
// used what its earlier requests took of it. A request held for its
// session's roots goes on so with the timeout it came under (used 0).
// p's error names timeout.
// Called before p is sent; nothing once p has ended.
func (t *requestTable) carry(p *pending, timeout, used time.Duration) {
	if timeout <= 0 {
		return
	}
	t.update(func(in *inFlight) {
		if p.state != stNew {
			return
		}
		if in.paused == nil {
			in.paused = map[uint64]timeoutPause{}
		}
		in.paused[p.id] = timeoutPause{timeout: timeout, used: used}
	})
}

// timeLeft is what is left, now, of a timeout that ends at deadline
// (ended.deadline).
func (t *requestTable) timeLeft(deadline time.Duration) time.Duration {
	return deadline - time.Since(t.base)
}

// timeoutPause is a request's timeout while a person may be answering
// its child's questions: a 2026-07-28 client's held call (hold), a
// legacy client's question relayed during the call (addQuestion). It
// waits from the first question to the last answer, each such wait
// bounded by how long a held call is kept for its retry (holdKeep), or
// by its own timeout if that ends later, then goes on with what was
// left. A call's retry carries its call's timeout in one (carry).
type timeoutPause struct {
	timeout time.Duration // the timeout its deadline was set from
	used    time.Duration // what the call's earlier requests took of it (carry)
	waited  time.Duration // how long it waited in the waits that ended
	from    time.Duration // when the wait under way began, since the table's base
	n       int           // the questions it waits for: it waits while n > 0
}

// pauseLocked makes p's timeout wait, at now, for one more question:
// the first moves its deadline to the wait's bound, unless its own
// timeout ends later: a pause never brings a deadline forward, so the
// armed sweep, never later than p's deadline was, need not re-arm. A
// request without a timeout has none to pause.
func (t *requestTable) pauseLocked(in *inFlight, p *pending, now time.Duration) {
	if p.deadline == 0 {
		return
	}
	if in.paused == nil {
		in.paused = map[uint64]timeoutPause{}
	}
	w, again := in.paused[p.id]
	if !again {
		w.timeout = p.deadline - p.received.Sub(t.base)
	}
	if w.n++; w.n == 1 {
		w.from, p.deadline = now, max(p.deadline, now+holdKeep)
	}
	in.paused[p.id] = w
}

// ownDeadline is when p's own timeout ends, w its pause, the wait under
// way not counted: its deadline when not paused.
func (t *requestTable) ownDeadline(p *pending, w timeoutPause) time.Duration {
	return p.received.Sub(t.base) + w.timeout - w.used + w.waited
}

// resumeLocked ends, at now, one question p's timeout waits for (one
// pauseLocked counted): after the last its deadline moves on by as long
// as it waited.
func (t *requestTable) resumeLocked(in *inFlight, p *pending, now time.Duration) {
	w, ok := in.paused[p.id]
	if !ok || w.n == 0 {
		return
	}
	if w.n--; w.n == 0 {
		w.waited += now - w.from
		p.deadline = t.ownDeadline(p, w) // earlier than the bound, maybe
		if in.nextDeadline == 0 || p.deadline < in.nextDeadline {
			t.armLocked(in, p.deadline, now)
		}
	}
	in.paused[p.id] = w
}

// armLocked sets the sweep timer to fire at deadline.
func (t *requestTable) armLocked(in *inFlight, deadline, now time.Duration) {
	in.nextDeadline = deadline
	if t.sweep == nil {
		t.sweep = t.after(deadline-now, t.sweepDue)
		return
	}
	t.sweep.Reset(deadline - now)
}

// sweepDue expires, in pool-id order, every request whose deadline has
// passed, and arms the timer for the earliest deadline left.
func (t *requestTable) sweepDue() {
	var due []*pending
	t.update(func(in *inFlight) {
		now := time.Since(t.base)
		var next time.Duration
		for _, p := range in.pending {
			switch {
			case p.deadline == 0:
			case p.deadline <= now:
				due = append(due, p)
			case next == 0 || p.deadline < next:
				next = p.deadline
			}
		}
		in.nextDeadline = 0
		if next != 0 {
			t.armLocked(in, next, now)
		}
	})
	slices.SortFunc(due, cmpID)
	for _, p := range due {
		t.expire(p)
	}
}

// stopTimer lets the sweep timer go once the table's backend is done:
// nothing is left to time out, and an armed timer would keep the backend
// reachable until it fired.
func (t *requestTable) stopTimer() {
	t.update(func(in *inFlight) {
		if t.sweep != nil {
			t.sweep.Stop()
		}
		in.nextDeadline = 0
	})
}

// lookup returns the request with pool id id, or nil.
func (t *requestTable) lookup(id uint64) *pending {
	var p *pending
	t.update(func(in *inFlight) { p = in.pending[id] })
	return p
}

// count is the number of requests in flight.
func (t *requestTable) count() int {
	var n int
	t.update(func(in *inFlight) { n = len(in.pending) })
	return n
}

// serving reports whether a client's request is in flight: a child no
// session is in any more may still owe an answer to one that moved to
// other roots (server.spareLocked, server.reapIdle).
func (t *requestTable) serving() bool {
	var yes bool
	t.update(func(in *inFlight) {
		for _, p := range in.pending {
			if p.sess != nil {
				yes = true
				return
			}
		}
	})
	return yes
}

// callsAt reports whether a client's request was written to the child
// pid and is not answered yet (backend.answerRootsList).
func (t *requestTable) callsAt(pid int) bool {
	var yes bool
	t.update(func(in *inFlight) {
		for _, p := range in.pending {
			if p.sess != nil && int(p.pid) == pid && (p.state == stWriting || p.state == stWritten) {
				yes = true
				return
			}
		}
	})
	return yes
}

// logOwner is where a modern child's log message at severity sev goes:
// the client whose requests it may be running asked for it (logs at or
// below sev). Over stdio the message names no request, so it is a
// client's only when those requests are one client's: one session's (on
// different POSTs of a legacy HTTP session: its own output), or one
// request's of a stateless session, whose exchanges are different
// clients'. ok is false when none asked, or several clients did.
func (t *requestTable) logOwner(sev int) (to *session, x *exchange, ok bool) {
	t.update(func(in *inFlight) {
		for _, p := range in.pending {
			if p.sess == nil || p.logs == 0 || sev < int(p.logs)-1 || (p.state != stWriting && p.state != stWritten) {
				continue
			}
			switch {
			case to == nil:
				to, x, ok = p.sess, p.x, true
			case to != p.sess || x != p.x && to.stateless:
				to, x, ok = nil, nil, false
				return
			case x != p.x:
				x = nil
			}
		}
	})
	return to, x, ok
}

// runsOnlyModern reports whether the client requests a legacy child may
// be running are all 2026-07-28 clients' (and there is one): a log
// message it sends then is of one of them, or of nothing a client asked.
func (t *requestTable) runsOnlyModern() bool {
	n := 0
	t.update(func(in *inFlight) {
		for _, p := range in.pending {
			if p.sess == nil || (p.state != stWriting && p.state != stWritten) {
				continue
			}
			if !p.modern {
				n = 0
				return
			}
			n++
		}
	})
	return n > 0
}

// The writers' moves (send, writeLoop), made in their update closures.

// startWriteLocked moves a queued request to writing to child pid and
// returns its session, whose ledger hears of it; false means it ended
// while queued and the child never needs it. The pid is set now, not
// when the write returns: a fast child can answer before the writer
// notes the write, and the answer's record must name the child.
func (in *inFlight) startWriteLocked(p *pending, pid int) (ok bool, sess *session) {
	if p.state != stQueued {
		return false, nil
	}
	p.state, p.pid = stWriting, int32(pid)
	return true, p.sess
}

// wroteLocked marks a request being written as fully written to the
// child pid and returns its session; false means it ended or was
// re-queued meanwhile.
func (in *inFlight) wroteLocked(p *pending, at time.Time, pid int) (ok bool, sess *session) {
	if p.state != stWriting {
		return false, nil
	}
	p.state, p.written, p.pid = stWritten, at, int32(pid)
	return true, p.sess
}

// unwriteLocked puts back in the queue a request being written none of
// which was taken (the pipe was full, or a write failed before it, its
// child gone): one the child took a byte of may have run. untake is the
// session whose ledger must hear "not written" again: set when the
// request never reached any child.
func (in *inFlight) unwriteLocked(p *pending) (requeued bool, untake *session) {
	if p.state != stWriting {
		return false, nil
	}
	p.state = stQueued
	if !p.everWritten {
		untake, p.pid = p.sess, 0 // it reached no child
	}
	return true, untake
}

// isDoneLocked reports whether p has ended.
func (in *inFlight) isDoneLocked(p *pending) bool { return p.state == stDone }

// ended is what finish needs of a request it ended, read under the table's
// mutex as it ended; for an end no table has (settle), what its ender
// knows of it.
type ended struct {
	sess       *session
	origID     []byte
	x          *exchange
	held       *mrtrHold
	modern     bool
	mayHaveRun bool // it may have reached a child
	writing    bool // it ended while being written: its writer had not yet marked it written
	pid        int
	caps       clientCaps    // a modern request's own: what the child may ask of its client (mrtr.go)
	timeout    time.Duration // the timeout it ran under, 0 if none (timeoutOf)
	deadline   time.Duration // when it was due (pending.deadline): a retry goes on with what was left (carry)
	written    time.Time     // when it was last fully written (pending.written)
	route      endRoute      // how settle answers it: routeTable, unless no table ended it
	slot       int32         // routeHeld: its ledger slot, still taken
}

// end takes p out of the table. Exactly one caller wins, whatever state p
// is in (a request ended before it was registered is refused by
// register); the winner gets what it needs to answer it.
func (t *requestTable) end(p *pending) (e ended, won bool) {
	t.update(func(in *inFlight) {
		if p.state == stDone {
			return
		}
		timeout, _ := t.timeoutLocked(in, p) // before endLocked forgets its pause
		e, won = in.endLocked(p), true
		e.timeout = timeout
	})
	return e, won
}

func (in *inFlight) endLocked(p *pending) ended {
	e := ended{sess: p.sess, origID: p.origID, x: p.x, held: p.held, modern: p.modern, caps: p.caps,
		mayHaveRun: p.mayHaveRunLocked(), writing: p.state == stWriting, pid: int(p.pid), deadline: p.deadline, written: p.written}
	if in.pending[p.id] == p {
		delete(in.pending, p.id)
		if p.token != 0 {
			delete(in.tokens, p.token)
		}
		in.checkIdleLocked()
	}
	// Registered or not: a retry's carried timeout is there before it is.
	delete(in.paused, p.id)
	p.everWritten = e.mayHaveRun // what it was when it ended, for good
	p.state = stDone
	return e
}

func (in *inFlight) checkIdleLocked() {
	if len(in.pending) == 0 && in.idle != nil {
		close(in.idle)
		in.idle = nil
	}
}

// whenIdle returns a channel closed once nothing is in flight.
func (t *requestTable) whenIdle() <-chan struct{} {
	var ch chan struct{}
	t.update(func(in *inFlight) {
		if in.idle == nil {
			in.idle = make(chan struct{})
		}
		ch = in.idle
		in.checkIdleLocked()
	})
	return ch
}

// all lists every request in flight, in pool-id order, for a backend
// that stops or fails: its caller finishes each.
func (t *requestTable) all() []*pending {
	var all []*pending
	t.update(func(in *inFlight) {
		all = make([]*pending, 0, len(in.pending))
		for _, p := range in.pending {
			all = append(all, p)
		}
	})
	slices.SortFunc(all, cmpID)
	return all
}

// afterExit applies the at-most-once rule to every request when the child
// died (reap): what it had not been written stays queued; what it had
// is re-queued once if safe(p) says it may be repeated, and otherwise
// listed in failed, for the caller to finish. Both lists are in pool-id
// order. The dead child's questions to clients are forgotten, and the
// timeouts they paused go on; void lists those the caller withdraws at
// their clients, for why (voidLocked).
func (t *requestTable) afterExit(safe func(*pending) bool, why string) (retry, failed []*pending, void []openQuestion) {
	t.update(func(in *inFlight) {
		now := time.Since(t.base)
		for k, e := range in.reverse { // the dead child's questions to clients are void
			if t.voidLocked(in, k, e, why, now) {
				void = append(void, openQuestion{id: k, sess: e.sess})
			}
		}
		for _, p := range in.pending {
			if p.state != stWritten && p.state != stWriting {
				continue
			}
			if p.reply == nil && !p.retried && safe(p) {
				p.retried = true
				p.everWritten = true // sticky: the next child's answer, or its death, may follow a run on this one
				p.state = stQueued
				retry = append(retry, p)
				continue
			}
			failed = append(failed, p)
		}
	})
	slices.SortFunc(retry, cmpID)
	slices.SortFunc(failed, cmpID)
	return retry, failed, void
}

func cmpID(x, y *pending) int { return cmpUint(x.id, y.id) }

func cmpUint(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// carryProgress gives next, a retry of p under p's token that is not
// registered yet, the progress p's client has seen: the retry's own
// progress starts from zero, and must not go back.
func (t *requestTable) carryProgress(p, next *pending) {
	t.update(func(*inFlight) { next.progressSeen, next.progressSent = p.progressSeen, p.progressSent })
}

// progress finds where a progress notification with the pool token goes:
// the session of the request that carries it (and its exchange, if an
// HTTP POST waits for it), with the client's own token, unless the request waits for an MRTR retry or the value would
// make the client's progress go back (a retried call starts again from
// zero: its notifications wait until they pass what the client saw).
func (t *requestTable) progress(token uint64, value float64, hasValue bool) (to *session, x *exchange, origToken []byte) {
	t.update(func(in *inFlight) {
		p := in.tokens[token]
		if p == nil || p.held != nil || p.sess == nil || p.origToken == nil {
			return // ended, held, or taken over by a retry that asked for no progress
		}
		if hasValue {
			if p.progressSent && value <= p.progressSeen {
				return
			}
			p.progressSeen, p.progressSent = value, true
		}
		to, x, origToken = p.sess, p.x, p.origToken
	})
	return to, x, origToken
}

// askers lists the sessions with requests in flight here that may have
// reached the child, the one with the oldest request first (callers,
// each session once): while there is one, a child's question goes to one
// of them or to nobody (backend.routeQuestion). A request the child
// never got (a wait for its handshake, answered by the pool; one queued)
// cannot be what it asks about.
func (t *requestTable) askers() []*session {
	var out []*session
	for _, c := range t.callers("") {
		if !slices.Contains(out, c.sess) {
			out = append(out, c.sess)
		}
	}
	return out
}

// addQuestion records that the child's request childID went to sess as
// pool id id, unless sess has closed (posing nil). session.close closes
// s.closed before its detach drops the session's questions under this
// mutex, so either that drop finds the question and answers the child, or
// this sees the session closed and the caller does. A URL-mode
// elicitation's elicitationID (else "") is remembered with it, for the
// child's completion of it: past the question's answer, until the
// completion, elicitationTTL or maxElicitations.
//
// A question a person answers (wait) pauses the timeouts of the calls it
// may be for, as a 2026-07-28 client's held call's is paused (hold),
// until it is answered, withdrawn or void (forgetQuestionLocked). A
// legacy child's question names no call: over stdio nothing in it says
// which request it serves (a progressToken in its _meta would be the
// question's own, not its call's). So it pauses every call of sess
// written to this child and not answered yet: the asked client's calls,
// one of which the child is likely waiting in (the question went to the
// session with the oldest call here). A call of sess it is not for may
// then wait longer than its timeout, never longer than the pause's
// bound; other sessions' calls keep theirs, their clients not being
// asked.
//
// posing, nil when the question was not recorded, is for the asker to
// close once it has delivered the question to sess: a withdrawal waits
// for that (reverseEntry.posing), and the asker then notes it (posed).
func (t *requestTable) addQuestion(id uint64, childID []byte, sess *session, elicitationID string, wait bool, progress string) (posing chan<- struct{}) {
	t.update(func(in *inFlight) {
		now := time.Since(t.base)
		if sess.askable() { // no lock, no wait
			ch := make(chan struct{})
			posing = ch
			e := reverseEntry{childID: childID, sess: sess, posing: ch, progress: progress}
			if wait {
				e.paused = t.pauseCallsLocked(in, sess, now)
			}
			in.reverse[id] = e
			if elicitationID != "" {
				in.elicit(elicitationID, sess, now)
			}
		}
	})
	return posing
}

// pauseCallsLocked pauses, at now, the timeouts of sess's calls written
// to the child and not answered yet, and lists their pool ids.
func (t *requestTable) pauseCallsLocked(in *inFlight, sess *session, now time.Duration) (ids []uint64) {
	for _, p := range in.pending {
		if p.sess == sess && p.deadline != 0 && (p.state == stWriting || p.state == stWritten) {
			t.pauseLocked(in, p, now)
			ids = append(ids, p.id)
		}
	}
	return ids
}

// forgetQuestionLocked forgets the child's question k, e its entry, at
// now: the timeouts it paused go on (resumeLocked), those of calls that
// ended meanwhile aside.
func (t *requestTable) forgetQuestionLocked(in *inFlight, k uint64, e reverseEntry, now time.Duration) {
	delete(in.reverse, k)
	for _, id := range e.paused {
		if p := in.pending[id]; p != nil {
			t.resumeLocked(in, p, now)
		}
	}
}

// voidLocked forgets the question k, e its entry, at now, which its
// client is not to answer now, for why. It reports whether the caller
// withdraws it at the client: one its asker is still delivering is left
// to the asker (posed), so that the withdrawal follows the question.
func (t *requestTable) voidLocked(in *inFlight, k uint64, e reverseEntry, why string, now time.Duration) bool {
	t.forgetQuestionLocked(in, k, e, now)
	if e.posing == nil {
		return true
	}
	if in.unposed == nil {
		in.unposed = map[uint64]string{}
	}
	in.unposed[k] = why
	return false
}

// posed notes that the question id has been delivered to its client,
// once its asker closed the question's posing. void: it was voided
// meanwhile and left to the asker (voidLocked), which now withdraws it
// at the client, for why; one voidQuestionsTo took is withdrawn by its
// caller.
func (t *requestTable) posed(id uint64) (why string, void bool) {
	t.update(func(in *inFlight) {
		if e, ok := in.reverse[id]; ok {
			e.posing = nil
			in.reverse[id] = e
			return
		}
		why, void = in.unposed[id]
		delete(in.unposed, id)
	})
	return why, void
}

// elicited is a URL-mode elicitation the pool asked a session.
type elicited struct {
	sess *session
	at   time.Duration // since the table's base
}

// elicit remembers that sess was asked the elicitation id at now, making
// room, if there is none, by forgetting the expired ones, else the
// oldest.
func (in *inFlight) elicit(id string, sess *session, now time.Duration) {
	if in.elicited == nil {
		in.elicited = map[string]elicited{}
	}
	if _, again := in.elicited[id]; !again && len(in.elicited) >= maxElicitations {
		oldest, at := "", now
		for k, e := range in.elicited {
			if now-e.at > elicitationTTL {
				delete(in.elicited, k)
			} else if e.at <= at {
				oldest, at = k, e.at
			}
		}
		if len(in.elicited) >= maxElicitations {
			delete(in.elicited, oldest)
		}
	}
	in.elicited[id] = elicited{sess: sess, at: now}
}

// elicitationAsker takes the session that was asked the URL-mode
// elicitation id, nil if none was or it was forgotten.
func (t *requestTable) elicitationAsker(id string) (sess *session) {
	now := time.Since(t.base)
	t.update(func(in *inFlight) {
		e, ok := in.elicited[id]
		if !ok {
			return
		}
		delete(in.elicited, id) // completed once
		if now-e.at <= elicitationTTL {
			sess = e.sess
		}
	})
	return sess
}

// takeAnswer takes the child's id for a client's answer to pool id id;
// only the session that was asked can answer.
func (t *requestTable) takeAnswer(id uint64, from *session) (childID []byte, ok bool) {
	t.update(func(in *inFlight) {
		if e, found := in.reverse[id]; found && e.sess == from {
			t.forgetQuestionLocked(in, id, e, time.Since(t.base))
			childID, ok = e.childID, true
		}
	})
	return childID, ok
}

// asks reports whether sess was asked the child's request under pool id
// id and the question still waits for its answer.
func (t *requestTable) asks(id uint64, sess *session) (ok bool) {
	t.update(func(in *inFlight) {
		e, found := in.reverse[id]
		ok = found && e.sess == sess
	})
	return ok
}

// progressAsked reports whether sess was asked a question of the child's
// that waits for its answer and carries the progress token key
// (progressKey): progress under it is that client's to report.
func (t *requestTable) progressAsked(sess *session, key string) (ok bool) {
	if key == "" {
		return false
	}
	t.update(func(in *inFlight) {
		for _, e := range in.reverse {
			if e.sess == sess && e.progress == key {
				ok = true
				return
			}
		}
	})
	return ok
}

// withdrawQuestion forgets the child's request childID, which the child
// cancelled, and says which session was asked it under which pool id.
func (t *requestTable) withdrawQuestion(childID []byte) (id uint64, sess *session) {
	t.update(func(in *inFlight) {
		for k, e := range in.reverse {
			if string(e.childID) == string(childID) {
				id, sess = k, e.sess
				t.forgetQuestionLocked(in, k, e, time.Since(t.base))
				return
			}
		}
	})
	return id, sess
}

// dropQuestionsOf forgets the child's requests to a session that left,
// and the elicitations it was asked, and returns the requests' child ids,
// to be answered with an error.
func (t *requestTable) dropQuestionsOf(s *session) (childIDs [][]byte) {
	t.update(func(in *inFlight) {
		childIDs = t.dropQuestionsToLocked(in, s)
		for k, e := range in.elicited {
			if e.sess == s {
				delete(in.elicited, k)
			}
		}
	})
	return childIDs
}

// voidQuestionsTo forgets the child's requests to a session that will
// answer none (its client closed its input, or the pool closes it while
// its client is there), and returns their child ids, to be answered with
// an error, and the questions the caller withdraws at the session, each
// once its asker has delivered it (openQuestion.posing), even one its
// asker is delivering still: the caller, not the asker, can write the
// withdrawal before the session's stream ends (session.close). The
// elicitations it was asked stay: it may still read their completions.
func (t *requestTable) voidQuestionsTo(s *session) (childIDs [][]byte, withdraw []openQuestion) {
	t.update(func(in *inFlight) {
		now := time.Since(t.base)
		for k, e := range in.reverse {
			if e.sess == s {
				childIDs = append(childIDs, e.childID)
				t.forgetQuestionLocked(in, k, e, now)
				withdraw = append(withdraw, openQuestion{id: k, sess: s, posing: e.posing})
			}
		}
	})
	return childIDs, withdraw
}

// dropQuestionsToLocked forgets the child's requests to s, under the
// table's lock, and returns their child ids.
func (t *requestTable) dropQuestionsToLocked(in *inFlight, s *session) (childIDs [][]byte) {
	now := time.Since(t.base)
	for k, e := range in.reverse {
		if e.sess == s {
			childIDs = append(childIDs, e.childID)
			t.forgetQuestionLocked(in, k, e, now)
		}
	}
	return childIDs
}

// alive reports whether p has not ended.
func (t *requestTable) alive(p *pending) bool {
	var ok bool
	t.update(func(*inFlight) { ok = p.state != stDone })
	return ok
}

// caller is a client's request in flight on the child, as a child's
// question may be for it (backend.routeQuestion).
type caller struct {
	p    *pending
	sess *session
	x    *exchange // its HTTP POST, for a modern call carrying a question
	// modern: a 2026-07-28 request, which answers a question only by
	// carrying it to its client (mrtr.go); canCarry: one that can carry
	// one now (a call of an MRTR method, not held already); declared:
	// its own request declared what the question needs.
	modern, canCarry, declared bool
}

// callers lists, oldest first, the client requests that may have reached
// the child (askers), as a child's question needing capability
// (questionNeeds; "" for none a modern call can carry) finds them.
func (t *requestTable) callers(capability string) []caller {
	var out []caller
	t.update(func(in *inFlight) {
		for _, p := range in.pending {
			if p.sess == nil || !p.mayHaveRunLocked() {
				continue
			}
			c := caller{p: p, sess: p.sess, x: p.x, modern: p.modern}
			if p.modern {
				c.canCarry = capability != "" && p.held == nil && mrtrMethods[p.method]
				c.declared = c.canCarry && p.caps.has(capability)
			}
			out = append(out, c)
		}
	})
	slices.SortFunc(out, func(x, y caller) int { return cmpUint(x.p.id, y.p.id) })
	return out
}

// hold makes x the hold of its call if the call is still in flight and
// not held already; it returns the call's session, exchange and client
// id. Its timeout waits while it is held (a person may take minutes to
// answer): until the client's answer comes (takeOver), it is due when a
// hold is no longer kept for its retry (holdKeep; pauseLocked).
func (t *requestTable) hold(x *mrtrHold) (sess *session, ex *exchange, origID []byte, ok bool) {
	p := x.p
	t.update(func(in *inFlight) {
		if p.state == stDone || p.held != nil || p.sess == nil {
			return
		}
		p.held = x
		t.pauseLocked(in, p, time.Since(t.base))
		sess, ex, origID, ok = p.sess, p.x, p.origID, true
	})
	return sess, ex, origID, ok
}

// heldState says whether a hold's call has ended, and whether its answer
// is kept for the retry.
func (t *requestTable) heldState(x *mrtrHold) (done, kept bool) {
	t.update(func(*inFlight) { done, kept = x.p.state == stDone, x.final != nil })
	return done, kept
}

// keep stores the answer to a held call for the client's retry.
func (t *requestTable) keep(x *mrtrHold, line []byte) {
	t.update(func(*inFlight) {
		if x.final == nil {
			x.final = line
			close(x.kept)
		}
	})
}

// retryState is what a client's retry of a held call finds: the answer
// kept for it, whether the call ended, and whether x still holds it.
func (t *requestTable) retryState(x *mrtrHold) (final []byte, done, mine bool) {
	t.update(func(*inFlight) { final, done, mine = x.final, x.p.state == stDone, x.p.held == x })
	return final, done, mine
}

// takeOver gives a held call to the client's retry: its answer, if any,
// goes to session s under id (to the retry's exchange ex, if an HTTP POST
// carried it) from now on, and its progress under the retry's token
// (token; none without one: a progress notification names a token of an
// active request), and the child's next question is judged by the
// retry's capabilities (caps); answered releases the hold (the child gets
// the client's input next), and the call's timeout goes on from where it
// was when the hold began. final and done are as retryState reports
// them.
func (t *requestTable) takeOver(x *mrtrHold, s *session, id []byte, ex *exchange, answered bool, caps clientCaps, token []byte) (final []byte, done bool) {
	p := x.p
	t.update(func(in *inFlight) {
		final, done = x.final, p.state == stDone
		if !done || final != nil {
			p.sess, p.origID, p.x, p.modern, p.caps, p.origToken = s, id, ex, true, caps, token
		}
		if !done && answered && p.held == x {
			p.held = nil
			t.resumeLocked(in, p, time.Since(t.base))
		}
	})
	return final, done
}

// infos lists the client requests in flight for a snapshot. childPID is
// the child running now, shown for requests not yet written; st says
// whether that child reads its input: when it does not, the request it
// has part of, and those queued behind it, say so.
func (t *requestTable) infos(server string, childPID int, now time.Time, st stall) []RequestInfo {
	var out []RequestInfo
	writing, waiting := st.reasons()
	t.update(func(in *inFlight) {
		out = make([]RequestInfo, 0, len(in.pending))
		for _, p := range in.pending {
			if p.sess == nil {
				continue
			}
			ri := RequestInfo{PoolID: p.id, Session: p.sess.id, Server: server, Method: p.method, Name: p.name,
				OriginalID: string(p.origID), ReceivedAt: p.received, AgeMs: now.Sub(p.received).Milliseconds(),
				WrittenToChild: p.state == stWritten || p.everWritten, PID: int(p.pid)}
			if p.x != nil && p.x.stateless {
				ri.Client = p.x.client.Name
			}
			if ri.WrittenToChild {
				ri.WrittenAt = p.written
			} else {
				ri.PID = childPID
			}
			switch {
			case p.state == stQueued:
				ri.StateReason = waiting
			case p.state == stWriting && p == st.p:
				ri.StateReason = writing
			}
			out = append(out, ri)
		}
	})
	return out
}
