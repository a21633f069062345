package shim

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// The ledger is a memfd sealed at its size, for good: the pool maps only
// such a ledger, since one that shrank under its mapping would end it
// (SIGBUS). Taking it still empties it for the next pool.
func TestLedgerIsSealed(t *testing.T) {
	f := newLedger()
	if f == nil {
		t.Fatal("no ledger")
	}
	defer f.Close()
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatalf("F_GET_SEALS: %v", err)
	}
	if want := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL; seals&want != want {
		t.Fatalf("seals %#x, want %#x", seals, want)
	}
	if err := f.Truncate(0); err == nil {
		t.Fatal("the ledger shrank")
	}
	if st, err := f.Stat(); err != nil || st.Size() != wire.LedgerSize {
		t.Fatalf("ledger size %v (%v), want %d", st.Size(), err, wire.LedgerSize)
	}

	slot := make([]byte, wire.LedgerSlotSize)
	binary.LittleEndian.PutUint32(slot, wire.LedgerWritten)
	binary.LittleEndian.PutUint32(slot[4:], 1)
	slot[8] = '7'
	if _, err := f.WriteAt(slot, 0); err != nil {
		t.Fatal(err)
	}
	if lost, _ := takeLedger(f); len(lost) != 1 || lost[0].ID != "7" || !lost[0].Written {
		t.Fatalf("took %+v, want request 7, written", lost)
	}
	if lost, _ := takeLedger(f); len(lost) != 0 {
		t.Fatalf("a taken ledger still lists %+v", lost)
	}
}
