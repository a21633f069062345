package pool

import (
	"slices"
	"sync"
	"time"
)

// recordDelay is how long an event may wait in the pool before it is
// handed to Options.Record. The history store batches its writes over
// tens of milliseconds anyway; what the delay saves is a wake-up of the
// store's writer for every event (three per request), each of which woke
// a second thread too: on a small machine, that was a third of the
// latency the pool added to a call.
const recordDelay = 10 * time.Millisecond

// recordBatch is the most events held before a batch is handed over
// without waiting for recordDelay, and keepRecordBuf the largest buffer
// always kept between batches. A larger one is kept while the batches
// fill at least half of it (a steady load), and let go by the first
// batch after a burst that does not.
const (
	recordBatch   = 4096
	keepRecordBuf = 1024
)

// recordQueue hands the pool's events to Options.Record in the order
// they happened, in batches, from a timer's goroutine: the goroutine
// that emits an event only appends it. Nothing is held across Record
// but flushMu, which orders batches; Record never blocks.
type recordQueue struct {
	record func(Event)
	timer  *time.Timer // runs flush; armed by the first event of a batch

	flushMu sync.Mutex // held by the flush under way: batches reach record in order
	spare   []Event    // the last batch's buffer, for the next; guarded by flushMu

	mu     sync.Mutex // guards the fields below
	buf    []Event
	closed bool // after close, events go to record at once
}

func newRecordQueue(record func(Event)) *recordQueue {
	// The timer is made with the queue, stopped: add arms it.
	q := new(recordQueue)
	*q = recordQueue{record: record, timer: time.AfterFunc(time.Hour, q.flush)}
	q.timer.Stop()
	return q
}

// add queues e for Record. The first event of a batch arms the timer; a
// full batch fires it now.
func (q *recordQueue) add(e *Event) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		q.recordNow(e)
		return
	}
	// Copied straight into its slot: append(q.buf, *e) would stage the
	// 384 bytes on the stack first.
	n := len(q.buf) + 1
	if n > cap(q.buf) {
		q.buf = slices.Grow(q.buf, 1)
	}
	q.buf = q.buf[:n]
	q.buf[n-1] = *e
	q.mu.Unlock()
	switch n {
	case 1:
		q.timer.Reset(recordDelay)
	case recordBatch:
		q.timer.Reset(0)
	}
}

// recordNow hands e to Record at once, after the last batch: the queue
// is closed.
func (q *recordQueue) recordNow(e *Event) {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.record(*e)
}

// flush hands everything queued to Record.
func (q *recordQueue) flush() {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.Lock()
	batch := q.buf
	q.buf, q.spare = q.spare, nil
	q.mu.Unlock()
	for i := range batch {
		q.record(batch[i])
		batch[i] = Event{} // no payload or strings kept alive by the buffer
	}
	if c := cap(batch); c <= keepRecordBuf || c <= 2*len(batch) {
		q.spare = batch[:0]
	}
}

// close hands over what is queued and makes later events go to Record
// at once: when Close or Handover returns, Record has had every event.
func (q *recordQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.timer.Stop()
	q.flush()
}
