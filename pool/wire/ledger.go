package wire

import "encoding/binary"

// The ledger is an attached session's record of its requests in flight,
// kept in memory the shim owns and shares with the pool (a memfd it sends
// with its hello, after the client's pipes). The pool writes it as requests
// come and go; if the pool dies, the shim still has it, and the next pool
// answers what it lists with the at-most-once error, history or not.
//
// The memfd is sealed at LedgerSize (F_SEAL_SHRINK, F_SEAL_GROW, then
// F_SEAL_SEAL) before it is sent, and the pool maps no ledger without
// the first two: the pool stores into its mapping on every request, and
// a store past the end of a file that shrank under it raises SIGBUS,
// which would end the pool and every session on it. The shim therefore
// empties its ledger by punching a hole in it: it cannot truncate it.
// Where there is no memfd (not Linux) there is no ledger.
//
// Layout: LedgerSlots slots of LedgerSlotSize bytes. A slot is a
// little-endian uint32 state (LedgerFree, LedgerTaken, LedgerWritten,
// LedgerListen), a uint32 id length, then the client's id as JSON. The pool writes the id
// before the state, and the state atomically. The last slot is no
// request's: its state is LedgerMidLine while the client's output may end
// inside a line the pool has not finished writing, and its id length is
// 0, so a reader that knows only requests skips it.
const (
	LedgerSlots    = 8192
	LedgerSlotSize = 128
	LedgerSize     = LedgerSlots * LedgerSlotSize
	// LedgerMaxID is the longest id a slot holds; a request with a longer
	// id is not recorded.
	LedgerMaxID = LedgerSlotSize - 8
)

// Ledger slot states.
const (
	LedgerFree    uint32 = iota // no request
	LedgerTaken                 // received; not (yet) written to a child
	LedgerWritten               // written to a child: it may have run
	LedgerMidLine               // the stream slot: the client's output may end inside a line
	// LedgerListen is an open subscriptions/listen: it is owed the end
	// of its stream, for as long as it is open. A reader that knows only
	// requests takes it for one not written, which it answers as not run.
	LedgerListen
)

// LedgerStreamSlot is the slot that says whether the client's output may
// end inside a line (LedgerMidLine): a pool that dies while writing an
// answer leaves part of it, and the next pool ends that line before it
// writes anything, so that the client reads one unreadable line and then
// whole answers, not the next answer glued to the broken one.
const LedgerStreamSlot = LedgerSlots - 1

// LedgerMidLineAt reports whether the ledger says the client's output may
// end inside a line.
func LedgerMidLineAt(mem []byte) bool {
	off := LedgerStreamSlot * LedgerSlotSize
	return len(mem) >= off+4 && binary.LittleEndian.Uint32(mem[off:]) == LedgerMidLine
}

// Lost is a request a dead pool took and never answered.
type Lost struct {
	ID      string `json:"id"` // the client's id, as JSON
	Written bool   `json:"written,omitempty"`
	// Listen says it is an open subscriptions/listen (LedgerListen),
	// whose stream ended with the pool.
	Listen bool `json:"listen,omitempty"`
}

// ReadLedger lists the requests a ledger records as in flight.
func ReadLedger(mem []byte) []Lost {
	var out []Lost
	for off := 0; off+LedgerSlotSize <= len(mem) && off < LedgerStreamSlot*LedgerSlotSize; off += LedgerSlotSize {
		state := binary.LittleEndian.Uint32(mem[off:])
		n := int(binary.LittleEndian.Uint32(mem[off+4:]))
		if state == LedgerFree || n <= 0 || n > LedgerMaxID {
			continue
		}
		out = append(out, Lost{ID: string(mem[off+8 : off+8+n]), Written: state == LedgerWritten, Listen: state == LedgerListen})
	}
	return out
}
