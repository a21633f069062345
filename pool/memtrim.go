package pool

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// A message of up to 64 MiB passes through the pool in a few buffers: the
// line read, its rewritten copy held until the child answers, the answer.
// Go's runtime gives such memory back to the system only slowly, so after
// a burst of large messages a desktop pool would keep hundreds of MB it no
// longer uses. The pool therefore asks for it back, once, shortly after a
// large buffer is let go. Small messages never trigger it.

// trimDelay coalesces the releases of one burst (a read buffer, then the
// request's copy when its answer is delivered) into one trim.
const trimDelay = 250 * time.Millisecond

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
		timer := time.NewTimer(trimDelay)
		select {
		case <-p.closing:
			timer.Stop()
			return
		case <-timer.C:
		}
		debug.FreeOSMemory()
		p.trim.done.Add(1)
	}
}
