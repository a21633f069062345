//go:build unix

package pool_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// newLedger makes a ledger file as the shim does, and a reader of the
// requests it lists.
func newLedger(t *testing.T) (*os.File, func() []wire.Lost) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(wire.LedgerSize); err != nil {
		t.Fatal(err)
	}
	return f, func() []wire.Lost {
		mem, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return wire.ReadLedger(mem)
	}
}

func lists(lost []wire.Lost, id string) bool {
	return slices.ContainsFunc(lost, func(l wire.Lost) bool { return l.ID == id })
}

// A legacy client's call that a modern child answered with input_required
// is retried in its place once the client answered the question: when
// the final answer is delivered, the ledger lists nothing (a call left
// in it would be answered again by the next pool after a kill).
func TestLedgerForgetsABridgedCallOnceAnswered(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-era", "modern"))
	file, ledger := newLedger(t)
	a := tp.attachLedger(t, "srv", file)
	a.roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"a","version":"1"}}}`)
	if _, err := a.in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	var q msg
	if line := a.roundTrip(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"ask","arguments":{"kind":"sampling"}}}`); json.Unmarshal([]byte(line), &q) != nil || q.Method != "sampling/createMessage" {
		t.Fatalf("want the child's question, got %s", line)
	}
	var final msg
	line := a.roundTrip(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`)
	if json.Unmarshal([]byte(line), &final) != nil || string(final.ID) != `"call"` || final.Error != nil {
		t.Fatalf("want the call's answer, got %s", line)
	}
	if lost := ledger(); len(lost) != 0 {
		t.Fatalf("the call was answered, and the ledger still lists %+v", lost)
	}
}

// A 2026-07-28 client's retry of a call the pool held for it is in the
// ledger while the child runs it, as every request in flight is.
func TestLedgerListsAHeldCallsRetry(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv", "-delay", "1s"))
	file, ledger := newLedger(t)
	a := tp.attachLedger(t, "srv", file)
	var m msg
	if err := json.Unmarshal([]byte(a.roundTrip(askCall(`"first"`, "sampling", ""))), &m); err != nil {
		t.Fatal(err)
	}
	r := readResult(t, m)
	var key string
	for k := range r.InputRequests {
		key = k
	}
	retry := fmt.Sprintf(`{"jsonrpc":"2.0","id":"retry","method":"tools/call","params":{"name":"ask","arguments":{"kind":"sampling"},"requestState":%q,"inputResponses":{%q:{"role":"assistant","content":{"type":"text","text":"42"},"model":"m"}},%s}}`,
		r.RequestState, key, samplingMeta)
	if _, err := a.in.WriteString(retry + "\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the retry listed in the ledger", func() bool { return lists(ledger(), `"retry"`) })
	if line, err := a.out.ReadString('\n'); err != nil || json.Unmarshal([]byte(line), &m) != nil || string(m.ID) != `"retry"` {
		t.Fatalf("want the retry's answer, got %q (%v)", line, err)
	}
	if lists(ledger(), `"retry"`) {
		t.Error("the retry was answered, and the ledger still lists it")
	}
}
