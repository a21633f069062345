package pool

import (
	"sync"
	"time"
)

// HoldBridgedAskerForClose holds the asker of a 2026-07-28 child's
// input_required round once the round is shared, before it poses the
// questions, until its session's close has ended the session's rounds
// and questions; that close then waits for the asker to be done before
// it marks the session closed. shared is closed once the asker is held.
// restore is called after the pool closed.
func HoldBridgedAskerForClose() (shared <-chan struct{}, restore func()) {
	held, ended := make(chan struct{}), make(chan struct{})
	var x *inputRound // set before held is closed
	var asker, closer sync.Once
	testHookRoundShared = func(r *inputRound) {
		asker.Do(func() {
			x = r
			close(held)
			<-ended
		})
	}
	testHookClosing = func(s *session) {
		select {
		case <-held:
		default:
			return
		}
		if x.sess != s {
			return
		}
		closer.Do(func() {
			close(ended)
			// The asker holds sending until its questions are out, or it
			// posed none: taking it waits for that.
			x.sending.Lock()
			//lint:ignore SA2001 the critical section is the wait
			x.sending.Unlock()
		})
	}
	return held, func() { testHookRoundShared, testHookClosing = nil, nil }
}

// HoldPicked holds the asker of a legacy child's question once it
// picked the session to ask, before it records the question, until goOn
// is called. picked is closed once the asker is held. restore is called
// after the pool closed.
func HoldPicked() (picked <-chan struct{}, goOn, restore func()) {
	held, went := make(chan struct{}), make(chan struct{})
	var asker, goer sync.Once
	testHookPicked = func(*session) {
		asker.Do(func() {
			close(held)
			<-went
		})
	}
	goOn = func() { goer.Do(func() { close(went) }) }
	return held, goOn, func() { testHookPicked = nil }
}

// HoldClosing holds the first session close once it has ended the
// session's rounds and questions, before it marks the session closed,
// until goOn is called. closing is closed once the close is held.
// restore is called after the pool closed.
func HoldClosing() (closing <-chan struct{}, goOn, restore func()) {
	held, went := make(chan struct{}), make(chan struct{})
	var closer, goer sync.Once
	testHookClosing = func(*session) {
		closer.Do(func() {
			close(held)
			<-went
		})
	}
	goOn = func() { goer.Do(func() { close(went) }) }
	return held, goOn, func() { testHookClosing = nil }
}

// HoldPosingForClose holds the asker of a legacy child's first question
// once it has delivered the question to its client, before it notes it
// posed, until its session's close has voided the question and gone on:
// marked the session closed, or taken the question's withdrawal from its
// asker (the question is neither open nor left to the asker), or 10 s
// passed. restore is called after the pool closed.
func HoldPosingForClose() (restore func()) {
	var asker sync.Once
	testHookPosing = func(b *backend, id uint64, s *session) {
		asker.Do(func() {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !closeWentOn(b, id, s); {
				time.Sleep(time.Millisecond)
			}
		})
	}
	return func() { testHookPosing = nil }
}

// closeWentOn reports whether the close of s went on past the question
// id it voided as b's asker was posing it (HoldPosingForClose).
func closeWentOn(b *backend, id uint64, s *session) bool {
	if isClosed(s.closed) {
		return true
	}
	var taken bool
	b.reqs.update(func(in *inFlight) {
		_, open := in.reverse[id]
		_, left := in.unposed[id]
		taken = !open && !left
	})
	return taken
}
