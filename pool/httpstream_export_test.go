package pool

import (
	"net/http"
	"time"
)

// HTTPStreamQueuedBytes is what the messages waiting for legacy HTTP
// session sid's GET stream hold, in bytes.
func HTTPStreamQueuedBytes(h http.Handler, sid string) int {
	hs := httpSessionOf(h, sid)
	if hs == nil {
		return 0
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n := 0
	for _, e := range hs.waiting {
		n += len(e.line)
	}
	return n
}

// EndedStreamBytes is what a GET stream that ended leaves to the next of
// its notifications.
const EndedStreamBytes = endedStreamBytes

// SetHTTPKeepAlive sets how long the event streams of front door h go
// idle before a keep-alive comment. Call it before h serves.
func SetHTTPKeepAlive(h http.Handler, d time.Duration) { h.(*httpFront).keepAlive = d }

// HTTPStreamOpen reports whether legacy HTTP session sid has its GET
// stream open.
func HTTPStreamOpen(h http.Handler, sid string) bool {
	hs := httpSessionOf(h, sid)
	return hs != nil && hs.streaming()
}
