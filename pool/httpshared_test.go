package pool_test

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A legacy HTTP session is whole before its server can reach it: a
// request its server hands it the moment it joins (a question waiting
// for the GET stream, which arms the session's grace) finds it complete.
// Under -race, a session finished after it was shared is a data race
// here, or a nil session.
func TestHTTPSessionCompleteWhenShared(t *testing.T) {
	tp := newTestPool(t, &pool.Options{MaxHTTPSessions: 1000}, fake("srv"))
	h := tp.HTTPHandler()
	const sessions = 100
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
	opened := make(chan error, 1)
	go func() {
		for range sessions {
			if err := pool.OpenHTTPSession(h, "srv"); err != nil {
				opened <- err
				return
			}
		}
		opened <- nil
	}()
	seen := map[string]bool{}
	reached := 0
	deadline := time.Now().Add(30 * time.Second)
	for reached < sessions {
		select {
		case err := <-opened:
			if err != nil {
				t.Fatal(err)
			}
			opened = nil // all opened: reach the rest
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("reached %d of %d sessions", reached, sessions)
		}
		reached += pool.SinkToNewSessions(tp.Pool, "srv", line, seen)
	}
	if opened != nil {
		if err := <-opened; err != nil {
			t.Fatal(err)
		}
	}
}
