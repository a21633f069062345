package pool

import "time"

// SetHTTPBodyTimeout sets how long a token holder has to send a request
// body, until the returned restore is called (after the pool closed).
func SetHTTPBodyTimeout(d time.Duration) (restore func()) {
	old := httpBodyTimeout
	httpBodyTimeout = d
	return func() { httpBodyTimeout = old }
}
