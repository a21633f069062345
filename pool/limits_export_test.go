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

// UnfinishedHeld is the bytes the pool's unfinished lines hold of
// Options.MaxUnfinishedBytes.
func (p *Pool) UnfinishedHeld() int64 { return p.unfinished.held.Load() }
