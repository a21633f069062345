package pool

import (
	"fmt"
	"sync"
	"time"
)

// unfinishedLineTimeout is how long a session's line may wait unfinished
// once it holds more than keepBuf bytes. A client writes each message
// whole, so the rest of a line comes at once, however large it is (64 MiB
// through a local pipe takes well under a second); one that stays
// unfinished holds the pool's memory, up to the message limit, for
// nothing: forty sessions each holding 60 MB without a newline once held
// 2.4 GB for good. The timeout bounds how long.
var unfinishedLineTimeout = 30 * time.Second

// errUnfinishedLine ends a session whose line waited unfinished too long.
// It ends for good (endsForGood): its shim exits saying why rather than
// resume the session, and send the same unfinished line again.
var errUnfinishedLine = fmt.Errorf(
	"closed: the client left a message of more than %d MiB unfinished for %s; a client writes each message whole, ending it with a newline",
	keepBuf>>20, unfinishedLineTimeout)

// unfinishedLine closes its session once a line has waited unfinished
// for unfinishedLineTimeout past keepBuf bytes (lineReader.onLong): the
// session's reader arms it, and disarms it as the line ends.
type unfinishedLine struct {
	s *session

	mu    sync.Mutex  // guards the fields below; never held across I/O
	armed *time.Timer // closes the session unless stopped first
	gen   uint64      // counts arms and disarms: a timer that fires after one is stale
}

// waiting arms (on) or disarms the timer. The timer's goroutine is the
// pool's (afterFunc); it ends with the session's close, or does nothing
// if the line ended meanwhile.
func (u *unfinishedLine) waiting(on bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.gen++
	if u.armed != nil {
		u.armed.Stop()
		u.armed = nil
	}
	if !on {
		return
	}
	gen, after := u.gen, unfinishedLineTimeout
	u.armed = u.s.p.afterFunc(after, func() {
		u.mu.Lock()
		current := u.gen == gen
		u.mu.Unlock()
		if current {
			u.s.p.log.Warn("closing a session whose message stayed unfinished", "session", u.s.id, "after", after)
			u.s.close(errUnfinishedLine)
		}
	})
}
