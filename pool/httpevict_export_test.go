package pool

import "time"

// SetHTTPEvictQuiet sets how long a legacy HTTP session's client must
// have sent no request before the cap may evict its session.
func SetHTTPEvictQuiet(d time.Duration) (restore func()) {
	old := evictQuiet
	evictQuiet = d
	return func() { evictQuiet = old }
}
