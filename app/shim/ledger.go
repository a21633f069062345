package shim

import (
	"os"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// takeLedger reads what the ledger lists as in flight and empties it for
// the next pool.
func takeLedger(f *os.File) []wire.Lost {
	if f == nil {
		return nil
	}
	buf := make([]byte, wire.LedgerSize)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return nil
	}
	lost := wire.ReadLedger(buf)
	// Truncating to zero and back drops every page: all slots free.
	if f.Truncate(0) != nil || f.Truncate(wire.LedgerSize) != nil {
		return lost
	}
	return lost
}

// mergeLost adds to lost what more lists, once per id.
func mergeLost(lost, more []wire.Lost) []wire.Lost {
	at := map[string]int{}
	for i, l := range lost {
		at[l.ID] = i
	}
	for _, m := range more {
		if i, ok := at[m.ID]; ok {
			lost[i].Written = lost[i].Written || m.Written
			continue
		}
		at[m.ID] = len(lost)
		lost = append(lost, m)
	}
	return lost
}
