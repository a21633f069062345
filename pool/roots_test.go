package pool

import (
	"testing"
)

// The held messages go on before anything the client sends while they
// are handled, whoever ends the roots ask: a cancel the reader reads as
// the ask's timer replays the held request it cancels must not overtake
// it (the request would run, uncancelled). The test holds the server's
// lock, which the replay takes first (to move the session), so that the
// cancel arrives between the end of the ask and the replay.
func TestHeldMessagesAreNotOvertaken(t *testing.T) {
	r := newEndingRig(t)
	s := r.s
	s.mu.Lock()
	s.rootsAsk = `"ask"`
	s.mu.Unlock()
	s.handle([]byte(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"t"}}`))

	s.srv.mu.Lock()
	replayed := make(chan struct{})
	go func() {
		defer close(replayed)
		s.rootsAnswered(`"ask"`, nil, nil) // as the ask's timer does
	}()
	waitUntil(t, "the ask ended", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.rootsAsk == ""
	})
	s.handle([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`))
	s.srv.mu.Unlock()
	<-replayed

	s.mu.Lock()
	_, running := s.inflight[`"a"`]
	s.mu.Unlock()
	if running {
		t.Error("the cancel overtook the request it cancels: the request is in flight")
	}
}
