//go:build unix

package pool_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestBackToBackAttachedSessionsAnswerEveryCall: sessions that follow one
// another on one child, each attached with its shim's ledger and making
// one call at a time, as the load tool's 1 × 1 runs do (a full benchmark
// once left one such call unanswered). A session ends either at once (its
// client exits: its pipes and its shim's connection close as soon as its
// last answer is read) or as the load tool ends it (its input closes, and
// its shim waits for the pool's Farewell); the next one dials at once,
// while the pool may still be ending the last. Every call must be
// answered, with its own id and text, within its deadline.
// Run with -count=300 it carried 1.8 million calls in 9,000 sessions.
func TestBackToBackAttachedSessionsAnswerEveryCall(t *testing.T) {
	for _, graceful := range []bool{false, true} {
		t.Run(map[bool]string{false: "client exits", true: "input closes"}[graceful], func(t *testing.T) {
			backToBack(t, graceful)
		})
	}
}

func backToBack(t *testing.T, graceful bool) {
	var recorded atomic.Int64 // the history is on by default: the pool emits every event
	tp := newTestPool(t, &pool.Options{Record: func(pool.Event) { recorded.Add(1) }}, fake("srv"))
	const sessions, calls = 30, 200
	for s := range sessions {
		file, _ := newLedger(t)
		a := tp.attachLedger(t, "srv", file)
		a.initialize()
		if _, err := a.in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= calls; i++ {
			id := strconv.Itoa(i)
			if i%2 == 1 {
				id = strconv.Quote(id) // string and numeric ids, as the load tool sends
			}
			text := fmt.Sprintf("s%d/%d", s, i)
			if err := a.outFile.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := a.in.WriteString(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + text + `"}}}` + "\n"); err != nil {
				t.Fatalf("session %d, call %s: %v", s, id, err)
			}
			line, err := a.out.ReadString('\n')
			if err != nil {
				t.Fatalf("session %d, call %s: no answer: %v", s, id, err)
			}
			var m msg
			if err := json.Unmarshal([]byte(line), &m); err != nil || string(m.ID) != id || m.Error != nil || !json.Valid(m.Result) {
				t.Fatalf("session %d, call %s: %q", s, id, line)
			}
			if m.raw = line; m.text() != text {
				t.Fatalf("session %d, call %s: got %q, want text %q", s, id, line, text)
			}
		}
		if graceful {
			a.in.Close()
			if end := a.farewell(10 * time.Second); end != pool.EndEOF {
				t.Fatalf("session %d: farewell %q, want %q", s, end, pool.EndEOF)
			}
		}
		a.close()
	}
	if recorded.Load() == 0 {
		t.Fatal("no event was recorded")
	}
}
