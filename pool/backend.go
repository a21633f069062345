package pool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// backend is one supervised child slot: the child process, its restarts,
// and every request waiting on it. Its goroutines, one job each:
//
//   - supervise (one per backend) alone starts, handshakes, waits for and
//     restarts children, and applies the at-most-once rule when one dies;
//   - readLoop (one per child) alone reads the child's stdout;
//   - writeLoop (one per child) writes the child's stdin, except that a
//     sender whose request finds nothing queued and nobody writing
//     writes it itself, without waiting (send); writing says who writes;
//   - stderrLoop (one per child) fills the stderr ring.
//
// The pending map and the write queue change only under mu, and mu is
// never held across a read, a write, a blocking send or a callback.
type backend struct {
	p         *Pool
	srv       *server
	owner     *session   // set in share "session" mode
	roots     []string   // the partition's roots, answered to the child's roots/list (roots.go)
	caps      clientCaps // what the pool declares to the child: roots only with roots, sampling/elicitation only when its first session has them
	createdAt time.Time
	log       *slog.Logger
	stderr    *ring

	wake     chan struct{} // cap 1: the write queue changed
	stopReq  chan struct{} // closed by stop
	restartQ chan struct{} // cap 1: the user asked for a restart
	done     chan struct{} // closed when supervise returns
	stopOnce sync.Once
	detachQ  chan struct{} // closed by carry: supervise returns and leaves the child running

	// A child an earlier pool handed over, and its handshake: supervise
	// adopts it instead of starting its first child. Set before supervise
	// starts, then read only by it.
	carried   *child
	carriedHS *handshake

	mu          sync.Mutex // guards everything below
	cfg         ServerConfig
	state       string
	child       *child
	hs          *handshake    // the child's cached answer; nil until the first handshake
	hsDone      chan struct{} // closed at the first handshake's end, or when the backend stops
	hsErr       error         // why the backend cannot serve (failed, stopped)
	pending     map[uint64]*pending
	queue       []outItem
	writing     bool                    // a write to the child's stdin is under way: writeLoop's or a sender's (send)
	tokens      map[uint64]*pending     // pool progress token -> request
	reverse     map[uint64]reverseEntry // pool id of a child's request -> where it went
	subs        map[string]int          // resource URI -> subscribed sessions
	hints       map[string]bool         // tools the child declared safe to repeat
	restarts    int
	exits       []time.Time // recent unexpected exits, for crash-loop detection
	startedAt   time.Time
	lastErr     string
	stopErr     error
	draining    bool
	emptied     chan struct{} // closed when draining and nothing is pending
	badLines    uint64
	orphaned    uint64
	lastClient  *session // most recently active session, for server-to-client requests
	childLevel  string   // the log level the pool set on the child; "" never set (loglevel.go)
	reason      string   // why the state is what it is, when not obvious (resolve.go)
	resolved    []string // what the child was started as, when resolved; nil: as configured
	resolveNote string

	up upstream // a modern child's one subscriptions/listen, for all listeners (listen.go); own lock
}

// Pending request states, guarded by backend.mu.
const (
	stQueued  uint8 = iota // in the write queue
	stWriting              // being written (writeLoop or send); may or may not reach the child
	stWritten              // fully written to the child
	stDone                 // answered, failed or cancelled; owned by whoever ended it
)

// pending is one request forwarded to a child (or sent by the pool itself).
type pending struct {
	id        uint64   // pool id, as written to the child
	sess      *session // nil for the pool's own requests
	b         *backend
	origID    []byte // the client's exact id bytes
	method    string
	name      string // tool, prompt or resource
	line      []byte // the request as written to the child
	token     uint64 // pool progress token, 0 if none
	origToken []byte
	received  time.Time
	timer     *time.Timer
	reply     chan []byte // the pool's own requests get the raw response here
	modern    bool        // the client spoke 2026-07-28 in this request (modern.go)

	// Guarded by backend.mu. sess and origID change only while held:
	// a modern client's retry takes the call over (mrtr.go).
	held    *mrtrHold
	state   uint8
	written time.Time
	pid     int
	retried bool
	// everWritten is sticky: the request reached a child once, even if
	// it was re-queued since (safe to repeat, after that child died).
	everWritten bool
	// slot is the request's ledger slot + 1 (ledger.go), 0 if none:
	// taken and released under the session's mu, read by writeLoop.
	slot atomic.Int32
	// The last progress value the client was sent, so a retried call's
	// progress never goes back.
	progressSeen float64
	progressSent bool
}

// outItem is one line for the child: a request, or (p == nil) a
// notification or an answer to the child's own request.
type outItem struct {
	p     *pending
	line  []byte
	early bool // part of the handshake: written before the child is ready
	// rest is what a sender that began writing line itself left unwritten
	// (the child has the line's start): written first, and only to
	// restFor, whatever became of p.
	rest    []byte
	restFor *child
}

// reverseEntry remembers a request the child sent to a client.
type reverseEntry struct {
	childID []byte
	sess    *session
}

func newBackend(srv *server, cfg ServerConfig, owner *session, roots []string, caps clientCaps) *backend {
	b := buildBackend(srv, cfg, owner, roots, caps)
	srv.p.wg.Go(b.supervise)
	return b
}

// buildBackend makes a backend without starting its supervisor.
func buildBackend(srv *server, cfg ServerConfig, owner *session, roots []string, caps clientCaps) *backend {
	caps.roots = len(roots) > 0
	b := &backend{
		p: srv.p, srv: srv, owner: owner, roots: roots, caps: caps, cfg: cfg, createdAt: time.Now(),
		log:      srv.p.log.With("server", cfg.Name),
		stderr:   newRing(64),
		wake:     make(chan struct{}, 1),
		stopReq:  make(chan struct{}),
		restartQ: make(chan struct{}, 1),
		done:     make(chan struct{}),
		state:    StateStarting,
		hsDone:   make(chan struct{}),
		pending:  map[uint64]*pending{},
		tokens:   map[uint64]*pending{},
		reverse:  map[uint64]reverseEntry{},
		subs:     map[string]int{},
		hints:    map[string]bool{},
		detachQ:  make(chan struct{}),
	}
	return b
}

func (b *backend) config() ServerConfig {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg
}

func (b *backend) setConfig(cfg ServerConfig) {
	b.mu.Lock()
	b.cfg = cfg
	b.mu.Unlock()
}

func (b *backend) requestTimeout() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cfg.RequestTimeout > 0 {
		return b.cfg.RequestTimeout
	}
	return defaultRequestTimeout
}

func (b *backend) pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.child == nil {
		return 0
	}
	return b.child.pid
}

func (b *backend) stateName() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

func (b *backend) failed() bool { return b.stateName() == StateFailed }

func (b *backend) failureMessage() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == StateFailed && b.hsErr != nil {
		return b.hsErr.Error()
	}
	return ""
}

// handshakeResult waits for the child's cached handshake, as a client's
// initialize or server/discover needs it.
func (b *backend) handshakeResult(cancel <-chan struct{}) (*handshake, error) {
	b.mu.Lock()
	ch := b.hsDone
	b.mu.Unlock()
	select {
	case <-ch:
	case <-cancel:
		return nil, errSessionEnded
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hs != nil && b.state != StateFailed {
		return b.hs, nil
	}
	if b.hsErr != nil {
		return nil, b.hsErr
	}
	return nil, fmt.Errorf("server %q is not running", b.srv.name)
}

// send queues a client request for the child. The caller has already
// rewritten its id to p.id. An error means the request was not queued.
func (b *backend) send(p *pending) error {
	b.mu.Lock()
	switch {
	case b.state == StateFailed:
		err := b.hsErr
		b.mu.Unlock()
		return err
	case b.stopErr != nil:
		err := b.stopErr
		b.mu.Unlock()
		return err
	case len(b.pending) >= b.p.opts.MaxPending:
		n := len(b.pending)
		b.mu.Unlock()
		return &jsonrpc.Error{Code: jsonrpc.CodeOverloaded,
			Message: fmt.Sprintf("server %q has %d requests waiting; refusing more", b.srv.name, n),
			Data:    map[string]any{"retryable": true}}
	}
	b.pending[p.id] = p
	if p.token != 0 {
		b.tokens[p.token] = p
	}
	if p.sess != nil {
		b.lastClient = p.sess
	}
	if c := b.child; c != nil && c.direct != nil && c.ready && !b.writing && len(b.queue) == 0 {
		// Nothing is queued and nobody is writing: this goroutine writes
		// the request itself, without a hand-off to writeLoop.
		b.writing = true
		p.state = stWriting
		if p.sess != nil {
			p.sess.ledger.written(p.slot.Load())
		}
		b.mu.Unlock()
		b.writeDirect(c, p)
		return nil
	}
	p.state = stQueued
	b.queue = append(b.queue, outItem{p: p, line: p.line})
	b.mu.Unlock()
	b.signal()
	return nil
}

// writeDirect is send's own write of p to c, begun with writing set.
// What the pipe does not take at once goes to the front of the queue
// for writeLoop: the whole request when nothing was taken, else the rest
// of its line. Like writeLoop, it marks p written only once every byte
// of it was taken.
func (b *backend) writeDirect(c *child, p *pending) {
	n, err := c.direct.writeNow(p.line)
	now := time.Now()
	written := false
	b.mu.Lock()
	b.writing = false
	switch {
	case p.state != stWriting:
		// Ended meanwhile, or taken by reap after the child died. Only a
		// line cut short, on the same child, still needs its end.
		if n > 0 && n <= len(p.line) && b.child == c {
			b.queue = slices.Insert(b.queue, 0, outItem{p: p, line: p.line, rest: restOf(p.line, n), restFor: c})
		}
	case n == len(p.line)+1:
		p.state, p.written, p.pid = stWritten, now, c.pid
		written = p.sess != nil
	case n == 0:
		p.state = stQueued
		if p.sess != nil && !p.everWritten {
			p.sess.ledger.taken(p.slot.Load())
		}
		b.queue = slices.Insert(b.queue, 0, outItem{p: p, line: p.line})
	default:
		b.queue = slices.Insert(b.queue, 0, outItem{p: p, line: p.line, rest: restOf(p.line, n), restFor: c})
	}
	more := len(b.queue) > 0
	b.mu.Unlock()
	if written {
		b.p.emit(Event{Kind: EventRequestWritten, Time: now, Server: b.srv.name, Session: p.sess.id, PID: c.pid, PoolID: p.id})
	}
	if more {
		b.signal()
	}
	if err != nil {
		b.log.Debug("write to child failed", "pid", c.pid, "err", err)
	}
}

// restOf is what is left of line and its newline after n bytes.
func restOf(line []byte, n int) []byte {
	rest := make([]byte, 0, len(line)+1-n)
	return append(append(rest, line[n:]...), '\n')
}

// sendRaw queues a line that is not a request: a notification or an answer
// to the child's own request.
func (b *backend) sendRaw(line []byte) {
	b.mu.Lock()
	if b.stopErr != nil && b.child == nil {
		b.mu.Unlock()
		return
	}
	b.queue = append(b.queue, outItem{line: line})
	b.mu.Unlock()
	b.signal()
}

func (b *backend) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// end takes p out of the pending map. Exactly one caller wins: the
// response, the timeout, the cancel, the disconnect or the failure. written
// says whether the child may have seen the request.
func (b *backend) end(p *pending) (won, written bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.endLocked(p)
}

func (b *backend) endLocked(p *pending) (won, written bool) {
	if b.pending[p.id] != p {
		return false, false
	}
	delete(b.pending, p.id)
	if p.token != 0 {
		delete(b.tokens, p.token)
	}
	written = p.wasWrittenLocked()
	p.state = stDone
	b.checkEmptiedLocked()
	return true, written
}

// wasWrittenLocked reports whether p may have reached a child: it is
// being written or was written, now or before a re-queue.
func (p *pending) wasWrittenLocked() bool {
	return p.state == stWriting || p.state == stWritten || p.everWritten
}

func (b *backend) checkEmptiedLocked() {
	if b.draining && len(b.pending) == 0 && b.emptied != nil {
		close(b.emptied)
		b.emptied = nil
	}
}

// cancelAtChild tells the child to stop working on a request it has seen.
func (b *backend) cancelAtChild(p *pending, reason string) {
	params := make([]byte, 0, 64)
	params = append(params, `{"requestId":`...)
	params = jsonrpc.AppendUint(params, p.id)
	params = append(params, `,"reason":`...)
	params = appendJSONString(params, reason)
	params = append(params, '}')
	b.sendRaw(jsonrpc.AppendNotification(nil, "notifications/cancelled", params))
}

// writeLoop writes the child's stdin whenever a sender did not (send): it
// takes everything queued, writes it with one Write, and marks a request
// written only when Write reports all of its bytes (and newline) taken:
// at-most-once depends on that bit. The ledger hears "written" before the
// write, so a pool killed mid-write never under-reports. It exits when
// the child exits or a write fails.
func (b *backend) writeLoop(c *child) {
	defer close(c.writerDone)
	const maxBatch = 256 << 10
	var (
		buf   []byte
		batch []outItem
		ends  []int
		wrote []*pending
	)
	for {
		buf, batch, ends = buf[:0], batch[:0], ends[:0]
		b.mu.Lock()
		if !b.writing {
			keep := b.queue[:0]
			for _, it := range b.queue {
				switch {
				case it.rest != nil:
					if it.restFor != c {
						continue // the end of a line for a child that is gone
					}
					buf = append(buf, it.rest...) // first in the queue: the child has the line's start
				case it.p != nil && it.p.state == stDone:
					continue // ended while queued: the child never needs it
				case (!c.ready && !it.early) || (len(buf) > 0 && len(buf)+len(it.line) > maxBatch):
					keep = append(keep, it)
					continue
				default:
					buf = append(buf, it.line...)
					buf = append(buf, '\n')
					if it.p != nil {
						it.p.state = stWriting
						if it.p.sess != nil {
							it.p.sess.ledger.written(it.p.slot.Load())
						}
					}
				}
				ends = append(ends, len(buf))
				batch = append(batch, it)
			}
			clear(b.queue[len(keep):])
			b.queue = keep
			b.writing = len(batch) > 0
		}
		b.mu.Unlock()

		if len(batch) == 0 {
			select {
			case <-b.wake:
				continue
			case <-c.exited:
				return
			case <-c.detach:
				return
			}
		}
		n, err := c.stdin.Write(buf)
		now := time.Now()
		wrote = wrote[:0]
		var requeue []outItem
		b.mu.Lock()
		b.writing = false
		for i, it := range batch {
			switch {
			case it.p == nil:
			case ends[i] <= n && it.p.state == stWriting:
				it.p.state = stWritten
				it.p.written = now
				it.p.pid = c.pid
				if it.p.sess != nil {
					wrote = append(wrote, it.p)
				}
			case it.p.state == stWriting && it.rest == nil:
				// (Only after a failed write: the child is gone.)
				it.p.state = stQueued
				if it.p.sess != nil && !it.p.everWritten {
					it.p.sess.ledger.taken(it.p.slot.Load())
				}
				requeue = append(requeue, it)
			}
		}
		if len(requeue) > 0 {
			b.queue = append(requeue, b.queue...)
		}
		b.mu.Unlock()
		for _, p := range wrote {
			b.p.emit(Event{Kind: EventRequestWritten, Time: now, Server: b.srv.name, Session: p.sess.id, PID: c.pid, PoolID: p.id})
		}
		clear(batch)
		if cap(buf) > keepBuf {
			buf = nil // one large request must not stay resident for the child's life
			b.p.releasedLarge()
		}
		if err != nil {
			b.log.Debug("write to child failed", "pid", c.pid, "err", err)
			return
		}
	}
}

// readLoop is the only reader of the child's stdout. It resolves responses,
// routes the child's notifications and requests, and never blocks on a
// session: delivery is an offer to the session's bounded queue. It exits at
// EOF.
func (b *backend) readLoop(c *child) {
	defer close(c.readerDone)
	out := c.output
	if len(c.unread) > 0 {
		out = io.MultiReader(bytes.NewReader(c.unread), c.output)
	}
	lr := newLineReader(out, b.p.opts.MaxMessageBytes)
	lr.onRelease = b.p.releasedLarge
	for {
		line, err := lr.next()
		if err != nil {
			if isClosed(c.detach) {
				c.leftover <- lr.unread() // for the next pool
				return
			}
			var tl *tooLongError
			if errors.As(err, &tl) {
				b.oversize(tl)
				if errors.Unwrap(err) == nil || err == error(tl) {
					continue
				}
			}
			return
		}
		msg, err := jsonrpc.Parse(line)
		if err != nil {
			b.badLine(line, err)
			continue
		}
		switch msg.Kind {
		case jsonrpc.KindResponse:
			b.onResponse(&msg)
		case jsonrpc.KindRequest:
			b.onChildRequest(c, &msg)
		case jsonrpc.KindNotification:
			b.onChildNotification(&msg)
		}
	}
}

func (b *backend) badLine(line []byte, err error) {
	b.mu.Lock()
	b.badLines++
	n := b.badLines
	b.mu.Unlock()
	if n <= 10 || n%1000 == 0 {
		b.log.Warn("child wrote a line that is not JSON-RPC", "count", n, "err", err, "line", truncate(string(line), 120))
	}
}

// oversize fails the request an oversize response was meant for, if its id
// can be found at either end of the line.
func (b *backend) oversize(tl *tooLongError) {
	b.log.Warn("child wrote an oversize message", "bytes", tl.size, "limit", b.p.opts.MaxMessageBytes)
	id, ok := findPoolID(tl.head)
	if !ok {
		id, ok = findPoolID(tl.tail)
	}
	if !ok {
		return
	}
	b.mu.Lock()
	p := b.pending[id]
	b.mu.Unlock()
	if p == nil {
		return
	}
	b.fail(p, &jsonrpc.Error{Code: jsonrpc.CodeMessageTooLarge,
		Message: fmt.Sprintf("server %q answered with %d bytes or more, over the %d-byte limit", b.srv.name, tl.size, b.p.opts.MaxMessageBytes)})
}

// onResponse routes a child's answer to the one session that asked.
func (b *backend) onResponse(msg *jsonrpc.Message) {
	id, ok := jsonrpc.ParseUint(msg.IDBytes())
	var p *pending
	b.mu.Lock()
	if ok {
		p = b.pending[id]
	}
	if p != nil {
		b.endLocked(p)
	} else {
		b.orphaned++
	}
	b.mu.Unlock()
	if p == nil {
		b.p.orphaned.Add(1)
		b.p.emit(Event{Kind: EventOrphan, Server: b.srv.name, OriginalID: string(msg.IDBytes()), Status: StatusOrphaned})
		return
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.method == "tools/list" && msg.Result.Present() {
		b.learnHints(msg.Result.Of(msg.Raw)) // a client's, or the pool's own (listToolsForHints)
	}
	if p.reply != nil {
		p.reply <- append([]byte(nil), msg.Raw...)
		return
	}
	sess, origID, held := b.recipient(p)
	if held {
		b.keepForRetry(p, msg.Raw)
		return
	}
	if b.askLegacyClient(p, sess, origID, msg) {
		b.p.emit(Event{Kind: EventRequestDone, Server: b.srv.name, Session: sess.id, PID: p.pid, PoolID: p.id,
			Method: p.method, Name: p.name, Status: StatusOK, Size: len(msg.Raw), Written: true, Payload: b.capture(msg.Raw)})
		return
	}
	var out []byte
	if b.bridgesToModern(p) {
		out = modernResponse(msg, p.method, origID)
	} else {
		out = jsonrpc.Splice(nil, msg.Raw, msg.ID, origID)
	}
	status, code, emsg := StatusOK, 0, ""
	if msg.Error.Present() {
		status = StatusError
		code, emsg = errorFields(msg.Error.Of(msg.Raw))
		b.p.errorsN.Add(1)
	}
	sess.deliverResponse(p, out)
	b.p.emit(Event{Kind: EventRequestDone, Server: b.srv.name, Session: sess.id, PID: p.pid, PoolID: p.id,
		Method: p.method, Name: p.name, Status: status, ErrCode: code, Err: emsg, Size: len(out), Written: true,
		Payload: b.capture(out)})
}

// progressValue reads a progress notification's progress number.
func progressValue(params []byte) (float64, bool) {
	sp := jsonrpc.Member(params, "progress")
	if !sp.Present() {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(sp.Of(params)), 64)
	return v, err == nil
}

func (b *backend) capture(line []byte) []byte {
	n := b.p.opts.CapturePayloads
	if n <= 0 {
		return nil
	}
	return append([]byte(nil), line[:min(n, len(line))]...)
}

// fail ends p with err, telling its session. It reports whether it won.
func (b *backend) fail(p *pending, err error) bool {
	won, written := b.end(p)
	if !won {
		return false
	}
	b.finishWithError(p, err, written, StatusFailed)
	return true
}

func (b *backend) finishWithError(p *pending, err error, written bool, status string) {
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.reply != nil {
		close(p.reply)
		return
	}
	rpcErr := asRPCError(err)
	b.p.errorsN.Add(1)
	sess, origID, held := b.recipient(p)
	if held {
		b.keepForRetry(p, jsonrpc.AppendErrorResponse(nil, origID, rpcErr))
	} else {
		sess.deliverResponse(p, jsonrpc.AppendErrorResponse(nil, origID, rpcErr))
	}
	b.p.emit(Event{Kind: EventRequestDone, Server: b.srv.name, Session: sess.id, PID: p.pid, PoolID: p.id,
		Method: p.method, Name: p.name, Status: status, ErrCode: rpcErr.Code, Err: rpcErr.Message, Written: written})
}

// expire is the per-request timeout: the client gets an error, the child a
// cancellation.
func (b *backend) expire(p *pending) {
	won, written := b.end(p)
	if !won {
		return
	}
	b.p.timeouts.Add(1)
	timeout := b.requestTimeout()
	if written {
		b.cancelAtChild(p, "request timed out in switchboard")
	}
	b.finishWithError(p, &jsonrpc.Error{Code: jsonrpc.CodeRequestTimeout,
		Message: fmt.Sprintf("server %q did not answer %s within %s", b.srv.name, p.method, timeout),
		Data:    map[string]any{"retryable": true, "mayHaveExecuted": written}}, written, StatusTimeout)
}

// cancel ends p because its client cancelled it or went away. The client
// gets no answer (MCP: a cancelled request is not answered); the child
// gets notifications/cancelled if it saw the request. Late answers are
// orphans.
func (b *backend) cancel(p *pending, reason string) {
	won, written := b.end(p)
	if !won {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	b.p.cancelled.Add(1)
	if written {
		b.cancelAtChild(p, reason)
	}
	b.p.emit(Event{Kind: EventRequestDone, Server: b.srv.name, Session: p.sess.id, PID: p.pid, PoolID: p.id,
		Method: p.method, Name: p.name, Status: StatusCancelled, Err: reason, Written: written})
}

// onChildNotification routes a notification from the child. Nothing is
// broadcast blindly: progress goes to its token's owner, a resource update
// to its subscribers, list changes to the server's sessions, log messages
// to sessions that asked for them.
func (b *backend) onChildNotification(msg *jsonrpc.Message) {
	params := msg.Params.Of(msg.Raw)
	if b.routeTagged(msg) {
		return // a modern child's notification for one subscriptions/listen
	}
	switch msg.Method {
	case "notifications/progress":
		tok := jsonrpc.Member(params, "progressToken")
		n, ok := jsonrpc.ParseUint(tok.Of(params))
		var p *pending
		var to *session
		progress, hasValue := progressValue(params)
		if ok {
			b.mu.Lock()
			if p = b.tokens[n]; p != nil && p.held == nil {
				to = p.sess
				// Progress must increase: a retried call starts again from
				// zero, so its notifications wait until they pass the last
				// value the client saw.
				if hasValue {
					if p.progressSent && progress <= p.progressSeen {
						to = nil
					} else {
						p.progressSeen, p.progressSent = progress, true
					}
				}
			}
			b.mu.Unlock()
		}
		if to == nil {
			return // the request ended (its client no longer cares), waits for a retry, or went back
		}
		abs := jsonrpc.Span{Start: msg.Params.Start + tok.Start, End: msg.Params.Start + tok.End}
		to.deliver(jsonrpc.Splice(nil, msg.Raw, abs, p.origToken))
	case "notifications/cancelled":
		// The child gives up on a request it sent to a client.
		rid := jsonrpc.Member(params, "requestId")
		childID := rid.Of(params)
		b.mu.Lock()
		var poolID uint64
		var ent reverseEntry
		for id, e := range b.reverse {
			if string(e.childID) == string(childID) {
				poolID, ent = id, e
				delete(b.reverse, id)
				break
			}
		}
		b.mu.Unlock()
		if ent.sess == nil {
			return
		}
		abs := jsonrpc.Span{Start: msg.Params.Start + rid.Start, End: msg.Params.Start + rid.End}
		ent.sess.deliver(jsonrpc.Splice(nil, msg.Raw, abs, jsonrpc.AppendUint(nil, poolID)))
	case "notifications/resources/updated":
		uri, _ := jsonrpc.String(params, jsonrpc.Member(params, "uri"))
		for _, s := range b.sessions() {
			s.deliverChange(b, msg, uri)
		}
	case "notifications/message":
		line := append([]byte(nil), msg.Raw...)
		level, _ := jsonrpc.String(params, jsonrpc.Member(params, "level"))
		for _, s := range b.sessions() {
			if s.admitsLog(level) {
				s.deliver(line)
			}
		}
	default:
		if strings.HasSuffix(msg.Method, "/list_changed") {
			b.forgetHintsIf(msg.Method)
			for _, s := range b.sessions() {
				s.deliverChange(b, msg, "")
			}
			return
		}
		b.log.Debug("dropping a notification no session asked for", "method", msg.Method)
	}
}

// sessions lists the sessions this backend serves.
func (b *backend) sessions() []*session {
	if b.owner != nil {
		return []*session{b.owner}
	}
	return b.srv.membersOf(b)
}

// onChildRequest routes a server-to-client request (sampling, elicitation,
// roots/list) to one live session: the one whose request is oldest in
// flight here, else the most recently active. Ping is answered here.
func (b *backend) onChildRequest(c *child, msg *jsonrpc.Message) {
	childID := append([]byte(nil), msg.IDBytes()...)
	if msg.Method == "ping" {
		b.sendRaw(jsonrpc.AppendResponse(nil, childID, []byte("{}")))
		return
	}
	if msg.Method == "roots/list" {
		// Never a client's: the child's roots are its partition's.
		b.sendRaw(jsonrpc.AppendResponse(nil, childID, rootsListResult(b.roots)))
		return
	}
	if b.carryAsMRTR(msg, childID) {
		return
	}
	target := b.pickSession(msg.Method)
	if target == nil {
		b.sendRaw(jsonrpc.AppendErrorResponse(nil, childID, &jsonrpc.Error{Code: jsonrpc.CodeNoClient,
			Message: fmt.Sprintf("no connected client can answer %s", msg.Method)}))
		return
	}
	id := b.p.nextID.Add(1)
	b.mu.Lock()
	b.reverse[id] = reverseEntry{childID: childID, sess: target}
	b.mu.Unlock()
	target.deliver(jsonrpc.Splice(nil, msg.Raw, msg.ID, jsonrpc.AppendUint(nil, id)))
}

func (b *backend) pickSession(method string) *session {
	can := func(s *session) bool { return s != nil && s.alive() && s.canAnswer(method) }
	b.mu.Lock()
	var oldest *pending
	for _, p := range b.pending {
		if p.sess != nil && can(p.sess) && (oldest == nil || p.id < oldest.id) {
			oldest = p
		}
	}
	last := b.lastClient
	b.mu.Unlock()
	if oldest != nil {
		return oldest.sess
	}
	if can(last) {
		return last
	}
	var best *session
	for _, s := range b.sessions() {
		if can(s) && (best == nil || s.lastActiveAt().After(best.lastActiveAt())) {
			best = s
		}
	}
	return best
}

// answerChild routes a client's answer to one of the child's requests back
// to the child, with the child's own id restored.
func (b *backend) answerChild(from *session, msg *jsonrpc.Message) bool {
	id, ok := jsonrpc.ParseUint(msg.IDBytes())
	if !ok {
		return false
	}
	b.mu.Lock()
	ent, found := b.reverse[id]
	if found && ent.sess == from {
		delete(b.reverse, id)
	}
	b.mu.Unlock()
	if !found || ent.sess != from {
		return false
	}
	b.sendRaw(jsonrpc.Splice(nil, msg.Raw, msg.ID, ent.childID))
	return true
}

// detach forgets a session's stake in the child: its answers to the
// child's requests become errors, its subscriptions are released.
func (b *backend) detach(s *session, subs []string) {
	var unanswered [][]byte
	var release []string
	b.mu.Lock()
	for id, e := range b.reverse {
		if e.sess == s {
			unanswered = append(unanswered, e.childID)
			delete(b.reverse, id)
		}
	}
	for _, uri := range subs {
		if b.subs[uri]--; b.subs[uri] <= 0 {
			delete(b.subs, uri)
			release = append(release, uri)
		}
	}
	if b.lastClient == s {
		b.lastClient = nil
	}
	b.mu.Unlock()
	for _, id := range unanswered {
		b.sendRaw(jsonrpc.AppendErrorResponse(nil, id, &jsonrpc.Error{Code: jsonrpc.CodeNoClient,
			Message: "the client that was asked disconnected"}))
	}
	for _, uri := range release {
		b.internalRequest("resources/unsubscribe", subscribeParams(uri))
	}
	b.syncLogLevel() // s is closed: the child goes back to what the others asked
}

// internalRequest sends a request of the pool's own whose answer nobody
// waits for (for example the last unsubscribe of a resource).
func (b *backend) internalRequest(method string, params []byte) {
	id := b.p.nextID.Add(1)
	p := &pending{id: id, method: method, received: time.Now(), reply: make(chan []byte, 1),
		line: jsonrpc.AppendRequest(nil, id, method, params)}
	// The timer is set before the request is shared with the reader.
	p.timer = time.AfterFunc(b.requestTimeout(), func() { b.end(p) })
	if err := b.send(p); err != nil {
		p.timer.Stop()
	}
}

// subscribe counts a session's subscription to uri. Only the first
// subscriber's request reaches the child; the rest are answered here.
func (b *backend) subscribe(uri string) (first bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs[uri]++
	return b.subs[uri] == 1
}

// unsubscribe is subscribe's inverse; last says the child must be told.
func (b *backend) unsubscribe(uri string) (last bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs[uri] <= 0 {
		return false
	}
	b.subs[uri]--
	if b.subs[uri] == 0 {
		delete(b.subs, uri)
		return true
	}
	return false
}

func subscribeParams(uri string) []byte {
	return append(appendJSONString([]byte(`{"uri":`), uri), '}')
}

// snapshot copies the backend's state for Pool.Snapshot.
func (b *backend) snapshot(now time.Time) (BackendInfo, []RequestInfo) {
	b.mu.Lock()
	info := BackendInfo{
		Server: b.srv.name, State: b.state, StartedAt: b.startedAt, Restarts: b.restarts,
		InFlight: 0, Command: append([]string{b.cfg.Command}, b.cfg.Args...),
		LastError: b.lastErr, BadLines: b.badLines, Orphaned: b.orphaned,
		ResolvedCommand: b.resolved, ResolveNote: b.resolveNote, StateReason: b.reason,
	}
	if b.child != nil {
		info.PID = b.child.pid
		info.CarriedOver = b.child.carried
	}
	if b.hs != nil {
		info.Era, info.ProtocolVersion = b.hs.era, b.hs.protocolVersion
	}
	if b.owner != nil {
		info.Session = b.owner.id
	}
	reqs := make([]RequestInfo, 0, len(b.pending))
	for _, p := range b.pending {
		if p.sess == nil {
			continue
		}
		info.InFlight++
		ri := RequestInfo{PoolID: p.id, Session: p.sess.id, Server: b.srv.name, Method: p.method, Name: p.name,
			OriginalID: string(p.origID), ReceivedAt: p.received, AgeMs: now.Sub(p.received).Milliseconds(),
			WrittenToChild: p.state == stWritten, PID: p.pid}
		if ri.WrittenToChild {
			ri.WrittenAt = p.written
		} else if b.child != nil {
			ri.PID = b.child.pid
		}
		reqs = append(reqs, ri)
	}
	b.mu.Unlock()
	info.StderrTail = b.stderr.tail(20)
	if b.owner != nil {
		info.Sessions = 1
	} else {
		info.Sessions = len(b.srv.membersOf(b))
	}
	info.Roots = b.roots
	return info, reqs
}

// learnHints records which tools the child declared safe to repeat, from a
// tools/list result. Only servers with trustAnnotations use them.
func (b *backend) learnHints(result []byte) {
	if !b.config().TrustAnnotations {
		return
	}
	safe := toolHints(result)
	b.mu.Lock()
	for name, ok := range safe {
		b.hints[name] = ok
	}
	b.mu.Unlock()
}

// listToolsForHints lists a ready child's tools itself when the server's
// annotations are trusted and the pool has no hints: a retry after a crash
// must not depend on a client having listed tools on this child.
func (b *backend) listToolsForHints() {
	b.mu.Lock()
	need := b.cfg.TrustAnnotations && len(b.hints) == 0
	b.mu.Unlock()
	if need {
		b.internalRequest("tools/list", []byte("{}"))
	}
}

func (b *backend) forgetHintsIf(method string) {
	if method == "notifications/tools/list_changed" {
		b.mu.Lock()
		clear(b.hints)
		b.mu.Unlock()
	}
}

// safeToRepeatLocked is DESIGN.md's rule for a written request whose child
// died: list methods, resources/read and server/discover may be sent again;
// a tools/call only when the user trusts the server's annotations and the
// tool said it is read-only or idempotent.
func (b *backend) safeToRepeatLocked(p *pending) bool {
	switch p.method {
	case "tools/list", "resources/list", "resources/templates/list", "prompts/list", "resources/read", "server/discover", "ping":
		return true
	case "tools/call":
		return b.cfg.TrustAnnotations && b.hints[p.name]
	}
	return false
}

var (
	errSessionEnded  = errors.New("session ended")
	errIdle          = errors.New("stopped after being idle")
	errConfigChanged = errors.New("the server's configuration changed")
	errServerRemoved = errors.New("the server was removed from the configuration")
)

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
