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
