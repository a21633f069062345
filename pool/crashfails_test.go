//go:build unix

package pool_test

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// The crash that spends a server's restart budget answers the calls it
// had been written as not retryable: the server is failed, and sending
// them again cannot work until it is restarted. They still say they may
// have run. (They were answered retryable, before the budget was looked
// at, while in the same event a retried tools/list was answered failed.)
// A crash that the budget allows is still retryable. Every call the
// crash left gets the failed server's error, as a call the crash had
// re-queued (safe to repeat) does.
func TestCrashThatFailsTheServerAnswersNotRetryable(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxRestarts int
		retryable   bool
		code        int
	}{
		{"the crash fails the server", 1, false, -32000},
		{"the server restarts", 3, true, -32003},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fake("srv")
			cfg.Restart = pool.RestartPolicy{MaxRestarts: tc.maxRestarts}
			tp := newTestPool(t, nil, cfg)
			c := tp.dial(t, "srv")
			c.initialize("c", "")
			c.call("1", "sleep", `{"ms":60000}`)
			eventually(t, "the sleep written", func() bool {
				s := tp.Snapshot()
				return len(s.InFlight) == 1 && s.InFlight[0].WrittenToChild
			})
			c.call("2", "crash", `{}`)
			for _, id := range []string{"1", "2"} {
				m, _ := c.recvID(id)
				code, data := errorData(t, m)
				if code != tc.code || !*data.MayHaveExecuted || *data.Retryable != tc.retryable {
					t.Errorf("call %s: %s; want %d, mayHaveExecuted true, retryable %v", id, m.raw, tc.code, tc.retryable)
				}
			}
		})
	}
}
