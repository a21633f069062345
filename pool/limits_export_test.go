package pool

import "time"

// MaxSubscriptionURI is maxSubscriptionURI, for tests.
const MaxSubscriptionURI = maxSubscriptionURI

// SetUnfinishedLineTimeout sets unfinishedLineTimeout until restore.
func SetUnfinishedLineTimeout(d time.Duration) (restore func()) {
	old := unfinishedLineTimeout
	unfinishedLineTimeout = d
	return func() { unfinishedLineTimeout = old }
}
