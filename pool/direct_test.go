package pool_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// Requests and answers are written by whichever goroutine has them when
// nothing is queued, with one write that never waits; what a pipe or
// socket does not take at once is finished by the writer goroutine before
// anything else. These lines are far larger than a pipe's buffer, so most
// are cut short: each must still arrive whole, in its own line, and answer
// the session that sent it.

// TestLargeRequestsCutShortArriveWhole: 8 sessions send 256 KiB requests
// at once to one child, whose stdin takes 64 KiB at a time, with smaller
// ones between them: the writer's batches mix lines it copies together
// with large ones it writes from where they lie.
func TestLargeRequestsCutShortArriveWhole(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	const sessions, calls = 8, 6
	sizes := [calls]int{256 << 10, 100, 20 << 10, 300, 256 << 10, 17 << 10}
	clients := make([]*client, sessions)
	for i := range clients {
		clients[i] = tp.dial(t, "srv")
		clients[i].initialize(fmt.Sprint("c", i), "")
		clients[i].patience = time.Minute
	}
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			for k := range calls {
				c.call(fmt.Sprint(k+1), "echo", fmt.Sprintf(`{"text":%q}`, text(i, k, sizes[k])))
			}
		})
	}
	wg.Wait()
	for i, c := range clients {
		// The child answers each call from its own goroutine: in any order.
		got := map[string]msg{}
		for len(got) < calls {
			m := c.recv()
			got[string(m.ID)] = m
		}
		for k := range calls {
			if got := got[fmt.Sprint(k+1)].text(); got != text(i, k, sizes[k]) {
				t.Errorf("session %d call %d: %d bytes back, not its own %d (%.40q)", i, k+1, len(got), sizes[k], got)
			}
		}
	}
}

// TestLargeAnswersCutShortArriveWhole: 8 sessions each ask for 1 MiB
// answers while small calls run between them; every line the clients read
// is whole JSON (the harness fails on any other) and the right size.
func TestLargeAnswersCutShortArriveWhole(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	const sessions, size = 8, 1 << 20
	clients := make([]*client, sessions)
	for i := range clients {
		clients[i] = tp.dial(t, "srv")
		clients[i].initialize(fmt.Sprint("c", i), "")
		clients[i].patience = time.Minute
	}
	for i, c := range clients {
		for k := range 3 {
			c.call(fmt.Sprintf(`"big%d"`, k), "big", fmt.Sprintf(`{"bytes":%d}`, size))
			c.call(fmt.Sprintf(`"small%d"`, k), "echo", fmt.Sprintf(`{"text":"s%d-%d"}`, i, k))
		}
	}
	for i, c := range clients {
		got := map[string]msg{}
		for len(got) < 6 {
			m := c.recv()
			got[string(m.ID)] = m
		}
		for k := range 3 {
			if m := got[fmt.Sprintf(`"big%d"`, k)]; len(m.text()) != size {
				t.Errorf("session %d big %d: %d bytes", i, k, len(m.text()))
			}
			if m := got[fmt.Sprintf(`"small%d"`, k)]; m.text() != fmt.Sprintf("s%d-%d", i, k) {
				t.Errorf("session %d small %d: %.200s", i, k, m.raw)
			}
		}
	}
}

// text is session i's k-th request text: n bytes no other request has.
func text(i, k, n int) string {
	head := fmt.Sprintf("s%d-k%d-", i, k)
	return head + strings.Repeat(string(rune('a'+(i+k)%26)), n-len(head))
}

// TestLargeAnswerAfterAQuietSpellIsNotEvicted: a client that has read
// everything, then waits longer than EvictAfter for an answer larger than
// the writer's buffer, gets it (the write deadline is the answer's own,
// not one left over from the last write).
func TestLargeAnswerAfterAQuietSpellIsNotEvicted(t *testing.T) {
	const evictAfter = 300 * time.Millisecond
	tp := newTestPool(t, &pool.Options{EvictAfter: evictAfter}, fake("srv"))
	c := tp.dial(t, "srv")
	c.initialize("quiet", "")
	big := text(0, 0, 256<<10)
	c.call("1", "sleep_echo", fmt.Sprintf(`{"ms":%d,"text":%q}`, 3*evictAfter/time.Millisecond, big))
	if m, _ := c.recvID("1"); m.text() != big {
		t.Fatalf("answer: %d bytes, %.200s", len(m.text()), m.raw)
	}
	if n := tp.Snapshot().Counters.Evicted; n != 0 {
		t.Fatalf("%d sessions evicted", n)
	}
}
