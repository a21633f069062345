package pool

import (
	"net/http"
	"time"
)

// ExpireHTTPIdle runs the HTTP front door's expiry as if the time were
// now, for tests that cannot wait a minute.
func ExpireHTTPIdle(h http.Handler, now time.Time) { h.(*httpFront).expireIdle(now) }

// StatelessLinger is how long a quiet stateless session stays.
const StatelessLinger = statelessLinger

// SetStreamWriteTimeout sets how long a GET stream's client has to take an
// event, until the returned restore is called (after the pool closed).
func SetStreamWriteTimeout(d time.Duration) (restore func()) {
	old := streamWriteTimeout
	streamWriteTimeout = d
	return func() { streamWriteTimeout = old }
}
