package pool

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// unfinishedLineTimeout is how long a session's line may go without
// keepBuf more of it once it holds more than keepBuf bytes. A client
// writes each message whole, so the rest of a line keeps coming, however
// large it is (64 MiB through a local pipe takes well under a second on
// an idle machine, and eight such lines at once on a loaded one took a
// minute); one that stops coming holds the pool's memory, up to the
// message limit, for nothing: forty sessions each holding 60 MB without a
// newline once held 2.4 GB for good. The timeout bounds how long a line
// may stall, and so, with the message limit, how long a line that
// trickles in may be held.
var unfinishedLineTimeout = 30 * time.Second

// errUnfinishedLine ends a session whose line stalled too long. It ends
// for good (endsForGood): its shim exits saying why rather than resume
// the session, and send the same unfinished line again.
var errUnfinishedLine = fmt.Errorf(
	"closed: the client stopped sending a message of more than %d MiB (less than %d MiB more of it came in %s); a client writes each message whole, ending it with a newline",
	keepBuf>>20, keepBuf>>20, unfinishedLineTimeout)

// unfinishedLine closes its session once a line past keepBuf bytes
// (lineReader.onLong) has gone unfinishedLineTimeout without keepBuf more
// of it: the session's reader arms it, tells it how much of the line has
// come (lineReader.progress), and disarms it as the line ends.
type unfinishedLine struct {
	s    *session
	held int          // bytes of the pool's unfinishedBudget the line holds (hold)
	have atomic.Int64 // bytes of the line read so far, stored by the reader

	mu       sync.Mutex  // guards the fields below; never held across I/O
	armed    *time.Timer // looks at the line's progress, and closes the session unless stopped first
	gen      uint64      // counts arms and disarms: a timer that fires after one is stale
	lastHave int64       // have when the timer was last armed
}

// waiting arms (on) or disarms the timer. The timer's goroutine is the
// pool's (afterFunc); it ends with the session's close, re-arms itself
// while the line keeps coming, or does nothing if the line ended
// meanwhile.
func (u *unfinishedLine) waiting(on bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.gen++
	if u.armed != nil {
		u.armed.Stop()
		u.armed = nil
	}
	if on {
		u.armLocked(u.gen)
	}
}

// armLocked starts the timeout from now, for the arm gen. u.mu is held.
func (u *unfinishedLine) armLocked(gen uint64) {
	u.lastHave = u.have.Load()
	u.armed = u.s.p.afterFunc(unfinishedLineTimeout, func() { u.expired(gen) })
}

// expired is the timer of the arm gen firing: a line that got keepBuf
// more since the timer was armed gets another unfinishedLineTimeout, one
// that stalled closes its session.
func (u *unfinishedLine) expired(gen uint64) {
	u.mu.Lock()
	if u.gen != gen {
		u.mu.Unlock()
		return
	}
	if u.have.Load()-u.lastHave >= keepBuf {
		u.armLocked(gen)
		u.mu.Unlock()
		return
	}
	u.mu.Unlock()
	u.s.p.log.Warn("closing a session whose message stopped coming", "session", u.s.id, "after", unfinishedLineTimeout)
	u.s.close(errUnfinishedLine)
}

// errUnfinishedBudget ends a session whose unfinished line would take the
// pool past Options.MaxUnfinishedBytes: the lines of thousands of sessions,
// each held unfinished up to the message limit for unfinishedLineTimeout,
// would take all the machine's memory. It ends for good (endsForGood),
// as errUnfinishedLine does.
var errUnfinishedBudget = fmt.Errorf("closed: the client's message stayed unfinished past %d MiB", keepBuf>>20)

// unfinishedBudget counts the bytes the local sessions' unfinished lines
// past keepBuf hold (Options.MaxUnfinishedBytes): the buffers they need.
// Only such lines touch it, never a small one.
type unfinishedBudget struct {
	held atomic.Int64
}

// take counts n bytes more (n < 0 gives back), unless that would hold
// more than limit; then it counts nothing. Two lines that would each fit
// alone are not both refused.
func (b *unfinishedBudget) take(n, limit int) bool {
	for {
		held := b.held.Load()
		if n > 0 && held+int64(n) > int64(limit) {
			return false
		}
		if b.held.CompareAndSwap(held, held+int64(n)) {
			return true
		}
	}
}

// hold is the session's lineReader.onLong: it takes from the pool's
// budget what the unfinished line needs more than it holds, and arms the
// timeout as the line begins to wait; need 0 (the line ended, or the
// session's reader did) gives everything back and disarms it. A line the
// budget does not take stops the reader with an error that closes the
// session. The reader's goroutine is the only caller: held is its own.
func (u *unfinishedLine) hold(need int) error {
	budget, limit := &u.s.p.unfinished, u.s.p.opts.MaxUnfinishedBytes
	if need == 0 {
		budget.take(-u.held, limit)
		u.held = 0
		u.waiting(false)
		return nil
	}
	if !budget.take(need-u.held, limit) {
		u.s.p.log.Warn("closing a session whose unfinished message would take the pool past its budget",
			"session", u.s.id, "need", need, "budget", limit)
		return fmt.Errorf("%w, and its %d MiB would have taken the pool past the %d MiB it gives the unfinished messages of all its sessions together; a client writes each message whole, ending it with a newline",
			errUnfinishedBudget, need>>20, limit>>20)
	}
	if u.held == 0 {
		u.waiting(true)
	}
	u.held = need
	return nil
}
