package pool

import (
	"net/http"
	"time"
)

// SetHTTPBodyTimeout sets how long a token holder has to send a request
// body, until the returned restore is called (after the pool closed).
func SetHTTPBodyTimeout(d time.Duration) (restore func()) {
	old := httpBodyTimeout
	httpBodyTimeout = d
	return func() { httpBodyTimeout = old }
}

// HTTPBodyBudgetLeft is what is left of the front door h's budget for the
// large request bodies it is reading.
func HTTPBodyBudgetLeft(h http.Handler) int64 { return h.(*httpFront).bodies.left.Load() }
