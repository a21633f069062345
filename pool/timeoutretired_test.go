//go:build unix

package pool_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A request in flight when its server is removed (or disabled) that then
// runs out its timeout is answered -32001 as ever, but not retryable, and
// saying why: sending it again cannot work, the server takes no more
// requests (README, Guarantees: retryable is false for a server removed
// from the config). It said "retryable": true, and nothing of the removal.
func TestTimeoutOnARemovedServerIsNotRetryable(t *testing.T) {
	for _, how := range []string{"removed", "disabled"} {
		t.Run(how, func(t *testing.T) {
			cfg := fake("srv")
			tp := newTestPool(t, nil, cfg)
			c := tp.dial(t, "srv")
			c.initialize("c", "")
			tp.applyRequestTimeout(t, &cfg, time.Second)
			c.call("2", "sleep", `{"ms":60000}`)
			eventually(t, "the call in flight", func() bool { return len(tp.Snapshot().InFlight) == 1 })
			var cfgs []pool.ServerConfig
			why := "removed from the configuration"
			if how == "disabled" {
				cfg.Disabled = true
				cfgs, why = []pool.ServerConfig{cfg}, "disabled in the config"
			}
			if err := tp.Apply(cfgs); err != nil {
				t.Fatal(err)
			}
			m, _ := c.recvID("2")
			code, data := errorData(t, m)
			if code != -32001 || *data.Retryable || !*data.MayHaveExecuted || !strings.Contains(m.Error.Message, why) {
				t.Errorf("the call's answer: %s; want -32001, not retryable, may have run, saying the server was %s", m.raw, how)
			}
		})
	}
}
