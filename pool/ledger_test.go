package pool

import (
	"encoding/binary"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// The ledger lists exactly the requests taken and not released, with
// whether each was written, and reuses released slots.
func TestLedgerRecordsWhatIsInFlight(t *testing.T) {
	mem := make([]byte, wire.LedgerSize)
	l := &ledger{mem: mem, drop: func() {}}
	a := l.take([]byte(`1`))
	b := l.take([]byte(`"two"`))
	c := l.take([]byte(`{"odd":"but legal"}`))
	l.written(b)
	l.release(a)
	d := l.take([]byte(`4`))
	if d != a {
		t.Errorf("a released slot was not reused: got %d, want %d", d, a)
	}
	long := make([]byte, wire.LedgerMaxID+1)
	if s := l.take(long); s != 0 {
		t.Errorf("an id too long to record got slot %d", s)
	}
	got := map[string]bool{}
	for _, lost := range wire.ReadLedger(mem) {
		got[lost.ID] = lost.Written
	}
	want := map[string]bool{`"two"`: true, `{"odd":"but legal"}`: false, `4`: false}
	if len(got) != len(want) {
		t.Fatalf("ledger lists %v, want %v", got, want)
	}
	for id, w := range want {
		if g, ok := got[id]; !ok || g != w {
			t.Errorf("ledger: %s written=%v (listed %v), want written=%v", id, g, ok, w)
		}
	}
	l.close()
	l.release(c) // after close: nothing happens, nothing breaks
	if l.take([]byte(`5`)) != 0 {
		t.Error("a closed ledger took a request")
	}
}

// A ledger whose slots are all taken records no more, and loses nothing
// it had. The last slot is the stream's, never a request's.
func TestLedgerFull(t *testing.T) {
	l := &ledger{mem: make([]byte, wire.LedgerSize), drop: func() {}}
	for i := range wire.LedgerStreamSlot {
		if l.take([]byte{'1'}) == 0 {
			t.Fatalf("slot %d refused", i)
		}
	}
	if l.take([]byte{'2'}) != 0 {
		t.Error("a full ledger took a request")
	}
	if n := len(wire.ReadLedger(l.mem)); n != wire.LedgerStreamSlot {
		t.Errorf("full ledger lists %d", n)
	}
}

// The stream slot says whether the client's output may end inside a
// line, and is no request: not to ReadLedger, and not to a reader that
// knows only requests (its id length is 0), such as an earlier shim's.
func TestLedgerMidLine(t *testing.T) {
	mem := make([]byte, wire.LedgerSize)
	l := &ledger{mem: mem, drop: func() {}}
	l.take([]byte(`7`))
	for _, on := range []bool{true, false, true} {
		l.midLine(on)
		if got := wire.LedgerMidLineAt(mem); got != on {
			t.Errorf("midLine(%v): the ledger says %v", on, got)
		}
		if lost := wire.ReadLedger(mem); len(lost) != 1 || lost[0].ID != `7` {
			t.Errorf("midLine(%v): the ledger lists %v, want request 7 alone", on, lost)
		}
		if n := binary.LittleEndian.Uint32(mem[wire.LedgerStreamSlot*wire.LedgerSlotSize+4:]); n != 0 {
			t.Errorf("the stream slot has an id of %d bytes", n)
		}
	}
}

// Open listens are listed as such, and hold at most maxLedgerListens
// slots: a listen holds its slot for as long as it is open, and more
// would crowd out the requests. A listen released gives its place to
// the next, and the requests keep every other slot.
func TestLedgerListensHoldASmallShare(t *testing.T) {
	l := &ledger{mem: make([]byte, wire.LedgerSize), drop: func() {}}
	var first int32
	for i := range maxLedgerListens {
		slot := l.take([]byte(`"L"`))
		if !l.listen(slot) {
			t.Fatalf("listen %d refused", i)
		}
		if i == 0 {
			first = slot
		}
	}
	over := l.take([]byte(`"over"`))
	if l.listen(over) {
		t.Fatalf("a listen past the %d open took a slot", maxLedgerListens)
	}
	l.release(over)
	l.release(first)
	if again := l.take([]byte(`"again"`)); !l.listen(again) {
		t.Error("a released listen did not give its place to the next")
	}
	for i := range wire.LedgerStreamSlot - maxLedgerListens {
		if l.take([]byte{'1'}) == 0 {
			t.Fatalf("request %d refused beside the open listens", i)
		}
	}
	listens := 0
	for _, lost := range wire.ReadLedger(l.mem) {
		if lost.Listen {
			listens++
			if lost.ID != `"L"` && lost.ID != `"again"` || lost.Written {
				t.Errorf("the ledger lists %+v as an open listen", lost)
			}
		}
	}
	if listens != maxLedgerListens {
		t.Errorf("the ledger lists %d open listens, want %d", listens, maxLedgerListens)
	}
}
