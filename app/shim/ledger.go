package shim

import (
	"os"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// takeLedger reads what the ledger lists as in flight, and whether the
// client's output may end inside a line, and empties it for the next pool.
func takeLedger(f *os.File) (lost []wire.Lost, midLine bool) {
	if f == nil {
		return nil, false
	}
	buf := make([]byte, wire.LedgerSize)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return nil, false
	}
	lost, midLine = wire.ReadLedger(buf), wire.LedgerMidLineAt(buf)
	clearLedger(f)
	return lost, midLine
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
			lost[i].Listen = lost[i].Listen || m.Listen
			continue
		}
		at[m.ID] = len(lost)
		lost = append(lost, m)
	}
	return lost
}
