package pool_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// The HTTP front door is made from outside the pool's goroutines (the
// app, at start), and may be made as the pool closes (a start that
// fails after the pool was made closes it): the goroutine it starts to
// expire idle sessions must be started before Close waits, or not at
// all. Added from none as Close waits, it is a misuse of the WaitGroup
// (the race detector reports it; "WaitGroup is reused before previous
// Wait has returned" panics), and after, one Close does not wait for.
func TestHTTPHandlerAcrossClose(t *testing.T) {
	for range 200 {
		p := pool.New(nil) // no servers, no sessions: nothing else counted
		var wg sync.WaitGroup
		wg.Go(func() { _ = p.HTTPHandler() })
		wg.Go(func() { _ = p.Close() })
		wg.Wait()
		_ = p.Close()
	}
}

// An HTTP request is served on net/http's goroutine, none of the pool's,
// and the front door outlives the pool (the app closes the pool first):
// a request under way as the pool closes must be done with the pool
// before Close returns, for what it starts (here a 2026-07-28 listen's
// acknowledgement, which waits for a legacy child's subscribe) would
// otherwise be a goroutine started after Close waited. The listen hook
// holds the request in the pool, between the listen's registration and
// the start of that goroutine, until Close has returned or waits for it.
func TestHTTPRequestAcrossClose(t *testing.T) {
	registered, proceed := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(proceed) })
	t.Cleanup(pool.SetListenHook(func(id string) {
		if id == `"L"` {
			close(registered)
			<-proceed
		}
	}))
	t.Cleanup(release) // before the front door closes, if the test ends early
	tp := newTestPool(t, nil, fake("srv", "-subscribe-delay", "5s"))
	url := newHTTPFront(t, tp) + "/mcp/srv"

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["fake://counter"]},` + modernMeta + `}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	mirrorModernHeaders(req.Header, body)
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	defer func() { cancel(); <-posted }()
	select {
	case <-registered:
	case <-time.After(15 * time.Second):
		t.Fatal("the listen did not reach its acknowledgement")
	}

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = tp.Close()
	}()
	eventually(t, "Close to return, or to wait for the pool's goroutines", func() bool {
		return isClosed(closed) || goroutineIn("pool.(*Pool).waitGoroutines")
	})
	early := isClosed(closed)
	release()
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not return once the request went on")
	}
	if early {
		t.Fatal("Close returned while an HTTP request was still in the pool, about to start a goroutine")
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// goroutineIn reports whether a goroutine runs fn (a function's name as
// stack traces give it) just now.
func goroutineIn(fn string) bool { return strings.Contains(pool.AllStacks(), fn+"(") }

// HTTP clients hammer the front door while the pool closes, and after:
// calls, listens and legacy sessions opened and deleted. Every goroutine
// their requests start is started before Close waits, or none is (the
// race detector reports a WaitGroup added to from none as it is waited
// on), and none of the pool's runs once Close returned.
func TestHTTPRequestsHammerAcrossClose(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	url := newHTTPFront(t, tp) + "/mcp/srv"
	post := func(ctx context.Context, body, sid string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		mirrorModernHeaders(req.Header, body)
		return http.DefaultClient.Do(req)
	}
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` + modernMeta + `}}`
	const listen = `{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://counter"]},` + modernMeta + `}}`
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`
	requests := []func(){
		func() { // a call, answered
			if resp, err := post(context.Background(), call, ""); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		},
		func() { // a listen, closed once acknowledged (or refused)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if resp, err := post(ctx, listen, ""); err == nil {
				_, _ = resp.Body.Read(make([]byte, 1))
				cancel()
				resp.Body.Close()
			}
		},
		func() { // a legacy session, opened and deleted
			resp, err := post(context.Background(), initialize, "")
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			sid := resp.Header.Get("Mcp-Session-Id")
			if sid == "" {
				return
			}
			del, _ := http.NewRequest(http.MethodDelete, url, nil)
			del.Header.Set("Mcp-Session-Id", sid)
			if r, err := http.DefaultClient.Do(del); err == nil {
				r.Body.Close()
			}
		},
	}
	const each = 30 // requests of each client before Close, and after
	var before, after atomic.Int32
	var closed atomic.Bool
	var wg sync.WaitGroup
	for _, request := range requests {
		for range 3 {
			wg.Go(func() {
				for n := 0; n < each; {
					request()
					if closed.Load() {
						n++
						after.Add(1)
					} else {
						before.Add(1)
					}
				}
			})
		}
	}
	eventually(t, "requests before Close", func() bool { return before.Load() >= int32(each*len(requests)) })
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	closed.Store(true)
	done := make(chan struct{})
	go func() { defer close(done); wg.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the requests after Close did not end (%d of them ended)", after.Load())
	}
	noPoolGoroutines(t)
}

// noPoolGoroutines waits until no goroutine runs pool code, as none may
// for long once Close returned (a child's waiter, a ServeStdio, return
// in moments).
func noPoolGoroutines(t *testing.T) {
	t.Helper()
	var g string
	eventually(t, "no goroutine of the pool's after Close", func() bool {
		g = poolGoroutines()
		return g == ""
	}, func() string { return "\n" + g })
}

// poolGoroutines returns the stacks of the goroutines running pool code
// (a method of the pool's types), "" if none does.
func poolGoroutines() string {
	var out []string
	for _, g := range strings.Split(pool.AllStacks(), "\n\n") {
		if strings.Contains(g, "switchboard/pool.(*") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// Close waits for the HTTP requests under way (they are in the pool),
// but a client that stopped reading its GET stream mid-write holds the
// stop up no longer than StopGrace, as an attached client that does not
// read would, not for the stream's write timeout.
func TestHTTPStalledStreamHoldsCloseUpToStopGrace(t *testing.T) {
	t.Cleanup(pool.SetStreamWriteTimeout(time.Minute))
	tp := newTestPool(t, &pool.Options{StopGrace: 200 * time.Millisecond}, fake("srv"))
	_, base := newStallFront(t, tp)
	c := &httpClient{t: t, url: base + "/mcp/srv"}
	c.initialize("c")
	if m := c.call(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`); m.Error != nil {
		t.Fatalf("setLevel: %s", m.raw)
	}
	openStalledStream(t, c.url, c.sid) // never read
	if m := c.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"flood","arguments":{"steps":20000}}}`); m.Error != nil {
		t.Fatalf("flood: %s", m.raw)
	}
	eventually(t, "the GET stream's write to wait for its client", func() bool {
		for _, g := range strings.Split(pool.AllStacks(), "\n\n") {
			if strings.Contains(g, "pool.(*httpFront).listen(") && strings.Contains(g, "internal/poll.(*FD).Write(") {
				return true
			}
		}
		return false
	})
	closed := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(closed)
		_ = tp.Close()
	}()
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("Close waited for an HTTP client that does not read (past 15 s; its write timeout is a minute)")
	}
	t.Logf("Close took %v", time.Since(start))
}
