//go:build linux

package pool_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// newLedger makes a ledger as the shim does, a memfd sealed at its size,
// and a reader of the requests it lists.
func newLedger(t *testing.T) (*os.File, func() []wire.Lost) {
	t.Helper()
	f := memfdLedger(t, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL)
	return f, func() []wire.Lost { return wire.ReadLedger(ledgerBytes(t, f)) }
}

// memfdLedger makes a memfd of the ledger's size with seals (none: 0).
func memfdLedger(t testing.TB, seals int) *os.File {
	t.Helper()
	fd, err := unix.MemfdCreate("test-ledger", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "test-ledger")
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(wire.LedgerSize); err != nil {
		t.Fatal(err)
	}
	if seals != 0 {
		if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// ledgerBytes is what the ledger in f holds.
func ledgerBytes(t testing.TB, f *os.File) []byte {
	t.Helper()
	mem := make([]byte, wire.LedgerSize)
	if _, err := f.ReadAt(mem, 0); err != nil {
		t.Fatal(err)
	}
	return mem
}

// fileLedger is a regular file of the ledger's size: nothing seals it.
func fileLedger(t testing.TB) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "ledger"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(wire.LedgerSize); err != nil {
		t.Fatal(err)
	}
	return f
}

// The pool maps only a ledger that cannot change size: a memfd sealed
// against shrinking and growing. Any other is refused, and its session
// goes on without one: the pool never writes it.
func TestLedgerMustBeSealed(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	for _, tc := range []struct {
		name   string
		ledger func(t *testing.T) *os.File
		mapped bool
	}{
		{"sealed as the shim seals it", func(t *testing.T) *os.File {
			return memfdLedger(t, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL)
		}, true},
		{"unsealed memfd", func(t *testing.T) *os.File { return memfdLedger(t, 0) }, false},
		{"may shrink", func(t *testing.T) *os.File { return memfdLedger(t, unix.F_SEAL_GROW|unix.F_SEAL_SEAL) }, false},
		{"may grow", func(t *testing.T) *os.File { return memfdLedger(t, unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL) }, false},
		{"regular file", func(t *testing.T) *os.File { return fileLedger(t) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.ledger(t)
			a := tp.attachLedger(t, "srv", f)
			a.initialize()
			var m msg
			if line := a.roundTrip(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`); json.Unmarshal([]byte(line), &m) != nil || string(m.ID) != `"call"` || m.Error != nil {
				t.Fatalf("want the call's answer, got %s", line)
			}
			written := bytes.Contains(ledgerBytes(t, f), []byte(`"call"`))
			if written != tc.mapped {
				t.Errorf("the pool wrote the ledger: %v, want %v", written, tc.mapped)
			}
		})
	}
}

// A ledger cut short after the hello ends nothing: a store into a mapping
// past its file's end raises SIGBUS, which would end the pool and every
// session on it, so the pool maps no ledger that can shrink.
func TestLedgerThatShrinksEndsNothing(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	for _, tc := range []struct {
		name   string
		ledger func(t *testing.T) *os.File
	}{
		{"memfd", func(t *testing.T) *os.File { return memfdLedger(t, 0) }},
		{"regular file", func(t *testing.T) *os.File { return fileLedger(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.ledger(t)
			a := tp.attachLedger(t, "srv", f)
			if err := f.Truncate(0); err != nil {
				t.Fatal(err)
			}
			a.initialize()
			for i := range 3 {
				id := fmt.Sprintf(`"%d"`, i)
				var m msg
				if line := a.roundTrip(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`); json.Unmarshal([]byte(line), &m) != nil || string(m.ID) != id || m.Error != nil {
					t.Fatalf("want call %s's answer, got %s", id, line)
				}
			}
		})
	}
	tp.attach(t, "srv").initialize() // and the pool serves the next session
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
	// The slot is released once the answer's write returned, which may be
	// after the client read it.
	eventually(t, "the answered call to leave the ledger", func() bool { return len(ledger()) == 0 },
		func() string { return fmt.Sprintf("it still lists %+v", ledger()) })
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
	// Released once the answer's write returned, maybe after the client read it.
	eventually(t, "the answered retry to leave the ledger", func() bool { return !lists(ledger(), `"retry"`) })
}
