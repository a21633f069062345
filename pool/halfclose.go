package pool

import (
	"errors"
	"syscall"
	"time"
)

// Half-close: a client that closes its input has finished sending, not
// stopped listening. `printf 'initialize…\ntools/list…\n' | switchboard
// connect NAME` must print both answers, as the same pipe into the server
// itself does. So EOF on a client's input ends its session only after its
// in-flight requests are answered (each bounded by its request timeout)
// and those answers are written out; a client that goes away (its output
// has no reader any more) is still cancelled at once. (An attached
// client's output is watched all along, input open or not: hangups.)

// errInputClosed ends a session whose client closed its input and got
// every answer it was owed.
var errInputClosed = errors.New("the client closed its input")

// peerPollInterval is how often a draining session checks that its
// client is still there.
const peerPollInterval = 100 * time.Millisecond

// halfClose handles EOF on the session's input. peer is the session's
// output (the client's stdout pipe, or the shim's socket), watched for
// the client going away while the answers are awaited; nil means no
// watch.
func (s *session) halfClose(peer syscall.RawConn) {
	if peer != nil && peerGone(peer) {
		s.close(nil) // not a half-close: the client is gone
		return
	}
	if peer != nil {
		s.p.wg.Go(func() { s.watchPeer(peer) })
	}
	s.inputEnded() // its roots' answer cannot come now
	s.unanswerable()
	s.closeWhenIdle(errInputClosed)
}

// unanswerable ends the questions put to the session, whose client
// closed its input and can answer none: a legacy child's is answered
// with the pool's error (the child answers its call, and the timeouts it
// paused go on) and withdrawn at the client, which may still show it; a
// 2026-07-28 child's, put to it for a call, ends the call with an error;
// a call held for its retry (mrtr.go) is cancelled at the child. The session is asked nothing more (askable): the
// flag is set before the questions are looked for, and each question is
// recorded before its asker looks at the flag, so none is missed.
func (s *session) unanswerable() {
	s.noInput.Store(true)
	s.withdrawQuestions(errAskedClosedInput, errInputClosed.Error())
	for _, x := range s.p.rounds.askedOf(s) {
		x.end(newError(errClosedInputAsked, true, x.b.srv.name, x.b.srv.name))
	}
	s.endHolds(errInputClosed.Error()) // a 2026-07-28 client's retry cannot come now
}

// watchPeer closes the session at once if the client goes away while it
// drains. It exits when the session ends.
func (s *session) watchPeer(peer syscall.RawConn) {
	t := time.NewTicker(peerPollInterval)
	defer t.Stop()
	for {
		select {
		case <-s.closed:
			return
		case <-t.C:
			if peerGone(peer) {
				s.close(nil)
				return
			}
		}
	}
}

// drained reports whether a session ended for reason ended as its client
// or its shim expects (a half-close, a hand-back), not for a reason its
// Farewell names. Either way close leaves the transport to the writer
// (flushes), which first writes out what is queued, then closes it.
func drained(reason error) bool {
	return errors.Is(reason, errInputClosed) || errors.Is(reason, errHandedBack)
}
