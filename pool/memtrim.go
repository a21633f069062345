package pool

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// A message of up to 64 MiB passes through the pool in a few buffers: the
// line read, its rewritten copy held until the child answers, the answer.
// Go's runtime gives such memory back to the system only slowly, so after
// a burst of large messages a desktop pool would keep hundreds of MB it no
// longer uses. The pool therefore asks for it back, once, when large
// buffers have stopped being let go for trimDelay. Small messages never
// trigger it, but for one case: a session evicted for not reading
// (endEvicted) may have piled up hundreds of MB of small ones, garbage
// once it is gone, that an idle pool would not collect for minutes.
//
// The trim waits for the large messages to stop, not only for the first
// to be let go: memory handed back is faulted in again, page by page, by
// the next large buffer. A client writing a 1 MB file again and again
// through the pool spent more time in those page faults than in anything
// else while the pool trimmed four times a second.

// trimDelay is how long no large buffer must be let go before the trim:
// it coalesces the releases of a burst, and of a stream of large
// messages, into one trim after the last.
const trimDelay = time.Second

// trimmer owns the goroutine that hands memory back. It starts with the
// first large message, so a pool that never sees one runs no goroutine.
type trimmer struct {
	kick  chan struct{} // capacity 1: at most one trim due
	mu    sync.Mutex    // a leaf lock: taken under session and pool locks
	state int           // trimIdle, trimRunning or trimStopped
	done  atomic.Int64  // trims made, for tests
}

const (
	trimIdle = iota
	trimRunning
	trimStopped
)

// releasedLarge notes that a buffer larger than keepBuf was let go. It
// never blocks.
func (p *Pool) releasedLarge() {
	t := &p.trim
	t.mu.Lock()
	if t.state == trimIdle {
		t.state = trimRunning
		p.wg.Go(p.trimLoop) // Close stops the trimmer before it waits on wg
	}
	t.mu.Unlock()
	select {
	case t.kick <- struct{}{}:
	default: // a trim is already due
	}
}

// stop keeps the trimmer from starting once the pool is closing.
func (t *trimmer) stop() {
	t.mu.Lock()
	t.state = trimStopped
	t.mu.Unlock()
}

func (p *Pool) trimLoop() {
	for {
		select {
		case <-p.closing:
			return
		case <-p.trim.kick:
		}
		if !p.awaitQuiet() {
			return
		}
		// The kept buffers of large lines (lineBufs) outlive one
		// collection (a sync.Pool's victim cache): they are let go by
		// the first, freed by FreeOSMemory's.
		runtime.GC()
		debug.FreeOSMemory()
		p.trim.done.Add(1)
	}
}

// awaitQuiet waits until no large buffer has been let go for trimDelay;
// false when the pool closes first.
func (p *Pool) awaitQuiet() bool {
	timer := time.NewTimer(trimDelay)
	defer timer.Stop()
	for {
		select {
		case <-p.closing:
			return false
		case <-p.trim.kick: // another one: wait again
			timer.Reset(trimDelay)
		case <-timer.C:
			return true
		}
	}
}
