package pool_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// The pool's callers that are none of its goroutines (the control API,
// the tray, the config watcher) may call it while it closes, and after.
// What they start must be started before Close waits for the pool's
// goroutines, or not at all: a goroutine added as Close waits, or after,
// is one Close does not wait for (and, added from none, a misuse of the
// WaitGroup the race detector reports).

// holdingResolver resolves its first call at once; every later call
// reports on called and waits for release, whatever its ctx says.
type holdingResolver struct {
	n       atomic.Int32
	called  chan struct{}
	release chan struct{}
}

func newHoldingResolver() *holdingResolver {
	return &holdingResolver{called: make(chan struct{}, 1<<16), release: make(chan struct{})}
}

func (r *holdingResolver) Resolve(ctx context.Context, cfg pool.ServerConfig) (pool.Resolution, error) {
	if r.n.Add(1) > 1 {
		r.called <- struct{}{}
		<-r.release
	}
	return pool.Resolution{Command: fakeBin}, nil
}

// acrossClose runs call over and over in a goroutine while the pool
// closes: until it ran enough times before, and as many times after
// Close returned.
func acrossClose(t *testing.T, tp *testPool, call func(i int)) {
	t.Helper()
	const each = 50
	var before, after atomic.Int32
	var closed atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; after.Load() < each; i++ {
			call(i)
			if closed.Load() {
				after.Add(1)
			} else {
				before.Add(1)
			}
		}
	}()
	eventually(t, "calls before Close", func() bool { return before.Load() >= each })
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	closed.Store(true)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the calls after Close did not end")
	}
}

// A user's restart that comes after the pool closed (the control API and
// the HTTP front door stop after the pool) is refused, and looks up no
// package: its resolver would run in a goroutine nothing waits for.
func TestRestartAfterCloseStartsNothing(t *testing.T) {
	r := newHoldingResolver()
	defer close(r.release)
	tp := newTestPool(t, nil, pool.ServerConfig{Name: "srv", Command: "/nonexistent/npx", Resolver: r})
	eventually(t, "the first resolution", func() bool { return r.n.Load() == 1 })
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tp.Restart("srv"); !errors.Is(err, pool.ErrPoolClosed) {
		t.Fatalf("Restart after Close: %v, want %v", err, pool.ErrPoolClosed)
	}
	if n := r.n.Load(); n != 1 {
		t.Fatalf("Restart after Close resolved the command again (%d resolutions)", n)
	}
}

// A user's cancel delivers its error from the caller's goroutine, which
// may start the session's writer: after Close there is none to cancel,
// and it is refused rather than looked for.
func TestCancelAfterCloseIsRefused(t *testing.T) {
	tp := newTestPool(t, nil, pool.ServerConfig{Name: "srv", Command: fakeBin})
	tp.dial(t, "srv").initialize("c", "")
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tp.Cancel(1); !errors.Is(err, pool.ErrPoolClosed) {
		t.Fatalf("Cancel after Close: %v, want %v", err, pool.ErrPoolClosed)
	}
}

// Restarts while the pool closes: each one starts its resolution before
// Close waits, or is refused.
func TestRestartAcrossClose(t *testing.T) {
	r := newHoldingResolver()
	close(r.release)
	tp := newTestPool(t, nil, pool.ServerConfig{Name: "srv", Command: "/nonexistent/npx", Resolver: r})
	tp.dial(t, "srv").initialize("c", "")
	acrossClose(t, tp, func(int) { _ = tp.Restart("srv") })
}

// The tray subscribes to the pool's events at any time, its quit
// included: a subscription taken as the pool closes ends with it, and
// one taken after has ended already.
func TestSubscribeAcrossClose(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	tp.dial(t, "srv").initialize("c", "")
	acrossClose(t, tp, func(int) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, ch := tp.Subscribe(ctx, 1)
		cancel()
		for range ch {
		}
	})
	_, ch := tp.Subscribe(context.Background(), 1)
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("a subscription after Close got an event")
		}
	default:
		t.Fatal("a subscription after Close was open")
	}
}

// The config watcher applies a change (a changed command: the old child
// drains, the new one is resolved) while the pool closes.
func TestApplyAcrossClose(t *testing.T) {
	r := newHoldingResolver()
	close(r.release)
	cfg := func(i int) pool.ServerConfig {
		return pool.ServerConfig{Name: "srv", Command: "/nonexistent/npx", Args: []string{fmt.Sprint(i)}, Resolver: r}
	}
	tp := newTestPool(t, nil, cfg(0))
	tp.dial(t, "srv").initialize("c", "")
	acrossClose(t, tp, func(i int) { _ = tp.Apply([]pool.ServerConfig{cfg(i + 1)}) })
	if err := tp.Apply([]pool.ServerConfig{cfg(0)}); !errors.Is(err, pool.ErrPoolClosed) {
		t.Fatalf("Apply after Close: %v, want %v", err, pool.ErrPoolClosed)
	}
}

// The config watcher removes a server (and configures it again) while
// the pool closes, a session of it busy with a call: what the removal
// starts (the drain of its child, the end of its sessions once idle) is
// started before Close waits, Apply being entered (Pool.open), and ends
// with the sessions and children Close ends.
func TestApplyRemovalAcrossClose(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000}}}`)
	eventually(t, "the call in flight", func() bool { return len(tp.Snapshot().InFlight) == 1 })
	acrossClose(t, tp, func(i int) {
		if i%2 == 0 {
			_ = tp.Apply(nil)
		} else {
			_ = tp.Apply([]pool.ServerConfig{fake("srv")})
		}
	})
	noPoolGoroutines(t)
}
