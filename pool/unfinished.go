package pool

import (
	"fmt"
	"sync"
	"sync/atomic"
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
	s    *session
	held int // bytes of the pool's unfinishedBudget the line holds (hold)

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
