//go:build linux

package pool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// An attached shim forgets what it carries to the next pool once that
// pool welcomes it: the requests the dead pool owed, that the client's
// output ends inside a line, and the input it read meanwhile. The pool
// lists them in the session's ledger before its Welcome, while it waits
// for a child that starts slowly, and releases them once it has answered
// or read them: a kill in that wait leaves them owed, not forgotten.
func TestResumeListsWhatItTakesBeforeItsWelcome(t *testing.T) {
	// The history is looked up before the owed are answered: held until
	// the ledger was read at the Welcome.
	looked := make(chan struct{})
	opts := &pool.Options{RunID: "later", Unanswered: func(ctx context.Context, _, _ string) (pool.Owed, error) {
		select {
		case <-looked:
		case <-ctx.Done():
		}
		return pool.Owed{}, nil
	}}
	tp := newTestPool(t, opts, fake("srv", "-startup-delay", "1s"))
	file, _ := newLedger(t)
	carried := []byte(`{"jsonrpc":"2.0","id":"carried","method":"tools/call","params":{"name":"echo","arguments":{"text":"carried"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}` + "\n")
	hello, _ := json.Marshal(wire.Hello{Server: "srv", Attach: true, Ledger: true, Resume: &wire.Resume{
		Run: "earlier", Session: "s1", Initialize: []byte(keptInitParams), InitializeID: "0",
		Lost:         []wire.Lost{{ID: `"ran"`, Written: true}, {ID: `"listen"`, Listen: true}, {ID: "0"}},
		Ledger:       true,
		MidLine:      true,
		PendingBytes: len(carried),
	}})
	a := tp.attachHello(t, hello, []int{int(file.Fd())}, carried)

	// Welcomed: the child is still starting, and the ledger lists it all
	// (the cut line too, but the pool ends that at once).
	lost := wire.ReadLedger(ledgerBytes(t, file))
	want := []wire.Lost{{ID: `"ran"`, Written: true}, {ID: `"listen"`, Listen: true}, {ID: "0"}, {ID: `"carried"`}}
	for _, w := range want {
		if !slices.Contains(lost, w) {
			t.Errorf("at the Welcome the ledger does not list %+v; it lists %+v", w, lost)
		}
	}

	close(looked)

	// Then each is answered once, the cut line ended first.
	_ = a.outFile.SetReadDeadline(time.Now().Add(30 * time.Second))
	first, err := a.out.ReadString('\n')
	if err != nil || first != "\n" {
		t.Fatalf("the client's output first read %q (%v), want the cut line ended", first, err)
	}
	got := map[string]string{}
	read := func(n int) {
		t.Helper()
		for len(got) < n {
			line, err := a.out.ReadString('\n')
			if err != nil {
				t.Fatalf("the owed answers: %v (so far %v)", err, got)
			}
			var m msg
			_ = json.Unmarshal([]byte(line), &m)
			if _, dup := got[string(m.ID)]; dup {
				t.Errorf("%s answered twice: %s", m.ID, line)
			}
			got[string(m.ID)] = line
		}
	}
	// The errors need no child: they come while it starts, the
	// initialize's answer still owed.
	read(2)
	if lost := wire.ReadLedger(ledgerBytes(t, file)); !slices.Contains(lost, wire.Lost{ID: "0"}) {
		t.Errorf("the errors came after the initialize was answered (the ledger lists %+v, got %v)", lost, got)
	}
	read(4)
	for id, part := range map[string]string{`"ran"`: `"mayHaveExecuted":true`, `"listen"`: `listen`, "0": `"result"`, `"carried"`: `"text":"carried"`} {
		if !strings.Contains(got[id], part) {
			t.Errorf("%s was answered %q, want it to hold %s", id, got[id], part)
		}
	}
	// Answered and read: the ledger lists nothing more, and says the
	// client's output ends with a whole line.
	eventually(t, "the ledger to list nothing", func() bool {
		mem := ledgerBytes(t, file)
		return len(wire.ReadLedger(mem)) == 0 && !wire.LedgerMidLineAt(mem)
	}, func() string { return fmt.Sprintf("it lists %+v", wire.ReadLedger(ledgerBytes(t, file))) })
}
