package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
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
//   - the reader stops at once, and what it had read but not handled (a
//     partial line, buffered lines, lines held for a roots answer) goes
//     back to the shim with the Farewell, for the next pool to read first;
//   - what is in flight gets StopGrace to be answered, and the answers are
//     written out;
//   - what is still in flight then is answered with the at-most-once
//     error (mayHaveExecuted when it had reached a child) before the
//     Farewell, so the next pool's history lookup finds nothing owed.

// errHandedBack ends a session that its shim takes to the next pool.
var errHandedBack = errors.New("switchboard is restarting; the session continues with the next pool")

// DefaultStopGrace is how long a stopping pool lets the requests in flight
// of handed-back sessions finish.
const DefaultStopGrace = 3 * time.Second

// handBack is an attached session's way back to its shim. The front door
// creates it; the pool's stop pauses the reader through it.
type handBack struct {
	in      deadliner   // the client's input (its pipe, or a relaying shim's connection), to wake the reader
	pausing atomic.Bool // set once by pause; the reader returns at its next read
	rest    chan []byte // cap 1: the reader's unhandled bytes, sent when it stops on pause
	pending []byte      // what the Farewell carries; written before close, read by closeConn
}

// deadliner is an input whose reads a deadline interrupts.
type deadliner interface{ SetReadDeadline(time.Time) error }

func newHandBack(in deadliner) *handBack {
	return &handBack{in: in, rest: make(chan []byte, 1)}
}

// stopped reports whether the reader, whose read just failed, stopped for
// a pause; it then hands over what it had read and not handled.
func (hb *handBack) stopped(lr *lineReader, s *session) bool {
	if hb == nil || !hb.pausing.Load() {
		return false
	}
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	var rest []byte
	for _, h := range held {
		rest = append(append(rest, h.line...), '\n')
	}
	hb.rest <- append(rest, lr.unread()...)
	return true
}

// handBackSessions hands back every attached session of sessions, waiting
// at most grace for what they have in flight. It returns the sessions it
// did not hand back (no shim to take them).
func (p *Pool) handBackSessions(sessions []*session, grace time.Duration) (others []*session) {
	deadline := time.Now().Add(grace)
	var handed []*session
	for _, s := range sessions {
		hb := s.hb
		if hb == nil || !hb.pausing.CompareAndSwap(false, true) || !s.alive() {
			others = append(others, s)
			continue
		}
		_ = hb.in.SetReadDeadline(time.Now()) // wakes the reader
		handed = append(handed, s)
	}
	for _, s := range handed {
		t := time.NewTimer(time.Until(deadline))
		select {
		case s.hb.pending = <-s.hb.rest:
		case <-s.closed:
		case <-t.C: // its reader is busy; it gives up what it read when it returns
		}
		t.Stop()
	}
	for _, s := range handed {
		s.waitIdle(deadline)
	}
	for _, s := range handed {
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
			"unread", len(s.hb.pending), "abandoned", len(left))
		// A writer blocked on a client that does not read would hold the
		// output, and the stop, for up to EvictAfter: its write ends now,
		// before the close, and the last flush gets StopGrace
		// (finishOutput). What is not written stays owed, for the next
		// pool to answer.
		s.handingBack.Store(true)
		if o := s.stream.Load(); o != nil {
			_ = o.conn.SetWriteDeadline(time.Now())
		}
		s.close(errHandedBack)
	}
	return others
}

// waitIdle waits until the session has nothing in flight, it closes, or
// the deadline passes.
func (s *session) waitIdle(deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		s.mu.Lock()
		busy := s.busyLocked()
		if busy && s.quiet == nil {
			s.quiet = make(chan struct{})
		}
		q := s.quiet
		s.mu.Unlock()
		if !busy {
			return
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
