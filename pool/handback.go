package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// Hand-back: when the pool stops on purpose (Quit, SIGTERM, an upgrade),
// an attached session is not ended but handed back to its shim, which
// still holds the client's pipes and resumes the session with the next
// pool (wire.Resume). Nothing the client sent is lost and nothing it waits
// for is left unanswered:
//
//   - the reader stops at once: what it had read and not handled (a
//     partial line, buffered lines, lines held for a roots answer, whose
//     requests leave the ledger as they go: takeHeld) goes back to the
//     shim with the Farewell, for the next pool to read first;
//   - what is in flight gets StopGrace to be answered, and the answers are
//     written out; so does a message whose handling waits for its child's
//     handshake (an initialize while an npx server installs itself);
//   - a message still waiting for the handshake then goes back too,
//     unanswered, ahead of what the client sent after it
//     (awaitHandshake), for the next pool to answer;
//   - what is still in flight then is answered with the at-most-once
//     error (mayHaveExecuted when it had reached a child) before the
//     Farewell, so the next pool's history lookup finds nothing owed.
//
// At most once: each request is either answered by this pool or carried
// in Pending, never both and never neither. The shim gives Pending to the
// next pool as the client's input, which that pool handles like any
// other: a request carried there runs there, so it must not have run
// here. A message therefore goes back only while nothing has acted on it:
// its handling waits for the child's handshake, and nothing before that
// wait reaches a child, the client or the ledger (history records a
// request waiting, and ends it handed back: endGivenBack). Whether it
// goes back is decided once, by its wait as the wait ends: the handshake
// came first, and it goes on and is answered here; the hand-back's stop
// came first, and this pool answers nothing of it. The reader then
// handles nothing after it, so the next pool reads the client's messages
// in the order they were sent. A wait that is not for the reader's own
// message (one replayed after a roots answer, a resuming session's
// initialize, which its shim keeps) ends with the error that says it did
// not run.
//
// Each session is handed back in a goroutine of its own: closing it stops
// its own child (share "session"), which may take the stop's graces, and
// one after another they would add up.

// errHandedBack ends a session that its shim takes to the next pool.
var errHandedBack = errors.New("switchboard is restarting; the session continues with the next pool")

// errGivenBack ends the handling of a message that goes back to the shim
// unanswered (awaitHandshake); replyErrorTo answers nothing for it.
var errGivenBack = errors.New("the message goes back to the shim, for the next pool")

// DefaultStopGrace is how long a stopping pool lets the requests in flight
// of handed-back sessions finish.
const DefaultStopGrace = 3 * time.Second

// readerReturnWait bounds how long a stop waits, past its grace, for a
// reader whose wait for a handshake it ended. The reader does not block
// otherwise; a resuming session may first look up its history
// (unansweredTimeout). A reader still busy after it cannot say what it
// holds: its session ends as one without a shim does, not handed back.
const readerReturnWait = 2 * unansweredTimeout

// handBack is an attached session's way back to its shim. The front door
// creates it; the pool's stop pauses the reader through it.
type handBack struct {
	in   deadliner     // the client's input (its pipe, or a relaying shim's connection), to wake the reader
	stop chan struct{} // closed at the hand-back's deadline: the session's waits for a child's handshake end (awaitHandshake)
	rest chan []byte   // cap 1: the reader's unhandled bytes, sent when it stops on pause (or by pause, for a reader gone)

	// pending is what the Farewell carries: written by the hand-back
	// before it closes the session, read by closeConn.
	pending []byte

	// mu orders the pause with the reader's end: a reader that returns
	// before the pause (its client's input ended) sends no rest.
	mu      sync.Mutex
	pausing atomic.Bool // set once by pause, under mu; the reader handles nothing more
	left    bool        // the reader returned without a pause

	// The reader's message, between the reader (handle) and its wait
	// (awaitHandshake), which run on the same goroutine; other waits of
	// the session read handling.
	handling atomic.Bool // the reader is inside session.handle
	gaveBack atomic.Bool // its message goes back: no part of it was acted on
	kept     []byte      // the reader's: messages it did not handle, in order, for the shim
	// claim lists the input a resume carried in the ledger until the
	// reader has handled it; the reader's (resumeClaim.release).
	claim *resumeClaim
}

// deadliner is an input whose reads a deadline interrupts.
type deadliner interface{ SetReadDeadline(time.Time) error }

func newHandBack(in deadliner) *handBack {
	return &handBack{in: in, stop: make(chan struct{}), rest: make(chan []byte, 1)}
}

// handle has the session handle line, the reader's next message, unless
// the session is being handed back: then line, as every message after
// it, is kept for the shim. So is a message whose handling gave it back.
func (hb *handBack) handle(s *session, line []byte) {
	if hb == nil {
		s.handle(line)
		return
	}
	if hb.pausing.Load() {
		hb.keep(line)
		return
	}
	hb.handling.Store(true)
	s.handle(line)
	hb.handling.Store(false)
	if hb.gaveBack.Load() {
		hb.gaveBack.Store(false)
		hb.keep(line) // the reader handles nothing more: pausing is set
	}
}

// keep adds a message to what goes back to the shim.
func (hb *handBack) keep(line []byte) {
	hb.kept = append(append(hb.kept, line...), '\n')
}

// pause stops the reader: it handles no more messages, and its next read
// fails, so that it hands over what it did not handle (stopped). It
// reports false if the session was paused already.
func (hb *handBack) pause(s *session) bool {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if !hb.pausing.CompareAndSwap(false, true) {
		return false
	}
	if hb.left {
		// The reader returned (its client's input ended) and will not
		// stop: what is held for a roots answer is all there is.
		hb.rest <- s.takeHeld()
		return true
	}
	_ = hb.in.SetReadDeadline(time.Now()) // wakes the reader
	return true
}

// stopped reports whether the reader, whose read just failed, stopped for
// a pause; it then hands over what it had read and not handled: messages
// held for a roots answer, then those it kept, then what it read of the
// next ones.
func (hb *handBack) stopped(lr *lineReader, s *session) bool {
	if hb == nil {
		return false
	}
	hb.mu.Lock()
	paused := hb.pausing.Load()
	hb.left = !paused
	hb.mu.Unlock()
	if !paused {
		return false
	}
	rest := append(append(s.takeHeld(), hb.kept...), lr.unread()...)
	hb.kept = nil
	hb.claim.release() // rest goes back: owed in the ledger too, it would be answered twice
	hb.rest <- rest
	return true
}

// takeHeld takes the messages held for the session's roots answer, as
// lines. The requests among them leave the ledger: they go back to the
// shim unanswered, for the next pool to read as the client's input, so
// they are not owed as well (at most once).
func (s *session) takeHeld() []byte {
	s.mu.Lock()
	first := s.held.takeAll() // and stops its timer: the next pool times them
	s.heldBytes, s.changeHeld = 0, false
	s.mu.Unlock()
	var lines []byte
	for h := first; h != nil; h = h.next {
		lines = append(append(lines, h.line...), '\n')
		if h.req != nil {
			s.ledger.release(h.req.takeSlot())
		}
	}
	return lines
}

// awaitHandshake is b.handshakeResult for a message of the session. A
// session its shim can take back waits until the session ends or until
// the hand-back's deadline (stop). Then, if the wait is the reader's for
// the message it handles (no other message of the session is handled
// while it does, unless held ones are replayed), that message goes back
// to the shim unanswered (errGivenBack; handBack.handle keeps it):
// nothing has acted on it, since callers wait before they act. Any other
// wait ends with the error that the request did not run.
func (s *session) awaitHandshake(b *backend) (*handshake, error) {
	hb := s.hb
	b.mu.Lock()
	ready := isClosed(b.hsDone)
	b.mu.Unlock()
	if hb == nil || ready {
		return b.handshakeResult(s.closed)
	}
	cancel, waited := make(chan struct{}), make(chan struct{})
	go func() { // exits when the wait ends, at the latest
		select {
		case <-s.closed:
		case <-hb.stop:
		case <-waited:
			return
		}
		close(cancel)
	}()
	hs, err := b.handshakeResult(cancel)
	close(waited)
	if !errors.Is(err, errSessionEnded) || !s.alive() {
		return hs, err
	}
	// The hand-back's deadline ended the wait.
	s.mu.Lock()
	replaying := s.replaying
	s.mu.Unlock()
	if hb.handling.Load() && !replaying {
		hb.gaveBack.Store(true)
		return nil, errGivenBack
	}
	return nil, newError(errPoolRestarting, false, s.srv.name, s.srv.name, "the request")
}

// handBackSessions hands back every attached session of sessions, waiting
// at most grace for what they have in flight. It returns the sessions it
// did not hand back (no shim to take them).
func (p *Pool) handBackSessions(sessions []*session, grace time.Duration) (others []*session) {
	deadline := time.Now().Add(grace)
	var handed []*session
	for _, s := range sessions {
		if s.hb == nil || !s.alive() || !s.hb.pause(s) {
			others = append(others, s)
			continue
		}
		handed = append(handed, s)
	}
	var wg sync.WaitGroup
	for _, s := range handed {
		wg.Go(func() { s.handBackBy(deadline) }) // returns once the session is closed
	}
	wg.Wait()
	return others
}

// handBackBy hands a paused session back to its shim, and closes it: what
// the reader did not handle goes back, what is in flight gets until
// deadline to be answered, and what is left is answered now.
func (s *session) handBackBy(deadline time.Time) {
	hb := s.hb
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case hb.pending = <-hb.rest:
	case <-s.closed:
		return
	case <-t.C:
		// The reader is still busy (handling a message, or not started
		// while the session resumes): a wait for a child's handshake ends
		// now (awaitHandshake), and the reader hands over what it holds.
		close(hb.stop)
		t.Reset(readerReturnWait)
		select {
		case hb.pending = <-hb.rest:
		case <-s.closed:
			return
		case <-t.C:
			s.p.log.Error("a session's reader did not stop; it is not handed back", "session", s.id, "server", s.srv.name)
			s.close(errPoolClosing)
			return
		}
	}
	s.waitIdle(deadline)
	if !isClosed(hb.stop) {
		close(hb.stop) // only the hand-back closes it
	}
	s.mu.Lock()
	left := make([]*pending, 0, len(s.inflight))
	for _, pr := range s.inflight {
		left = append(left, pr)
	}
	s.mu.Unlock()
	for _, pr := range left {
		pr.b.abandon(pr)
	}
	s.p.log.Info("session handed back to its shim", "session", s.id, "server", s.srv.name,
		"unread", len(hb.pending), "abandoned", len(left))
	// A writer blocked on a client that does not read would hold the
	// output, and the stop, for up to EvictAfter: its write ends now,
	// before the close, and the last flush gets StopGrace
	// (finishOutput), the rest of what the cut write took first. What
	// is not written stays owed, for the next pool to answer.
	s.handingBack.Store(true)
	if o := s.stream.Load(); o != nil {
		_ = o.conn.SetWriteDeadline(time.Now())
	}
	s.close(errHandedBack) // stops its own child, if it has one
}

// waitIdle waits until the session has nothing in flight, it closes, or
// the deadline passes. A replay of held messages counts as in flight: the
// message it took is not yet a request in flight, and is not held either.
func (s *session) waitIdle(deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		s.mu.Lock()
		busy := s.busyLocked() || s.replaying
		if busy && s.quiet == nil {
			s.quiet = make(chan struct{})
		}
		q := s.quiet
		s.mu.Unlock()
		if !busy {
			return
		}
		if testHookWaitingIdle != nil {
			testHookWaitingIdle(s)
		}
		select {
		case <-q:
		case <-s.closed:
			return
		case <-t.C:
			return
		}
	}
}

// testHookWaitingIdle, when set, runs in waitIdle each time it finds the
// session busy, before it waits.
var testHookWaitingIdle func(*session)

// abandon answers p for a pool that stops before its child answered: the
// client gets the at-most-once error, the child a cancellation if it saw
// the request.
func (b *backend) abandon(p *pending) {
	o := failure(endPoolStops, errPoolRestarting, b.srv.name, p.method)
	o.reason = "switchboard is restarting"
	b.finish(p, o)
}

// handOverRelay ends a relayed session's connection for a hand-back, once
// every answer it was owed is written: the shim is asked to stop sending
// (Drain) and says when it has (ControlDone); what it sent meanwhile joins
// the unread input; the Farewell carries it all back.
func (s *session) handOverRelay(conn net.Conn) {
	deadline := time.Now().Add(s.p.opts.StopGrace)
	_ = conn.SetDeadline(deadline)
	if err := writeControl(conn, wire.Drain{Drain: true}); err != nil {
		return
	}
	pending := s.hb.pending
	buf := make([]byte, 32<<10)
	for !bytes.HasSuffix(pending, []byte(wire.ControlDone)) {
		n, err := conn.Read(buf)
		pending = append(pending, buf[:n]...)
		if err != nil {
			break // no acknowledgement: what came is all there is
		}
	}
	if i := bytes.Index(pending, []byte(wire.ControlDone)); i >= 0 {
		pending = pending[:i]
	}
	_ = writeControl(conn, Farewell{End: wire.EndPoolStopping, Pending: pending})
}

// writeControl writes v as a control line of a relayed session's stream.
func writeControl(conn net.Conn, v any) error {
	b, _ := json.Marshal(v)
	_, err := conn.Write(append(append([]byte{wire.Control}, b...), '\n'))
	return err
}

// controlLine is v as a control line for the session's queue (its
// writer writes it in order with the answers).
func controlLine(v any) []byte {
	b, _ := json.Marshal(v)
	return append([]byte{wire.Control}, b...)
}
