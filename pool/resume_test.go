package pool

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// What a resumed client is told of a request the earlier pool never
// answered: it may have run unless both the shim and the history say it
// was not written. The history hears of a write after it, and records it
// milliseconds later; on the first edition its "not written" overrode a
// relaying shim's "may have been", and a pool killed in that window had a
// request the child had run reported as not run.
func TestMergeLostNeverUnsaysWritten(t *testing.T) {
	for _, tc := range []struct {
		name    string
		resume  wire.Resume
		history []Unanswered
		want    bool
	}{
		{"relayed: the shim cannot tell, the history lags", wire.Resume{Counted: true, Lost: []wire.Lost{{ID: "7", Written: true}}},
			[]Unanswered{{OriginalID: "7", Method: "tools/call", Written: false}}, true},
		{"relayed: the history saw it written", wire.Resume{Counted: true, Lost: []wire.Lost{{ID: "7", Written: true}}},
			[]Unanswered{{OriginalID: "7", Method: "tools/call", Written: true}}, true},
		{"ledger: neither saw it written", wire.Resume{Ledger: true, Lost: []wire.Lost{{ID: "7", Written: false}}},
			[]Unanswered{{OriginalID: "7", Method: "tools/call", Written: false}}, false},
		{"ledger: written, the history lags", wire.Resume{Ledger: true, Lost: []wire.Lost{{ID: "7", Written: true}}},
			[]Unanswered{{OriginalID: "7", Method: "tools/call", Written: false}}, true},
		{"relayed: unknown to the history", wire.Resume{Counted: true, Lost: []wire.Lost{{ID: "9", Written: true}}}, nil, true},
		// A ledger the pool does not take the word of: the history, and
		// what the ledger lists besides.
		{"no trusted ledger: the history lags", wire.Resume{Lost: []wire.Lost{{ID: "7", Written: true}}},
			[]Unanswered{{OriginalID: "7", Method: "tools/call", Written: false}}, true},
		{"no trusted ledger: unknown to the history", wire.Resume{Lost: []wire.Lost{{ID: "9", Written: true}}}, nil, true},
		{"no trusted ledger: the history alone", wire.Resume{}, []Unanswered{{OriginalID: "7", Method: "tools/call", Written: true}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := mergeLost(&tc.resume, tc.history)
			if len(out) != 1 || out[0].Written != tc.want {
				t.Errorf("mergeLost = %+v, want one request with Written %v", out, tc.want)
			}
		})
	}
}
