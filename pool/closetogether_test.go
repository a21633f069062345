package pool_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestHTTPSessionsEndTogether: when the token is rotated, or legacy HTTP
// sessions have gone idle, the sessions that end stop their own children
// (share "session") all at once, not one after another. Each child here
// ignores both its stdin closing and SIGTERM, so its stop takes the
// stop's graces (seconds). On the first edition the rotation and the
// expiry closed one session after the other: each child began to stop
// only once the one before had exited, and 64 sessions took minutes to
// end. Now every child has begun to stop before the first has exited.
func TestHTTPSessionsEndTogether(t *testing.T) {
	const sessions = 3
	stubborn := func() pool.ServerConfig {
		own := fake("own", "-exit-on-stdin-eof=false", "-ignore-sigterm")
		own.Share = pool.ShareSession
		return own
	}
	cases := []struct {
		name string
		end  func(h http.Handler, rotate func())
	}{
		{"token rotated", func(_ http.Handler, rotate func()) { rotate() }},
		{"idle", func(h http.Handler, _ func()) {
			pool.ExpireHTTPIdle(h, time.Now().Add(pool.HTTPSessionIdle+time.Minute))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var token atomic.Pointer[string]
			old, fresh := "old-token", "new-token"
			token.Store(&old)
			var rec recorder
			tp := newTestPool(t, &pool.Options{HTTPToken: func() string { return *token.Load() }, Record: rec.record}, stubborn())
			h := tp.HTTPHandler()
			base := newHTTPFrontOf(t, h)
			auth := []string{"Authorization", "Bearer " + old}
			for i := range sessions {
				c := &httpClient{t: t, url: base + "/mcp/own"}
				initWith(c, fmt.Sprintf("c%d", i), auth)
				c.callWith(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, auth) // starts its own child
			}
			pids := map[int]bool{}
			eventually(t, "every session's own child running", func() bool {
				clear(pids)
				for _, b := range tp.Snapshot().Backends {
					if b.PID != 0 {
						pids[b.PID] = true
					}
				}
				return len(pids) == sessions
			})
			later := time.Now().Add(pool.HTTPSessionIdle + time.Minute)
			eventually(t, "every session's last POST done", func() bool { return pool.HTTPSessionsIdleAt(h, later) == sessions })
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				c.end(h, func() { token.Store(&fresh); tp.HTTPTokenRotated() })
			}()
			select {
			case <-ended:
			case <-time.After(time.Minute):
				t.Fatal("the sessions did not end within a minute")
			}
			var firstExit time.Time
			for pid := range pids {
				e := rec.waitFor(t, fmt.Sprintf("child %d to exit", pid), func(e pool.Event) bool {
					return e.Kind == pool.EventBackendExited && e.PID == pid
				})
				if firstExit.IsZero() || e.Time.Before(firstExit) {
					firstExit = e.Time
				}
			}
			for pid := range pids {
				stopping := rec.find(func(e pool.Event) bool {
					return e.Kind == pool.EventBackendState && e.State == pool.StateStopping && e.PID == pid
				})
				if len(stopping) == 0 {
					t.Fatalf("child %d exited without stopping", pid)
				}
				if stopping[0].Time.After(firstExit) {
					t.Errorf("child %d began to stop only after another had exited: the sessions ended one after another", pid)
				}
			}
			r := (&httpClient{t: t, url: base + "/mcp/own"}).post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Authorization", "Bearer "+*token.Load())
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				t.Fatalf("a request with no session after they ended: %s", r.Status)
			}
		})
	}
}
