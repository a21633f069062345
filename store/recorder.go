package store

import (
	"cmp"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// recorder is Record's side of the store: the requests in flight, and
// what waits for the writer. Everything in it is guarded by mu, which is
// held for a few stores and map operations, never across I/O or SQL: the
// journal is memory.
type recorder struct {
	mu      sync.Mutex
	journal *journal // nil: requests are not journaled (history off, or no file or no room for it)
	run     int64    // the run recorded: row ids are rowID(run, ...)
	orphans int64    // orphaned responses recorded in this run

	// open are the requests received and not ended, by pool id; spare
	// are ended ones, cleared, for the next requests.
	open  map[uint64]*openReq
	spare []*openReq
	// waitHead and waitTail list the journaled requests in flight that
	// have no row yet, oldest first: the writer gives those older than
	// InFlightAfter theirs.
	waitHead, waitTail *openReq

	rows    []reqRow       // for the writer: ended requests, in-flight rows
	events  []pool.Event   // for the writer: sessions, children
	reloads []ConfigReload // for the writer: config reloads
	// armed says the writer will look at rows, events and the waiting
	// list again without being woken (its timer is set, or it is busy).
	armed bool
}

// openReq is a request in flight.
type openReq struct {
	row  reqRow
	slot int32 // journal slot handle (journal.take); 0 if not journaled
	// rowed says its in-flight row has been handed to the writer: its
	// end updates that row.
	rowed      bool
	prev, next *openReq // the waiting list, while on it
}

// reqRow is one request's row as the writer writes it. Times are Unix
// microseconds, 0 for "did not happen".
type reqRow struct {
	id                                        int64
	poolID                                    uint64
	session, server, method, name, originalID string
	received, written, answered               int64
	status                                    string
	errCode                                   int
	err                                       string
	reqSize, respSize, pid                    int
	reqPayload, respPayload                   []byte
	// exists says the row may be in the database already (an in-flight
	// row): the writer updates it.
	exists bool
	// slot is the ended request's journal slot handle, freed once its row
	// is committed: until then the journal says it was answered, so a
	// crash before the commit leaves it recorded as answered (its outcome
	// unknown) rather than lost.
	slot int32
}

// maxOpen bounds the requests in flight the store keeps in memory; past
// it a request is recorded from its end alone.
const maxOpen = 1 << 20

// orphanError is the error recorded with an orphaned response.
const orphanError = "a response to an id nobody waits for (a late answer to a cancelled or timed-out request?)"

func (r *recorder) init(run int64, j *journal) {
	r.run, r.journal = run, j
	r.open = map[uint64]*openReq{}
}

// A request's row id is its run's and its pool id's: within a run, pool
// ids follow arrival (the pool numbers requests as they come), so row ids
// order the history by arrival, run after run, and a request is found by
// its pool id without an index. Orphaned responses (no pool id) follow
// their run's requests, so their ids say nothing of when they came:
// Requests and pruning find them by time in request_log_orphaned.
const (
	runShift   = 40
	orphanBase = 1 << 39
)

func rowID(run int64, poolID uint64) int64 { return run<<runShift | int64(poolID&(orphanBase-1)) }

func orphanRowID(run, n int64) int64 { return run<<runShift | orphanBase | n&(orphanBase-1) }

// record is Record past its filters.
func (s *Store) record(e pool.Event) {
	r := &s.rec
	o := &s.opts
	r.mu.Lock()
	queued := len(r.rows) + len(r.events)
	ok := true
	switch e.Kind {
	case pool.EventRequestReceived:
		ok = r.receivedLocked(e)
	case pool.EventRequestWritten:
		if q := r.open[e.PoolID]; q != nil {
			q.row.written, q.row.pid = e.Time.UnixMicro(), e.PID
			r.journal.written(q.slot, q.row.written, e.PID)
			if q.rowed {
				// Its in-flight row is queued or written already (it has
				// been in flight past InFlightAfter, or has no journal
				// slot): the row must say it reached a child too, as an
				// update. A request that ends sooner has no row yet and
				// costs nothing more here.
				row := q.row
				row.exists = true
				ok = r.addRowLocked(row, o.QueueSize)
			}
		}
	case pool.EventRequestDone:
		row := r.endedLocked(e)
		if r.journal.short() {
			// The journal needs the room for requests in flight more than
			// for ends waiting to be committed.
			r.journal.release(row.slot)
			row.slot = 0
		}
		if ok = r.addRowLocked(row, o.QueueSize); !ok {
			r.journal.release(row.slot) // forgotten: neither owed nor recorded
		} else {
			r.journal.answered(row.slot, row.written, row.answered, row.pid)
		}
	case pool.EventOrphan:
		r.orphans++
		at := e.Time.UnixMicro()
		ok = r.addRowLocked(reqRow{id: orphanRowID(r.run, r.orphans), server: e.Server, originalID: e.OriginalID, received: at, answered: at,
			status: pool.StatusOrphaned, err: orphanError, pid: e.PID}, o.QueueSize)
	default:
		if ok = queued < o.QueueSize; ok {
			r.events = append(r.events, e)
		}
	}
	wake := r.wakeLocked()
	full := queued < o.BatchSize && len(r.rows)+len(r.events) >= o.BatchSize
	r.mu.Unlock()
	if !ok {
		s.dropped.Add(1)
	}
	if wake {
		notify(s.wake)
	}
	if full {
		notify(s.full)
	}
}

// notify sends on a channel of one that the receiver drains: a send that
// finds it full is one the receiver will see anyway.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// receivedLocked notes a received request: in memory, in the journal,
// and on the waiting list; without a journal slot, its in-flight row goes
// to the writer at once (a crash must not lose it).
func (r *recorder) receivedLocked(e pool.Event) bool {
	if len(r.open) >= maxOpen {
		return false // its end records it
	}
	if old := r.open[e.PoolID]; old != nil { // a pool id twice: forget the first
		r.unwaitLocked(old)
		r.journal.release(old.slot)
	}
	q := r.newOpenLocked()
	q.row = reqRow{id: rowID(r.run, e.PoolID), poolID: e.PoolID, session: e.Session, server: e.Server, method: e.Method,
		name: e.Name, originalID: e.OriginalID, received: e.Time.UnixMicro(), status: StatusInFlight, reqSize: e.Size,
		reqPayload: e.Payload}
	r.open[e.PoolID] = q
	if q.slot = r.journal.take(&q.row); q.slot == 0 {
		q.rowed = true
		return r.addRowLocked(q.row, maxOpen)
	}
	q.prev = r.waitTail
	if r.waitTail != nil {
		r.waitTail.next = q
	} else {
		r.waitHead = q
	}
	r.waitTail = q
	return true
}

// journalLostLocked gives the requests the journal listed that have no
// row yet (those on the waiting list) their in-flight rows now, as
// receivedLocked does for one without a slot: the journal lost them, and
// a crash must find them. It returns how many it could not queue.
func (r *recorder) journalLostLocked() (dropped int) {
	for q := r.waitHead; q != nil; q = r.waitHead {
		r.unwaitLocked(q)
		q.rowed = true
		if !r.addRowLocked(q.row, maxOpen) {
			dropped++
		}
	}
	return dropped
}

// endedLocked is the row of a request that ended with e.
func (r *recorder) endedLocked(e pool.Event) reqRow {
	var row reqRow
	if q := r.open[e.PoolID]; q != nil {
		delete(r.open, e.PoolID)
		r.unwaitLocked(q)
		row, row.exists, row.slot = q.row, q.rowed, q.slot
		r.freeOpenLocked(q)
	} else { // its Received was dropped
		row = reqRow{id: rowID(r.run, e.PoolID), poolID: e.PoolID, session: e.Session, server: e.Server, method: e.Method, name: e.Name,
			received: e.Time.UnixMicro()}
	}
	row.answered = e.Time.UnixMicro()
	row.status = cmp.Or(e.Status, pool.StatusFailed)
	row.errCode, row.err, row.respSize, row.respPayload = e.ErrCode, e.Err, e.Size, e.Payload
	if e.PID != 0 {
		row.pid = e.PID
	}
	if row.written == 0 && e.Written {
		row.written = row.answered // its Written came late, or not at all
	}
	return row
}

// addRowLocked queues row for the writer, unless limit rows and events
// wait already.
func (r *recorder) addRowLocked(row reqRow, limit int) bool {
	if len(r.rows)+len(r.events) >= limit {
		return false
	}
	r.rows = append(r.rows, row)
	return true
}

// maxSpare bounds the ended requests kept for reuse.
const maxSpare = 4096

func (r *recorder) newOpenLocked() *openReq {
	if n := len(r.spare); n > 0 {
		q := r.spare[n-1]
		r.spare = r.spare[:n-1]
		return q
	}
	return new(openReq)
}

func (r *recorder) freeOpenLocked(q *openReq) {
	if len(r.spare) < maxSpare {
		*q = openReq{}
		r.spare = append(r.spare, q)
	}
}

func (r *recorder) unwaitLocked(q *openReq) {
	if q.prev == nil && r.waitHead != q {
		return // not on the list
	}
	if q.prev != nil {
		q.prev.next = q.next
	} else {
		r.waitHead = q.next
	}
	if q.next != nil {
		q.next.prev = q.prev
	} else {
		r.waitTail = q.prev
	}
	q.prev, q.next = nil, nil
}

// wakeLocked arms the writer if it is not and work waits, and says
// whether it must be woken.
func (r *recorder) wakeLocked() bool {
	wake := !r.armed && (len(r.rows)+len(r.events)+len(r.reloads) > 0 || r.waitHead != nil)
	if wake {
		r.armed = true
	}
	return wake
}

// maxQueuedReloads bounds the config reloads waiting for the writer: a
// file rewritten in a loop must not grow the queue.
const maxQueuedReloads = 64

// reloaded queues a config reload for the writer; false if too many wait.
func (r *recorder) reloaded(c ConfigReload) (ok, wake bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reloads) >= maxQueuedReloads {
		return false, false
	}
	r.reloads = append(r.reloads, c)
	return true, r.wakeLocked()
}

// take hands the writer what waits for it: the rows, events and reloads
// queued, swapped for the writer's emptied slices, plus an in-flight row
// for each journaled request received before due.
func (r *recorder) take(w *writer, due time.Time) {
	cutoff := due.UnixMicro()
	r.mu.Lock()
	defer r.mu.Unlock()
	w.rows, r.rows = r.rows, w.rows[:0]
	w.events, r.events = r.events, w.events[:0]
	w.reloads, r.reloads = r.reloads, w.reloads[:0]
	for q := r.waitHead; q != nil && q.row.received <= cutoff; q = r.waitHead {
		r.unwaitLocked(q)
		q.rowed = true
		w.rows = append(w.rows, q.row)
	}
}

// committed frees the journal slots of rows the writer has committed (or
// given up on).
func (r *recorder) committed(rows []reqRow) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range rows {
		r.journal.release(rows[i].slot)
	}
}

// rearm says whether the writer must look again (work waits) and, if
// not, that the next Record with work wakes it.
func (r *recorder) rearm() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = len(r.rows)+len(r.events)+len(r.reloads) > 0 || r.waitHead != nil
	return r.armed
}

// requeueRowed queues again the in-flight rows handed to the writer: a
// recreated database file has none of them.
func (r *recorder) requeueRowed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.open {
		if q.rowed {
			row := q.row
			row.exists = true // updated, else inserted
			r.rows = append(r.rows, row)
		}
	}
}

// inFlight says whether requests are in flight: the writer records its
// run's heartbeat while they are.
func (r *recorder) inFlight() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.open) > 0
}

// pending is how many rows and events wait for the writer (tests).
func (r *recorder) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.rows) + len(r.events) + len(r.reloads)
}

// takeOpen empties the requests in flight (the store is closing): their
// rows, with status unknown.
func (r *recorder) takeOpen(rows []reqRow) []reqRow {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, q := range r.open {
		row := q.row
		row.exists, row.status, row.slot = q.rowed, StatusUnknown, q.slot
		row.err = unknownError
		rows = append(rows, row)
		delete(r.open, id)
	}
	r.waitHead, r.waitTail = nil, nil
	return rows
}

// unknownError is the error of a request of a cleanly stopped run whose
// end was not recorded.
const unknownError = "the end of this request was not recorded (history dropped events under load)"
