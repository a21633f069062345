//go:build unix

package pool_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A server removed from the config lets the requests in flight finish,
// then ends its sessions: a client that reads slowly, whose answers were
// queued rather than written (its pipe full), still gets every one of
// them, whole, before its output ends and its shim hears the session
// ended. (The session's end dropped what was queued: the client read the
// part of the first answer its pipe held, then EOF.) A disabled server's
// session goes on: its answers come as the client reads, and its next
// request is refused.
func TestEndingServerWritesOutQueuedAnswers(t *testing.T) {
	for _, how := range []string{"removed", "disabled"} {
		t.Run(how, func(t *testing.T) {
			cfg := fake("srv")
			var rec recorder
			tp := newTestPool(t, &pool.Options{Record: rec.record}, cfg)
			a := tp.attach(t, "srv")
			a.initialize()

			// The client reads nothing more for now: the first answer
			// fills its pipe, the next ones queue behind it.
			want := map[string]int{} // id -> length of its text
			for i, size := range []int{256 << 10, 64 << 10, 64 << 10} {
				id := fmt.Sprint(i + 1)
				want[id] = size
				a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"big","arguments":{"bytes":%d}}}`, id, size))
			}
			rec.waitDone(t, "big", len(want))
			const slow = 3
			for i := range slow {
				id := fmt.Sprint(len(want) + 1)
				want[id] = len("slept 1500")
				a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":1500}}}`, id))
				eventually(t, fmt.Sprintf("slow call %d in flight", i+1), func() bool { return len(tp.Snapshot().InFlight) == i+1 })
			}

			var cfgs []pool.ServerConfig
			if how == "disabled" {
				cfg.Disabled = true
				cfgs = []pool.ServerConfig{cfg}
			}
			if err := tp.Apply(cfgs); err != nil {
				t.Fatal(err)
			}
			if n := len(tp.Snapshot().InFlight); n != slow {
				t.Fatalf("%d requests in flight once the server was %s, want the %d slow calls", n, how, slow)
			}

			if how == "removed" {
				// The session ends once its calls are answered: only then
				// does the client read again.
				eventually(t, "the session to end", func() bool { return len(tp.Snapshot().Sessions) == 0 })
				got := answers(t, a.rest(t))
				checkAnswers(t, got, want)
				if bye := a.goodbye(10 * time.Second); !strings.Contains(bye.End, "removed from the configuration") {
					t.Errorf("farewell %+v; want the session ended as its server was removed", bye)
				}
				return
			}
			eventually(t, "the slow calls to be answered", func() bool { return len(tp.Snapshot().InFlight) == 0 })
			got := map[string]msg{}
			for range want {
				m := a.next(t)
				got[string(m.ID)] = m
			}
			checkAnswers(t, got, want)
			a.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
			if m := a.next(t); string(m.ID) != "9" || m.Error == nil || !strings.Contains(m.Error.Message, "disabled") {
				t.Errorf("the next request: %s; want it refused, the server disabled", m.raw)
			}
		})
	}
}

// waitDone waits until n calls of tool have ended.
func (r *recorder) waitDone(t *testing.T, tool string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d %s calls to end", n, tool), func() bool {
		return len(r.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestDone && e.Name == tool })) == n
	})
}

// send writes one line to the attached client's input.
func (a *attached) send(line string) {
	a.t.Helper()
	if _, err := a.in.WriteString(line + "\n"); err != nil {
		a.t.Fatal(err)
	}
}

// answers parses what a client read, one message a line, by id.
func answers(t *testing.T, out string) map[string]msg {
	t.Helper()
	got := map[string]msg{}
	for line := range strings.Lines(out) {
		var m msg
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("the client read a line that is not a whole message (%d bytes): %v", len(line), err)
			continue
		}
		m.raw = strings.TrimSpace(line)
		got[string(m.ID)] = m
	}
	return got
}

// checkAnswers checks that got holds a result for each id of want, whose
// text has the length want says.
func checkAnswers(t *testing.T, got map[string]msg, want map[string]int) {
	t.Helper()
	for id, size := range want {
		m, ok := got[id]
		switch {
		case !ok:
			t.Errorf("no answer to call %s", id)
		case m.Error != nil || len(m.text()) != size:
			t.Errorf("call %s: %.200s; want a result of %d bytes", id, m.raw, size)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the client read %d answers, want %d", len(got), len(want))
	}
}

// The answers a removed server's session writes out at its end are
// bounded as every write to a client is: a client that reads nothing is
// let go once a write has waited EvictAfter for it, not given EvictAfter
// once more for them (its session would otherwise outlive the eviction
// rule, and a stop would wait for it). The write the client stopped
// taking began after the calls were sent: given EvictAfter once more, the
// session would end two EvictAfters after that at the soonest.
func TestRemovedServersSilentClientIsLetGo(t *testing.T) {
	const evictAfter = 3 * time.Second
	var rec recorder
	tp := newTestPool(t, &pool.Options{EvictAfter: evictAfter, Record: rec.record}, fake("srv"))
	a := tp.attach(t, "srv")
	a.initialize()
	// The first answer fills the client's pipe: the write of the rest
	// waits for a client that never reads again; the next answers queue.
	sent := time.Now()
	for i, size := range []int{256 << 10, 64 << 10, 64 << 10} {
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{"bytes":%d}}}`, i+1, size))
	}
	rec.waitDone(t, "big", 3)
	if err := tp.Apply(nil); err != nil {
		t.Fatal(err)
	}
	bye := a.goodbye(10 * evictAfter)
	if took := time.Since(sent); took >= 2*evictAfter {
		t.Errorf("the session ended %s after the calls were sent: given EvictAfter (%s) again after the write its client stopped taking", took, evictAfter)
	}
	if !strings.Contains(bye.End, "removed from the configuration") {
		t.Errorf("farewell %+v; want the session ended as its server was removed", bye)
	}
	a.rest(t) // its output ended
}

// A stop does not wait EvictAfter for a client that does not read the
// last answers of a session that ended before it (its server removed):
// those writes get StopGrace at most, as the stop's own sessions' do.
func TestStopCutsShortAnEndedSessionsLastWrites(t *testing.T) {
	const evictAfter = 5 * time.Minute
	var rec recorder
	tp := newTestPool(t, &pool.Options{EvictAfter: evictAfter, StopGrace: 100 * time.Millisecond, Record: rec.record}, fake("srv"))
	a := tp.attach(t, "srv")
	a.initialize()
	for i, size := range []int{256 << 10, 64 << 10, 64 << 10} {
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{"bytes":%d}}}`, i+1, size))
	}
	rec.waitDone(t, "big", 3)
	if err := tp.Apply(nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the session to end", func() bool { return len(tp.Snapshot().Sessions) == 0 })
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		tp.Close()
	}()
	select {
	case <-closed:
	case <-time.After(evictAfter / 10):
		t.Fatalf("the stop still waits, %s on, for a client that does not read an ended session's answers", evictAfter/10)
	}
}
