package pool

import "sync"

// OpenStreamAsRootsAreOwed runs open, which opens a legacy HTTP session's
// GET stream, the first time the pool finds that it cannot ask a client
// its roots yet, and has the pool go on once it was told that the stream
// opened (streamOpened); until restore is called (after the pool closed).
func OpenStreamAsRootsAreOwed(open func()) (restore func()) {
	opened := make(chan struct{}, 1)
	testHookStreamOpened = func(*session) {
		select {
		case opened <- struct{}{}:
		default:
		}
	}
	var once sync.Once
	testHookOwing = func(s *session) {
		once.Do(func() {
			open()
			select {
			case <-opened:
			case <-s.closed:
			}
		})
	}
	return func() { testHookOwing, testHookStreamOpened = nil, nil }
}
