package pool

import "time"

// SetProbeTimeout sets how long a child's handshake waits for its answer
// to server/discover before it also sends initialize, until the returned
// restore is called (after the pool closed).
func SetProbeTimeout(d time.Duration) (restore func()) {
	old := probeTimeout
	probeTimeout = d
	return func() { probeTimeout = old }
}
