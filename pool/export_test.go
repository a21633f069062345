package pool

import (
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ExpireHTTPIdle runs the HTTP front door's expiry as if the time were
// now, for tests that cannot wait a minute.
func ExpireHTTPIdle(h http.Handler, now time.Time) { h.(*httpFront).expireIdle(now) }

// StatelessLastUsed is when server name's stateless session's last
// exchange ended (zero: it has none).
func StatelessLastUsed(h http.Handler, name string) time.Time {
	f := h.(*httpFront)
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.stateless[name]; st != nil {
		return st.lastUsed
	}
	return time.Time{}
}

// HTTPStatelessExchanges is how many exchanges server name's stateless
// session has under way (its POSTs' handlers count until they return).
func HTTPStatelessExchanges(h http.Handler, name string) int {
	f := h.(*httpFront)
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.stateless[name]; st != nil {
		return st.exchanges
	}
	return 0
}

// IdleSince is when server name's shared child (of the partition of no
// roots) was last left by its last session, as its idle reaping counts.
func IdleSince(p *Pool, name string) time.Time {
	srv, err := p.server(name)
	if err != nil {
		panic(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, pt := range srv.parts {
		if pt.current.Load() != nil {
			return pt.idleSince
		}
	}
	return time.Time{}
}

// HTTPSessionsIdleAt counts the legacy HTTP sessions the expiry would end
// at now: a POST's handler counts until it has returned, a little after
// its client has read the answer.
func HTTPSessionsIdleAt(h http.Handler, now time.Time) int {
	f := h.(*httpFront)
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, hs := range f.sessions {
		if hs.idleAt(now, HTTPSessionIdle) {
			n++
		}
	}
	return n
}

// SetStreamWriteTimeout sets how long an HTTP client has to take a write
// of its GET stream or of a POST's response, until the returned restore
// is called (after the pool closed).
func SetStreamWriteTimeout(d time.Duration) (restore func()) {
	old := streamWriteTimeout
	streamWriteTimeout = d
	return func() { streamWriteTimeout = old }
}

// SetHoldKeep sets how long a call held for a 2026-07-28 client's retry
// waits for it, until the returned restore is called (after the pool
// closed).
func SetHoldKeep(d time.Duration) (restore func()) {
	old := holdKeep
	holdKeep = d
	return func() { holdKeep = old }
}

// HTTPStreamWaiting is how many messages wait for legacy HTTP session
// sid's GET stream to write them.
func HTTPStreamWaiting(h http.Handler, sid string) int {
	hs := httpSessionOf(h, sid)
	if hs == nil {
		return 0
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.waiting)
}

// CloseAskedSessions makes the pool close the session it picks to ask a
// child's question, after the pick and before the question is recorded,
// the first n times, until restore is called (after the pool closed).
// closed gets each closed session's client name.
func CloseAskedSessions(n int) (closed <-chan string, restore func()) {
	names := make(chan string, n)
	left := n // only the backends' readers call the hook, one at a time in a test with one child
	testHookPicked = func(s *session) {
		if left == 0 {
			return
		}
		left--
		s.mu.Lock()
		name := s.clientName
		s.mu.Unlock()
		s.close(errors.New("closed as it was picked to be asked"))
		names <- name
	}
	return names, func() { testHookPicked = nil }
}

// CloseCarryingSessions makes the pool close a session as it carries its
// subscriptions to another child (of its new roots, or one started after
// a stop), before they are counted there, until restore is called (after
// the pool closed).
func CloseCarryingSessions() (restore func()) {
	testHookCarrying = func(s *session) { s.close(errors.New("closed as its stakes were carried")) }
	return func() { testHookCarrying = nil }
}

// SetRootsAskTimeout sets how long a session's messages wait for its
// answer to roots/list, until restore is called (after the pool closed).
func SetRootsAskTimeout(d time.Duration) (restore func()) {
	old := rootsAskTimeout
	rootsAskTimeout = d
	return func() { rootsAskTimeout = old }
}

// pauseOnce sets *hook to stop the goroutine that runs it, the first time
// only, until resume is called; paused is closed when it stops. restore
// unsets *hook (after the pool closed).
func pauseOnce(hook *func(*session)) (paused <-chan struct{}, resume, restore func()) {
	stopped, resumed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	*hook = func(*session) {
		once.Do(func() {
			close(stopped)
			<-resumed
		})
	}
	return stopped, sync.OnceFunc(func() { close(resumed) }), func() { *hook = nil }
}

// PauseAfterReplayed makes the pool stop after the first message it
// replays of those a session's roots answer held, until resume is called;
// paused is closed when it stops. Until restore is called (after the pool
// closed).
func PauseAfterReplayed() (paused <-chan struct{}, resume, restore func()) {
	return pauseOnce(&testHookReplayed)
}

// PauseReplaying makes the pool stop a roots replay after it took its
// first held message from the queue and before it handles it, until
// resume is called; taken is closed when it stops. Until restore is
// called (after the pool closed).
func PauseReplaying() (taken <-chan struct{}, resume, restore func()) {
	return pauseOnce(&testHookReplaying)
}

// PauseHolding makes the pool stop a session's reader once the first
// request it held for its roots is in the queue, listed in flight,
// until resume is called; held is closed when it stops. Until restore
// is called (after the pool closed).
func PauseHolding() (held <-chan struct{}, resume, restore func()) {
	return pauseOnce(&testHookHeld)
}

// SetCarryingHook runs hook with the client name of each session whose
// stakes moveStakes is moving, between their record and their count at
// the new child; until restore is called (after the pool closed).
func SetCarryingHook(hook func(clientName string)) (restore func()) {
	testHookCarrying = func(s *session) {
		s.mu.Lock()
		name := s.clientName
		s.mu.Unlock()
		hook(name)
	}
	return func() { testHookCarrying = nil }
}

// PauseReplayUntilHandBackWaits makes the pool stop a roots replay after
// it took its first held message and before it handles it, until a
// hand-back waits for the session to be idle (waitIdle) or the session
// closes; taken is closed when it stops. Until restore is called (after
// the pool closed).
func PauseReplayUntilHandBackWaits() (taken <-chan struct{}, restore func()) {
	stopped, waiting := make(chan struct{}), make(chan struct{})
	var once sync.Once
	testHookReplaying = func(s *session) {
		once.Do(func() {
			close(stopped)
			select {
			case <-waiting:
			case <-s.closed:
			}
		})
	}
	waited := sync.OnceFunc(func() { close(waiting) })
	testHookWaitingIdle = func(*session) { waited() }
	return stopped, func() { testHookReplaying, testHookWaitingIdle = nil, nil }
}

// HelloLimit is the longest hello line p takes.
func (p *Pool) HelloLimit() int { return p.helloLimit() }

// BridgedQuestions is how many of 2026-07-28 children's questions the
// pool has put to legacy clients and still waits to hear answered.
func BridgedQuestions(p *Pool) int {
	p.rounds.mu.Lock()
	defer p.rounds.mu.Unlock()
	return len(p.rounds.m)
}

// EndRoundAsAnswered makes the pool end the round of the question arm
// names, as its timer would, as an answer to that question is read, once
// the pool has looked the round up, until restore is called (after the
// pool closed). Call it before the pool is made.
func EndRoundAsAnswered() (arm func(p *Pool, id uint64), restore func()) {
	var armed atomic.Pointer[inputRound]
	var armedID atomic.Uint64
	testHookRoundLookedUp = func(id uint64) {
		if x := armed.Load(); x != nil && id == armedID.Load() {
			x.end(newError(errQuestionsUnanswered, true, x.b.srv.name, x.b.srv.name, holdKeep))
		}
	}
	arm = func(p *Pool, id uint64) {
		p.rounds.mu.Lock()
		x := p.rounds.m[id]
		p.rounds.mu.Unlock()
		armedID.Store(id)
		armed.Store(x)
	}
	return arm, func() { testHookRoundLookedUp = nil }
}

// PauseFirstAnswerLookup makes the pool's reader of the first answer to
// the question arm names wait, once the pool has looked the question's
// round up, until release is called; looked is closed as it starts
// waiting. Until restore is called (after the pool closed; release
// before). Call it before the pool is made.
func PauseFirstAnswerLookup() (arm func(id uint64), looked <-chan struct{}, release, restore func()) {
	var armedID atomic.Uint64
	var fired atomic.Bool
	lookedC, released := make(chan struct{}), make(chan struct{})
	testHookRoundLookedUp = func(id uint64) {
		if id == armedID.Load() && fired.CompareAndSwap(false, true) {
			close(lookedC)
			<-released
		}
	}
	return armedID.Store, lookedC, sync.OnceFunc(func() { close(released) }), func() { testHookRoundLookedUp = nil }
}

// HoldStderrReaders makes each child's stderr reader start reading only
// once the child has exited, as a reader the scheduler runs late does,
// until restore is called (after the pool closed).
func HoldStderrReaders() (restore func()) {
	testHookStderrReader = func(c *child) { <-c.exited }
	return func() { testHookStderrReader = nil }
}

// HTTPPostsHeld is the bytes legacy HTTP session sid's POST responses
// hold unread together (its heldBudget's count).
func HTTPPostsHeld(h http.Handler, sid string) int {
	hs := httpSessionOf(h, sid)
	if hs == nil {
		return 0
	}
	return hs.held.held()
}

// OnReplaying runs f each time a roots replay takes a held message, before
// it handles it, until restore is called (after the pool closed).
func OnReplaying(f func()) (restore func()) {
	testHookReplaying = func(*session) { f() }
	return func() { testHookReplaying = nil }
}

// httpSessionOf is the front door h's legacy HTTP session sid, or nil.
func httpSessionOf(h http.Handler, sid string) *httpSession {
	f := h.(*httpFront)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions[sid]
}

// AllStacks is every goroutine's stack (goroutineStacks).
func AllStacks() string { return goroutineStacks() }

// LetTheWaitsReaderEndIt sets up the race in which a server's removal
// (retire) and a request waiting for its child's handshake end that wait
// at once: retire lets the wait's own reader claim its end first (it
// waits up to 2 s for that), and the reader, once it has, holds its
// answer until its session closes or a second passes. readerFirst
// reports whether the reader claimed it. Call restore after the pool
// closed.
func LetTheWaitsReaderEndIt() (readerFirst func() bool, restore func()) {
	var first, retiring atomic.Bool
	testHookRetired = func(b *backend) {
		retiring.Store(true)
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if !slices.ContainsFunc(b.reqs.all(), func(p *pending) bool { return p.wait }) {
				first.Store(true)
				return
			}
		}
	}
	testHookWaitClaimed = func(s *session) {
		if !retiring.Load() {
			return
		}
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-s.closed:
		case <-t.C:
		}
	}
	return first.Load, func() { testHookRetired, testHookWaitClaimed = nil, nil }
}
