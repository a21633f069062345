package pool

import (
	"container/heap"
	"time"
)

// heldQueue is what a session holds while the pool asks its client's
// roots (roots.go), under the session's mu: its messages in arrival
// order, the order they go on in, and its requests by pool id, by key
// and by deadline, so that a cancel, an expiry or the replay finds one
// without looking through the others, however many are held. The
// requests held count against the session's share of requests in flight
// (session.overCountLocked), the notifications against
// maxHeldNotifications, and the lines of all against its bytes
// (holdForRoots).
type heldQueue struct {
	first, last *heldMessage            // arrival order, linked by next and prev
	notes       int                     // the notifications held
	byID        map[uint64]*heldMessage // the requests, by pool id (cancelHeld)
	byKey       map[string]*heldMessage // and by key (clientCancelsLocked): one each, a duplicate is refused
	due         heldDue                 // those timed (setDue), not cancelled by their client: a heap by deadline
	timer       *time.Timer             // runs expireHeld at due's earliest deadline; made by the first
	// inHand is the request the replay took from the queue while the
	// session's table of requests in flight does not have it yet: it
	// still counts against the session's share (forwardCounted).
	inHand *arrival
}

// counted is how many requests of the queue count against the session's
// share of requests in flight: those held, and the one in hand.
func (q *heldQueue) counted() int {
	n := len(q.byID)
	if q.inHand != nil {
		n++
	}
	return n
}

// push appends h, a message held; a request is found by its pool id and
// its key from now, and by its deadline once it has one (setDue).
func (q *heldQueue) push(h *heldMessage) {
	h.prev = q.last
	if q.last == nil {
		q.first = h
	} else {
		q.last.next = h
	}
	q.last = h
	if h.req == nil {
		q.notes++
		return
	}
	if q.byID == nil {
		q.byID, q.byKey = map[uint64]*heldMessage{}, map[string]*heldMessage{}
	}
	q.byID[h.req.id] = h
	q.byKey[h.req.key] = h
}

// setDue gives h, a request held, the requestTimeout it ends at. It
// reports whether h ends before any other held: the timer is to be armed
// for it.
func (q *heldQueue) setDue(h *heldMessage, timeout time.Duration) (earliest bool) {
	h.req.timeout = timeout
	heap.Push(&q.due, h)
	return h.req.at == 0
}

// remove takes h out of the queue, the rest in order.
func (q *heldQueue) remove(h *heldMessage) {
	if h.prev == nil {
		q.first = h.next
	} else {
		h.prev.next = h.next
	}
	if h.next == nil {
		q.last = h.prev
	} else {
		h.next.prev = h.prev
	}
	h.prev, h.next = nil, nil
	if h.req == nil {
		q.notes--
	} else {
		delete(q.byID, h.req.id)
		delete(q.byKey, h.req.key)
		q.undue(h)
	}
	if q.first == nil {
		q.byID, q.byKey, q.due = nil, nil, nil // maps do not shrink: a flood's are let go
	}
}

// undue takes h, a request held, out of those that end at their
// requestTimeout; the timer stops once none is left.
func (q *heldQueue) undue(h *heldMessage) {
	if h.req.at >= 0 {
		heap.Remove(&q.due, h.req.at)
	}
	if len(q.due) == 0 && q.timer != nil {
		q.timer.Stop()
	}
}

// takeAll empties the queue and returns what it held, linked by next in
// arrival order. The request in hand stays the replay's.
func (q *heldQueue) takeAll() (first *heldMessage) {
	first = q.first
	if q.timer != nil {
		q.timer.Stop()
	}
	*q = heldQueue{timer: q.timer, inHand: q.inHand}
	return first
}

// deadline is when a, a request held, ends at its requestTimeout.
func (a *arrival) deadline() time.Time { return a.received.Add(a.timeout) }

// heldDue is a min-heap (container/heap) of held requests by deadline,
// the earlier arrival first among equal ones; each knows its place
// (arrival.at).
type heldDue []*heldMessage

func (d heldDue) Len() int { return len(d) }

func (d heldDue) Less(i, j int) bool {
	a, b := d[i].req.deadline(), d[j].req.deadline()
	return a.Before(b) || a.Equal(b) && d[i].req.id < d[j].req.id
}

func (d heldDue) Swap(i, j int) {
	d[i], d[j] = d[j], d[i]
	d[i].req.at, d[j].req.at = i, j
}

func (d *heldDue) Push(x any) {
	h := x.(*heldMessage)
	h.req.at = len(*d)
	*d = append(*d, h)
}

func (d *heldDue) Pop() any {
	old := *d
	h := old[len(old)-1]
	old[len(old)-1] = nil
	*d = old[:len(old)-1]
	h.req.at = -1
	return h
}
