package pool

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// EventKind says what happened.
type EventKind uint8

// The things the pool reports. Request events carry PoolID; a request's
// life is Received, then optionally Written, then exactly one Done.
const (
	EventSessionOpened EventKind = iota + 1
	EventSessionClosed
	EventBackendStarted // a child process started: PID, ProcessStart, Command
	EventBackendExited  // a child process ended: ExitCode, Err
	EventBackendState   // a backend changed State; with no PID, maybe the server's (its package being resolved before any child)
	EventRequestReceived
	EventRequestWritten // the request's bytes were fully written to the child
	EventRequestDone    // answered, failed, timed out or cancelled: Status
	EventOrphan         // a child answered an id nobody waits for
	EventLagged         // the subscriber fell behind; its channel closes next
)

var eventNames = [...]string{"", "session.opened", "session.closed", "backend.started",
	"backend.exited", "backend.state", "request.received", "request.written",
	"request.done", "orphan", "lagged"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Request statuses, as recorded in history.
const (
	StatusOK        = "ok"
	StatusError     = "error"     // the child answered with a JSON-RPC error
	StatusTimeout   = "timeout"   // requestTimeout passed
	StatusCancelled = "cancelled" // the client cancelled or went away
	StatusFailed    = "failed"    // the pool answered with an error (child died, unavailable, ...)
	StatusOrphaned  = "orphaned"  // a response for an id nobody waits for
)

// Event is one thing that happened in the pool. It is plain data, passed by
// value, so recording it never shares memory with the hot path. Fields
// that do not apply to a Kind are zero.
type Event struct {
	Kind    EventKind
	Time    time.Time
	Server  string
	Session string
	PID     int

	// Requests.
	PoolID     uint64
	Method     string
	Name       string // tool, prompt or resource the request names
	OriginalID string
	Status     string
	ErrCode    int
	Err        string
	Size       int    // bytes of the request (Received) or response (Done)
	Written    bool   // Done: whether the request had reached the child
	Payload    []byte // Received/Done with capture on: a bounded prefix

	// Sessions.
	ClientName    string
	ClientVersion string
	Transport     string

	// Backends.
	State   string
	Command []string
	// ResolvedCommand is what a started child runs when its command was
	// resolved (npx -> node); nil when it runs Command.
	ResolvedCommand []string
	// Roots is a started child's roots partition (EventBackendStarted).
	Roots        []string
	ProcessStart time.Time
	// Carried marks an EventBackendStarted for a child an earlier pool
	// started and handed over across an upgrade: no new process.
	Carried  bool
	ExitCode int
}

// hub fans events out to the recorder and to subscribers. Sending never
// blocks: a subscriber whose buffer is full is told it fell behind and is
// dropped, the way a lagging watcher is in tailscale's ipnlocal. The
// recorder gets events in batches (recordq.go), never on the hot path.
type hub struct {
	record *recordQueue // Options.Record's; nil without one
	nsubs  atomic.Int32 // len(subs), read without the lock on the hot path

	mu sync.Mutex
	// subs maps each subscriber's channel to a channel closed when the
	// hub drops it, which ends the subscription's goroutine.
	subs map[chan Event]chan struct{}
}

func newHub(record func(Event)) hub {
	if record == nil {
		return hub{}
	}
	return hub{record: newRecordQueue(record)}
}

// emit hands e to the recorder and the subscribers. It takes a pointer
// because an Event is large (about 400 bytes): it is copied once, into
// the record queue or a subscriber's channel. Nothing keeps e.
func (h *hub) emit(e *Event) {
	if h.record != nil {
		h.record.add(e)
	}
	if h.nsubs.Load() != 0 {
		h.fanOut(e)
	}
}

// fanOut sends e to every subscriber, dropping one whose buffer is full.
// It is emit's cold half, apart so that emit's frame stays small. Only
// the hub sends, under h.mu, so a channel with a free slot besides the
// last takes e without blocking; the last slot is kept for EventLagged,
// so that a subscriber that lags has every event before it.
func (h *hub) fanOut(e *Event) {
	h.mu.Lock()
	for ch := range h.subs {
		if len(ch) < cap(ch)-1 {
			ch <- *e
			continue
		}
		ch <- Event{Kind: EventLagged, Time: e.Time}
		h.drop(ch)
	}
	h.mu.Unlock()
}

// drop closes a subscriber's channel and lets its goroutine go. h.mu is
// held.
func (h *hub) drop(ch chan Event) {
	close(h.subs[ch])
	delete(h.subs, ch)
	h.nsubs.Store(int32(len(h.subs)))
	close(ch)
}

// closeRecord hands the recorder every event so far; later ones reach it
// at once. Close and Handover end with it.
func (h *hub) closeRecord() {
	if h.record != nil {
		h.record.close()
	}
}

// Subscribe returns the current snapshot and a channel of every event after
// it. The snapshot is taken with the subscription registered, so no event
// falls between the two. The channel closes when ctx ends, when the pool
// closes (of a closed pool it is closed already), or after an
// EventLagged when the reader fell behind (then subscribe again): it holds
// buffer events, and every event before an EventLagged. buffer <= 0 means
// 1024.
func (p *Pool) Subscribe(ctx context.Context, buffer int) (Snapshot, <-chan Event) {
	if buffer <= 0 {
		buffer = 1024
	}
	ch := make(chan Event, buffer+1) // the last slot is EventLagged's
	if !p.enter() {
		close(ch)
		return p.Snapshot(), ch
	}
	defer p.leave()
	dropped := make(chan struct{})
	p.events.mu.Lock()
	if p.events.subs == nil {
		p.events.subs = map[chan Event]chan struct{}{}
	}
	p.events.subs[ch] = dropped
	p.events.nsubs.Store(int32(len(p.events.subs)))
	p.events.mu.Unlock()
	snap := p.Snapshot()
	// The subscription ends with ctx or the pool; one the hub dropped
	// has ended already, and its goroutine goes with it.
	p.wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-p.closing:
		case <-dropped:
			return
		}
		p.events.mu.Lock()
		if _, ok := p.events.subs[ch]; ok {
			p.events.drop(ch)
		}
		p.events.mu.Unlock()
	})
	return snap, ch
}
