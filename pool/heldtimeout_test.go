package pool

import (
	"fmt"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// expiry is how a request in a table from expiringTable ended: when
// (since start), under which timeout, and whether it was held.
type expiry struct {
	at, timeout time.Duration
	held        bool
}

// expiringTable is a request table that ends each request as it expires
// and records the expiry; expired returns a copy of those recorded.
func expiringTable(start time.Time) (tab *requestTable, expired func() map[uint64]expiry) {
	var mu sync.Mutex
	got := map[uint64]expiry{}
	tab = newRequestTable(func(p *pending) {
		d, held := tab.timeoutOf(p)
		if _, won := tab.end(p); won {
			mu.Lock()
			got[p.id] = expiry{time.Since(start), d, held}
			mu.Unlock()
		}
	})
	return tab, func() map[uint64]expiry {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(got)
	}
}

// A call held for its client's answer (MRTR) does not time out while the
// person answers: its timeout waits from the hold to the answer, then goes
// on with what was left, and the error still names the timeout it ran
// under. A hold nobody answers is due when holds are no longer kept
// (holdKeep), and says it was waiting. A second question of the same call
// waits again.
func TestHeldCallsTimeoutWaitsForTheAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		tab, expired := expiringTable(start)
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
		if got := expired(); !maps.Equal(got, want) {
			t.Errorf("expired %v, want %v", got, want)
		}
		tab.stopTimer()
	})
}

// A legacy client's question that a person answers (an elicitation, a
// sampling) pauses the timeouts of the asked session's calls written to
// the child, which it may be for, the same way: from the question to its
// answer, or its withdrawal by the child, or the session's leaving, or
// the child's death; calls with questions overlapping wait until the
// last ends. A call not yet written, another session's call, and a
// question no person answers pause nothing. A question nobody answers is
// waited for as long as a held call is kept.
func TestLegacyQuestionsPauseTheAskedSessionsCalls(t *testing.T) {
	// table is a request table whose expiries are recorded, with a call
	// registered per session (timeout 1 s), written unless queued.
	table := func(t *testing.T, start time.Time, sessions []*session, queued map[int]bool) (*requestTable, func() map[uint64]expiry) {
		tab, expired := expiringTable(start)
		for i, s := range sessions {
			p := &pending{id: uint64(i), sess: s, received: time.Now()}
			if r, _, _ := tab.register(p, 100, time.Second); r != registered {
				t.Fatalf("register %d: %v", i, r)
			}
			if !queued[i] {
				tab.update(func(in *inFlight) {
					in.startWriteLocked(p, 1)
					in.wroteLocked(p, time.Now(), 1)
				})
			}
		}
		return tab, expired
	}
	newSession := func() *session { return &session{closed: make(chan struct{})} }

	t.Run("answered, withdrawn, left, unanswered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			a, b, c, d := newSession(), newSession(), newSession(), newSession()
			tab, expired := table(t, start, []*session{a, a, b, c, d}, map[int]bool{1: true})
			ask := func(id uint64, s *session, wait bool) {
				if tab.addQuestion(id, []byte(fmt.Sprint(id)), s, "", wait, "") == nil {
					t.Fatalf("question %d not recorded", id)
				}
			}

			time.Sleep(400 * time.Millisecond)
			ask(100, a, true)  // pauses call 0, not 1, queued
			ask(101, b, false) // no person answers it: call 2 goes on
			ask(102, c, true)  // call 3
			ask(103, d, true)  // call 4, never answered
			time.Sleep(time.Minute)
			ask(104, a, true) // call 0 again, with the first still open
			time.Sleep(time.Minute)
			if _, ok := tab.takeAnswer(100, a); !ok {
				t.Fatal("the answer to 100 found no question")
			}
			tab.dropQuestionsOf(c) // call 3 goes on
			time.Sleep(time.Minute)
			if id, _ := tab.withdrawQuestion([]byte("104")); id != 104 {
				t.Fatalf("withdrew %d, want 104", id)
			}
			time.Sleep(time.Hour)
			synctest.Wait()

			want := map[uint64]expiry{
				0: {time.Second + 3*time.Minute, time.Second, false},
				1: {time.Second, time.Second, false},
				2: {time.Second, time.Second, false},
				3: {time.Second + 2*time.Minute, time.Second, false},
				4: {400*time.Millisecond + holdKeep, time.Second, true},
			}
			if got := expired(); !maps.Equal(got, want) {
				t.Errorf("expired %v, want %v", got, want)
			}
			tab.stopTimer()
		})
	})

	// The child's death voids its questions: the calls it re-queues, and
	// those it fails, have their timeouts go on.
	t.Run("child died", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			a := newSession()
			tab, expired := table(t, start, []*session{a, a}, nil)
			time.Sleep(400 * time.Millisecond)
			tab.addQuestion(100, []byte("100"), a, "", true, "")
			time.Sleep(time.Minute)
			tab.afterExit(func(p *pending) bool { return p.id == 0 }, "exited")
			time.Sleep(time.Hour)
			synctest.Wait()
			want := map[uint64]expiry{
				0: {time.Second + time.Minute, time.Second, false},
				1: {time.Second + time.Minute, time.Second, false},
			}
			if got := expired(); !maps.Equal(got, want) {
				t.Errorf("expired %v, want %v", got, want)
			}
			tab.stopTimer()
		})
	})
}

// A pause never brings a deadline forward. A call whose own timeout ends
// later than the pause's bound (a requestTimeout of 30 minutes, holdKeep
// 10) keeps its own deadline while paused, and ends there with its own
// timeout's error, not the bound's "did not answer": a question that waits
// for a person gives its calls more time, never less. The sweep, armed
// for another request's later deadline, is not overtaken: on the first
// edition the pause moved such a call's deadline to the bound without
// re-arming the sweep, and the call was cut at whatever sweep came next
// (here at 30 minutes, saying the client did not answer), though its own
// timeout ran 5 minutes more. A call of the same session whose timeout
// ends before the bound still waits until the bound, and says so.
func TestPauseNeverBringsADeadlineForward(t *testing.T) {
	const long = 30 * time.Minute
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		tab, expired := expiringTable(start)
		newSession := func() *session { return &session{closed: make(chan struct{})} }
		calls := map[uint64]*pending{}
		call := func(id uint64, s *session, timeout time.Duration) {
			calls[id] = &pending{id: id, sess: s, received: time.Now()}
			if r, _, _ := tab.register(calls[id], 100, timeout); r != registered {
				t.Fatalf("register %d: %v", id, r)
			}
			tab.update(func(in *inFlight) {
				in.startWriteLocked(calls[id], 1)
				in.wroteLocked(calls[id], time.Now(), 1)
			})
		}
		asked, answered, held, other := newSession(), newSession(), newSession(), newSession()

		call(0, other, long) // the sweep is armed for 30 minutes
		tab.end(calls[0])
		time.Sleep(5 * time.Minute)
		call(1, asked, long)        // due at 35 minutes
		call(2, asked, time.Minute) // due at 6 minutes
		call(3, answered, long)     // due at 35 minutes
		call(4, held, long)         // due at 35 minutes
		time.Sleep(30 * time.Second)
		tab.addQuestion(100, []byte("100"), asked, "", true, "") // pauses 1 and 2, never answered
		tab.addQuestion(101, []byte("101"), answered, "", true, "")
		if _, _, _, ok := tab.hold(&mrtrHold{p: calls[4], kept: make(chan struct{})}); !ok { // never answered
			t.Fatal("hold 4")
		}
		time.Sleep(14*time.Minute + 30*time.Second) // 20 minutes in
		if _, ok := tab.takeAnswer(101, answered); !ok {
			t.Fatal("the answer to 101 found no question")
		}
		time.Sleep(time.Hour)
		synctest.Wait()

		want := map[uint64]expiry{
			1: {5*time.Minute + long, long, false},
			2: {5*time.Minute + 30*time.Second + holdKeep, time.Minute, true},
			3: {5*time.Minute + long + 14*time.Minute + 30*time.Second, long, false},
			4: {5*time.Minute + long, long, false},
		}
		if got := expired(); !maps.Equal(got, want) {
			t.Errorf("expired %v, want %v", got, want)
		}
		tab.stopTimer()
	})
}
