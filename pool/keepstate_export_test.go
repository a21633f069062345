package pool

import (
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// PauseShimLines makes the first goroutine that writes an attached
// session's State lines wait, before it takes them from the queue, until
// resume is called. Until restore is called (after the pool closed).
func PauseShimLines() (resume, restore func()) {
	resumed := make(chan struct{})
	var once sync.Once
	testHookShimLines = func() { once.Do(func() { <-resumed }) }
	return sync.OnceFunc(func() { close(resumed) }), func() { testHookShimLines = nil }
}

// SetShimWriteTimeout sets how long an attached session's shim has to
// take a line, until the returned restore is called (after the pool
// closed).
func SetShimWriteTimeout(d time.Duration) (restore func()) {
	old := shimWriteTimeout
	shimWriteTimeout = d
	return func() { shimWriteTimeout = old }
}

// SetKeptHook runs hook with each State line a session tells its shim of
// a change, as the change is done with, after the session's lock is
// released; until restore is called (after the pool closed).
func SetKeptHook(hook func(wire.State)) (restore func()) {
	testHookKept = hook
	return func() { testHookKept = nil }
}
