//go:build linux

package pool_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// A planned stop hands an attached session back while its client reads
// slowly: the write under way to its full pipe is cut short. Every
// request answered before the stop still gets exactly one answer, whole:
// this pool's, written out before the session goes back (the rest of a
// line the cut left is written first), or the next pool's error, for
// what the ledger still lists; the client reads no line broken, but the
// one the ledger says was cut (the next pool ends it). Before, the cut
// write lost what it had taken from the queue and the session's last
// flush wrote what was left right after the half-written line, then
// released every slot: the client read a corrupted line, and the
// answers it lost were owed nowhere (it waited for ever).
func TestHandBackCutWriteKeepsEveryAnswer(t *testing.T) {
	sizes := []int{100 << 10, 4 << 10, 16 << 10, 64 << 10, 1 << 10, 200 << 10}
	for _, tc := range []struct {
		name  string
		read  int           // bytes the client reads once the write is cut, before the session ends (-1: all)
		grace time.Duration // StopGrace
	}{
		{"reads once cut", -1, 10 * time.Second}, // this pool writes every answer
		{"reads part", 150 << 10, 500 * time.Millisecond},
		{"reads nothing", 0, 500 * time.Millisecond}, // the next pool answers them all
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			tp := newTestPool(t, &pool.Options{StopGrace: tc.grace, Record: rec.record}, fake("srv"))
			ledger, _ := newLedger(t)
			a := tp.attachLedger(t, "srv", ledger)
			a.initialize()

			// The client reads nothing for now: the first answer fills
			// its pipe, and the drain waits to write the rest of it; the
			// others queue behind.
			for i, size := range sizes {
				a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{"bytes":%d}}}`, i+1, size))
			}
			rec.waitDone(t, "big", len(sizes))

			stopped := closeInBackground(tp)
			// The session leaves the pool once the hand-back has cut its
			// write short.
			eventually(t, "the session to be handed back", func() bool { return len(tp.Snapshot().Sessions) == 0 })
			var first []byte
			switch {
			case tc.read < 0:
				first = readAll(t, a)
			case tc.read > 0:
				first = make([]byte, tc.read)
				if _, err := io.ReadFull(a.out, first); err != nil {
					t.Fatalf("the client read %d bytes: %v", len(first), err)
				}
			}
			bye := a.goodbye(10 * time.Second)
			<-stopped
			if bye.End != wire.EndPoolStopping {
				t.Fatalf("farewell %+v: not handed back", bye)
			}
			first = append(first, readAll(t, a)...)

			// The shim takes the ledger and resumes the session with the
			// next pool, as app/shim does.
			mem := ledgerBytes(t, ledger)
			lost, midLine := wire.ReadLedger(mem), wire.LedgerMidLineAt(mem)
			next := newTestPool(t, nil, fake("srv"))
			hello, _ := json.Marshal(pool.Hello{Server: "srv", Attach: true, Ledger: true,
				Resume: &wire.Resume{Run: "earlier", Session: "s1", PendingBytes: len(bye.Pending),
					Lost: lost, Ledger: true, MidLine: midLine}})
			nextLedger, _ := newLedger(t)
			b := next.attachHello(t, hello, []int{int(nextLedger.Fd())}, bye.Pending)
			b.in.Close() // the client is done: its session ends once it has its answers
			second := readAll(t, b)

			t.Logf("the client read %d bytes from the stopped pool, %d from the next; the ledger listed %d requests, midLine %v",
				len(first), len(second), len(lost), midLine)
			checkEachAnsweredOnce(t, first, second, midLine, sizes)
		})
	}
}

// readAll reads the client's output to its end.
func readAll(t *testing.T, a *attached) []byte {
	t.Helper()
	_ = a.outFile.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(a.out)
	if err != nil {
		t.Fatalf("the client's output did not end: %d bytes, %v", len(b), err)
	}
	return b
}

// checkEachAnsweredOnce checks what a client read from a stopped pool
// (first) and the next one (second): each call i+1 answered once, with
// a result of sizes[i] bytes or the error that the pool restarted, and
// every line whole, but for the end of first when the ledger says the
// stopped pool cut a line (midLine): the next pool ends it first.
func checkEachAnsweredOnce(t *testing.T, first, second []byte, midLine bool, sizes []int) {
	t.Helper()
	lines := bytes.SplitAfter(first, []byte("\n"))
	if cut := lines[len(lines)-1]; len(cut) > 0 {
		if !midLine {
			t.Errorf("the stopped pool's output ends inside a line (%q), and the ledger does not say so", tail(cut))
		}
	}
	lines = lines[:len(lines)-1]
	if midLine {
		if !bytes.HasPrefix(second, []byte("\n")) {
			t.Errorf("the ledger says the stopped pool cut a line, and the next pool did not end it first: %.100q", second)
		}
		second = bytes.TrimPrefix(second, []byte("\n"))
	}
	lines = append(lines, bytes.SplitAfter(second, []byte("\n"))...)
	seen := map[string]int{}
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		var m msg
		if err := json.Unmarshal(line, &m); err != nil {
			t.Errorf("line %d is not a whole message (%d bytes, ends %q): %v", i+1, len(line), tail(line), err)
			continue
		}
		if m.ID == nil || string(m.ID) == "0" {
			continue // the initialize's answer, or a notification
		}
		id := string(m.ID)
		seen[id]++
		var n int
		if _, err := fmt.Sscan(id, &n); err != nil || n < 1 || n > len(sizes) {
			t.Errorf("an answer to no call: %.200s", line)
			continue
		}
		switch {
		case m.Error != nil:
			if m.Error.Code != -32003 || !strings.Contains(m.Error.Message, "restarted") {
				t.Errorf("call %s: %.300s; want its result, or the error that the pool restarted", id, line)
			}
		case len(m.text()) != sizes[n-1]:
			t.Errorf("call %s: a result of %d bytes, want %d", id, len(m.text()), sizes[n-1])
		}
	}
	for i := range sizes {
		if id := fmt.Sprint(i + 1); seen[id] != 1 {
			t.Errorf("call %s was answered %d times, want once", id, seen[id])
		}
	}
}

// tail is the end of b, to show where a line was cut.
func tail(b []byte) []byte { return b[max(0, len(b)-40):] }
