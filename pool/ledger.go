package pool

import (
	"encoding/binary"
	"sync"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// ledger is the pool's side of an attached session's ledger (wire.Ledger):
// the session's requests in flight, written into memory its shim owns, so
// that when the pool dies the shim can still say what the client waits
// for. Every operation is a few stores under a mutex that nothing else
// takes; no I/O.
type ledger struct {
	mu      sync.Mutex
	mem     []byte  // the shared mapping; nil once closed
	free    []int32 // released slots, reused first (fewer pages touched)
	next    int32   // the first slot never used
	listens int     // slots marked wire.LedgerListen, at most maxLedgerListens
	drop    func()  // unmaps mem
}

// maxLedgerListens bounds the slots a session's open listens hold. A
// listen holds its slot for as long as it is open, a request only until
// it is answered; the ledger has no more slots (wire.LedgerStreamSlot)
// than a session may have requests in flight (Options.MaxSessionInFlight,
// 8192 by default), and a session may hold thousands of listens
// (Options.MaxSessionSubscriptions). So listens get a small share that
// leaves the requests nearly all of it: a client opens one or a few. A
// listen past it is not recorded: a pool killed with it open leaves its
// client untold.
const maxLedgerListens = 64

// take records a request in a free slot and returns the slot + 1, or 0
// when none is free or the id is too long to record.
func (l *ledger) take(id []byte) int32 {
	if l == nil || len(id) > wire.LedgerMaxID {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mem == nil {
		return 0
	}
	var slot int32
	switch {
	case len(l.free) > 0:
		slot = l.free[len(l.free)-1]
		l.free = l.free[:len(l.free)-1]
	case l.next < wire.LedgerStreamSlot: // the last slot is the stream's
		slot = l.next
		l.next++
	default:
		return 0
	}
	b := l.mem[int(slot)*wire.LedgerSlotSize:][:wire.LedgerSlotSize]
	binary.LittleEndian.PutUint32(b[4:], uint32(len(id)))
	copy(b[8:], id)
	binary.LittleEndian.PutUint32(b, wire.LedgerTaken) // after the id: a reader never sees a state without it
	return slot + 1
}

// written marks slot's request as written to a child. It is called
// before the write: a request the pool may be writing may have run.
func (l *ledger) written(slot int32) { l.set(slot, wire.LedgerWritten, false) }

// taken marks slot's request as not written after all: the write took
// none of it, and it waits in the queue again.
func (l *ledger) taken(slot int32) { l.set(slot, wire.LedgerTaken, false) }

// midLine records whether the client's output may now end inside a line:
// set before a write that may stop inside one, cleared after a write that
// ended one.
func (l *ledger) midLine(on bool) {
	state := wire.LedgerFree
	if on {
		state = wire.LedgerMidLine
	}
	l.set(wire.LedgerStreamSlot+1, state, false)
}

// listen marks slot, taken for a subscriptions/listen, as an open listen
// (wire.LedgerListen): owed the end of its stream until it is released.
// It reports false, and marks nothing, when the listens hold their share
// (maxLedgerListens): the caller releases the slot.
func (l *ledger) listen(slot int32) bool {
	if l == nil || slot <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mem == nil || l.listens >= maxLedgerListens {
		return false
	}
	binary.LittleEndian.PutUint32(l.mem[int(slot-1)*wire.LedgerSlotSize:], wire.LedgerListen)
	l.listens++
	return true
}

// release frees slot: its answer was written to the client, or it was
// cancelled.
func (l *ledger) release(slot int32) { l.set(slot, wire.LedgerFree, true) }

func (l *ledger) set(slot int32, state uint32, free bool) {
	if l == nil || slot <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mem == nil {
		return
	}
	b := l.mem[int(slot-1)*wire.LedgerSlotSize:]
	if free && binary.LittleEndian.Uint32(b) == wire.LedgerListen {
		l.listens-- // only the pool writes the ledger while it runs
	}
	binary.LittleEndian.PutUint32(b, state)
	if free {
		l.free = append(l.free, slot-1)
	}
}

// close unmaps the ledger; later operations do nothing.
func (l *ledger) close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mem != nil {
		l.drop()
		l.mem = nil
	}
}
