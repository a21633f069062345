package pool_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// TestResumeLostIsBounded: a resume lists the requests its session was
// owed, at most what a session can owe (its requests in flight, and what
// a ledger lists). The hello's length bounds its bytes only, and short
// entries are many: on the first edition a hello of 97 MiB of them cost
// the pool 1.35 GB and 25 CPU-seconds, per connection. One that lists
// more is refused with the reason, before its entries are all decoded,
// so that refusing it costs little more than reading its line.
func TestResumeLostIsBounded(t *testing.T) {
	answered, restore := pool.CountLostAnswers()
	t.Cleanup(restore) // after the pool closed
	tp := newTestPool(t, &pool.Options{MaxSessionInFlight: 100}, fake("a"))
	if want := 100 + wire.LedgerSlots; tp.MaxLost() != want {
		t.Errorf("MaxLost = %d, want %d", tp.MaxLost(), want)
	}

	t.Run("one past the bound", func(t *testing.T) {
		resume := wire.Resume{Session: "s1", Counted: true}
		for i := range tp.MaxLost() + 1 {
			resume.Lost = append(resume.Lost, wire.Lost{ID: fmt.Sprint(i), Written: true})
		}
		hello, _ := json.Marshal(wire.Hello{Server: "a", Resumable: true, Resume: &resume})
		_, br := helloConn(t, tp, hello)
		if w := welcome(t, br); !strings.Contains(w.Error, "lost requests") || w.Session != "" || w.Stopping {
			t.Fatalf("welcome: %+v, want a refusal that says the resume lists too many lost requests", w)
		}
	})

	t.Run("4 MiB of short entries", func(t *testing.T) {
		hello := []byte(`{"server":"a","resumable":true,"resume":{"session":"s2","counted":true,"lost":[`)
		for i := 0; len(hello) < 4<<20; i++ {
			if i > 0 {
				hello = append(hello, ',')
			}
			hello = append(strconv.AppendInt(append(hello, `{"id":"`...), int64(i), 10), `"}`...)
		}
		hello = append(hello, "]}}"...)
		t0 := time.Now()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, br := helloConn(t, tp, hello)
		w := welcome(t, br)
		runtime.ReadMemStats(&after)
		t.Logf("refused in %v", time.Since(t0))
		if !strings.Contains(w.Error, "lost requests") || w.Session != "" {
			t.Errorf("welcome: %+v, want a refusal that says the resume lists too many lost requests", w)
		}
		// Sending and reading the line allocate about five times its
		// length (the pool's buffer grows as it comes); decoding every
		// entry as well, over sixteen times.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*uint64(len(hello)) {
			t.Errorf("refusing a hello of %d MiB allocated %d MiB", len(hello)>>20, alloc>>20)
		}
	})

	select {
	case n := <-answered:
		t.Fatalf("a refused resume answered %d lost requests", n)
	default:
	}
	c := tp.dial(t, "a")
	c.initialize("after", "")
	c.call("1", "echo", `{"text":"still"}`)
	if m, _ := c.recvID("1"); m.text() != "still" {
		t.Fatalf("a session after the refusals: %.200s", m.raw)
	}
}

// TestAnswerLostStopsWithItsSession: a resumed session answers what its
// earlier pool owed before it reads its client; a client that does not
// read those answers fills its queue and is evicted. On the first edition
// the pool went on building and delivering an answer for every entry
// left, for a session already gone.
func TestAnswerLostStopsWithItsSession(t *testing.T) {
	answered, restore := pool.CountLostAnswers()
	t.Cleanup(restore) // after the pool closed
	tp := newTestPool(t, &pool.Options{SessionQueue: 16}, fake("a"))
	const owed = 8000
	resume := wire.Resume{Session: "s1", Counted: true}
	for i := range owed {
		resume.Lost = append(resume.Lost, wire.Lost{ID: fmt.Sprint(i), Written: true})
	}
	hello, _ := json.Marshal(wire.Hello{Server: "a", Resumable: true, Resume: &resume})
	_, br := helloConn(t, tp, hello)
	if w := welcome(t, br); w.Error != "" || w.Session == "" {
		t.Fatalf("welcome: %+v", w)
	}
	// The client reads nothing more: its queue fills, and it is evicted.
	select {
	case n := <-answered:
		t.Logf("%d of %d answered", n, owed)
		if n >= owed/2 {
			t.Errorf("a session evicted as its queue filled was delivered %d of its %d lost answers", n, owed)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the lost requests' answering did not end")
	}
}
