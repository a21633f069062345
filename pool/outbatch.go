package pool

import "slices"

// outBatch is the answers that one read from a child brought, on their
// way to byte-stream sessions. While more lines of the read wait to be
// handled, an answer is queued for its session rather than written; when
// the read's last line is handled, the child's reader writes each
// session's queue with one write of its own (flush). A session with eight
// requests in flight then gets the answers a read brought together in
// one write, as a server it had to itself would give them, instead of
// one write, and one wake-up of the client, for each.
//
// Ordering holds because the answers are queued: a line offered meanwhile
// by anyone else finds the queue non-empty and goes behind them (and
// starts the session's drain, which then writes them all). The batch is
// the child's reader's alone.
type outBatch struct {
	more     bool       // lines of the same read wait after the one being handled
	sessions []*session // sessions with answers queued by this batch, in order
	buf      []byte     // flush's scratch: a session's queued lines, joined
	lines    []outLine  // flush's scratch: the lines taken from a queue
	ends     []lineEnd  // flush's scratch: where the lines that answer requests end in buf
}

// batchable is the size below which an answer may wait for the rest of
// its read: a larger one is written at once, as it would be alone.
const batchable = gatherInPlace

// holds reports whether line, offered to s, waits for the flush.
func (bt *outBatch) holds(s *session, line []byte) bool {
	if bt == nil || len(line) >= batchable || s.sink != nil {
		return false
	}
	if o := s.stream.Load(); o == nil || o.w == nil {
		return false // no direct writes to this output: its drain writes everything
	}
	// The read's last line still waits when earlier ones of it do, so
	// that it is written with them rather than before them.
	return bt.more || slices.Contains(bt.sessions, s)
}

// queue queues line, the answer whose ledger slot is slot, for s; false
// when s's queue is full (the caller delivers it, which evicts s).
func (bt *outBatch) queue(s *session, line []byte, slot int32) bool {
	select {
	case s.out <- outLine{line: line, slot: slot}:
	default:
		return false
	}
	if !slices.Contains(bt.sessions, s) {
		bt.sessions = append(bt.sessions, s)
	}
	return true
}

// flush writes what the batch queued, each session's with one write that
// never waits; what a client does not take at once is its drain's.
func (bt *outBatch) flush() {
	for i, s := range bt.sessions {
		if o := s.stream.Load(); o != nil {
			bt.writeQueued(s, o)
		}
		bt.sessions[i] = nil
	}
	bt.sessions = bt.sessions[:0]
	if cap(bt.buf) > keepJoined {
		bt.buf = nil // a rare large batch: its scratch goes
	}
}

// keepJoined is the most scratch a child's reader keeps between batches.
const keepJoined = 256 << 10

// writeQueued is flush for one session: everything queued for s, taken
// off its queue and written together; when s's output is busy (a drain
// runs, or another goroutine writes to it now), the drain writes them.
func (bt *outBatch) writeQueued(s *session, o *sessionOut) {
	if o.w == nil || !o.mu.TryLock() {
		o.kick(s) // no direct writes to this output, or someone writes now: the queue is drain's
		return
	}
	if o.cut || o.active.Load() || isClosed(s.closed) || len(s.out) == 0 {
		// A drain runs or is due (cut: it was kicked), or the session's
		// end writes what is queued.
		o.mu.Unlock()
		return
	}
	owed := s.owedCount()
	lines := bt.lines[:0]
	for more := true; more; {
		select {
		case q := <-s.out:
			lines = append(lines, q)
		default:
			more = false
		}
	}
	// One line goes as it lies; several are joined, each but the last
	// with its newline (writeNow adds the last).
	joined := lines[0].line
	if len(lines) > 1 {
		bt.buf = bt.buf[:0]
		for i, q := range lines {
			if i > 0 {
				bt.buf = append(bt.buf, '\n')
			}
			bt.buf = append(bt.buf, q.line...)
		}
		joined = bt.buf
	}
	ends, at := bt.ends[:0], 0
	for _, q := range lines {
		at += len(q.line) + 1
		if q.slot > 0 {
			ends = append(ends, lineEnd{at: at, slot: q.slot})
		}
	}
	n, _ := o.w.writeNow(joined)      // an error comes back to drain's write of the rest
	left := s.releaseWritten(ends, n) // the answers written whole; under mu, as tryWrite's
	if n <= len(joined) {
		// Short: the rest, a copy (the scratch is the batch's), goes
		// first when the drain writes next, with the slots of the
		// answers in it.
		o.cut, o.rest, o.ends = true, append([]byte(nil), joined[n:]...), slices.Clone(left)
		if n > 0 {
			s.ledger.midLine(true)
		}
	} else {
		s.releaseOwed(owed) // their answers were queued before the count, so are written
	}
	o.mu.Unlock()
	bt.ends = ends[:0]
	for _, q := range lines {
		if len(q.line) > keepBuf {
			s.p.releasedLarge() // taken from the queue by another deliverer's offer
		}
	}
	clear(lines)
	bt.lines = lines[:0]
	if n <= len(joined) {
		o.kick(s)
		return
	}
	if s.owedCount() > 0 {
		o.kick(s) // slots owed after the count: the drain counts again
	}
}
