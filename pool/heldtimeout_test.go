package pool

import (
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A call held for its client's answer (MRTR) does not time out while the
// person answers: its timeout waits from the hold to the answer, then goes
// on with what was left, and the error still names the timeout it ran
// under. A hold nobody answers is due when holds are no longer kept
// (holdKeep), and says it was waiting. A second question of the same call
// waits again.
func TestHeldCallsTimeoutWaitsForTheAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		type expiry struct {
			at, timeout time.Duration
			held        bool
		}
		var mu sync.Mutex
		expired := map[uint64]expiry{}
		var tab *requestTable
		tab = newRequestTable(func(p *pending) {
			d, held := tab.timeoutOf(p)
			if _, won := tab.end(p); won {
				mu.Lock()
				expired[p.id] = expiry{time.Since(start), d, held}
				mu.Unlock()
			}
		})
		sess := &session{closed: make(chan struct{})}
		calls := map[uint64]*pending{}
		for id := range uint64(3) {
			calls[id] = &pending{id: id, sess: sess, received: time.Now()}
			if r, _, _ := tab.register(calls[id], 100, time.Second); r != registered {
				t.Fatalf("register %d: %v", id, r)
			}
		}
		hold := func(id uint64) *mrtrHold {
			x := &mrtrHold{p: calls[id], kept: make(chan struct{})}
			if _, _, _, ok := tab.hold(x); !ok {
				t.Fatalf("hold %d", id)
			}
			return x
		}

		time.Sleep(400 * time.Millisecond)
		answered, twice := hold(0), hold(1)
		hold(2)                     // never answered
		time.Sleep(5 * time.Minute) // a person reads the form
		tab.takeOver(answered, sess, []byte("r0"), nil, true, clientCaps{}, nil)
		tab.takeOver(twice, sess, []byte("r1"), nil, true, clientCaps{}, nil)
		time.Sleep(300 * time.Millisecond)
		again := hold(1) // its child asks again, 300 ms on
		time.Sleep(time.Minute)
		tab.takeOver(again, sess, []byte("r1b"), nil, true, clientCaps{}, nil)
		time.Sleep(time.Hour)
		synctest.Wait()

		want := map[uint64]expiry{
			0: {400*time.Millisecond + 5*time.Minute + 600*time.Millisecond, time.Second, false},
			1: {400*time.Millisecond + 5*time.Minute + time.Minute + 600*time.Millisecond, time.Second, false},
			2: {400*time.Millisecond + holdKeep, time.Second, true},
		}
		mu.Lock()
		defer mu.Unlock()
		if !maps.Equal(expired, want) {
			t.Errorf("expired %v, want %v", expired, want)
		}
		tab.stopTimer()
	})
}
