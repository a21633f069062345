package pool

import (
	"sync"
	"testing"
)

// A request a legacy HTTP session's GET stream has no room for is
// refused in a goroutine of its own, and the one that finds no room may
// be none of the pool's: a timer taking an unread question back to ask
// it of another session (httpSession.takeBack), an HTTP client's request
// that has the pool ask its roots. That goroutine must be started before
// Close waits, or not at all: added from none as Close waits, it is a
// misuse of the WaitGroup (the race detector reports it), and after, one
// Close does not wait for.
func TestHTTPStreamRefusalAcrossClose(t *testing.T) {
	for range 200 {
		p := New(nil)
		if err := p.Apply([]ServerConfig{{Name: "x", Command: "/bin/true"}}); err != nil {
			t.Fatal(err)
		}
		s, err := p.newSession("x", sessionSetup{transport: "http", sink: dropMessage})
		if err != nil {
			t.Fatal(err)
		}
		hs := &httpSession{s: s} // no room: limit 0
		var wg sync.WaitGroup
		wg.Go(func() { hs.toStream([]byte(`{"jsonrpc":"2.0","id":7,"method":"roots/list"}`), asking("roots/list", 7)) })
		wg.Go(func() { _ = p.Close() })
		wg.Wait()
	}
}
