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
	EventBackendState   // a backend changed State
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

	mu   sync.Mutex
	subs map[chan Event]struct{}
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
// It is emit's cold half, apart so that emit's frame stays small.
func (h *hub) fanOut(e *Event) {
	h.mu.Lock()
	for ch := range h.subs {
		select {
		case ch <- *e:
		default:
			delete(h.subs, ch)
			h.nsubs.Store(int32(len(h.subs)))
			// The buffer is full; make room for the last word.
			select {
			case <-ch:
			default:
			}
			ch <- Event{Kind: EventLagged, Time: e.Time}
			close(ch)
		}
	}
	h.mu.Unlock()
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
// closes, or after an EventLagged when the reader fell behind (then
// subscribe again). buffer <= 0 means 1024.
func (p *Pool) Subscribe(ctx context.Context, buffer int) (Snapshot, <-chan Event) {
	if buffer <= 0 {
		buffer = 1024
	}
	ch := make(chan Event, buffer)
	p.events.mu.Lock()
	if p.events.subs == nil {
		p.events.subs = map[chan Event]struct{}{}
	}
	p.events.subs[ch] = struct{}{}
	p.events.nsubs.Store(int32(len(p.events.subs)))
	p.events.mu.Unlock()
	snap := p.Snapshot()
	p.wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-p.closing:
		}
		p.events.mu.Lock()
		if _, ok := p.events.subs[ch]; ok {
			delete(p.events.subs, ch)
			p.events.nsubs.Store(int32(len(p.events.subs)))
			close(ch)
		}
		p.events.mu.Unlock()
	})
	return snap, ch
}
