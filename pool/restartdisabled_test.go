package pool_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A user's restart of a server the config holds back (disabled, or not
// started for an unset ${VAR}) is refused with the reason, rather than
// done silently: such a server starts no child, so the restart did
// nothing and said so to no one. And the children it still has finishing
// their calls are left to finish: the restart killed one, its call
// answered that the user restarted it.
func TestRestartOfAHeldBackServerIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold func(*pool.ServerConfig)
		want string
	}{
		{"disabled", func(c *pool.ServerConfig) { c.Disabled = true }, "disabled"},
		{"not started", func(c *pool.ServerConfig) { c.Disabled, c.NotStarted = true, "environment variable K is not set" }, "K is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fake("srv")
			tp := newTestPool(t, nil, cfg)
			c := tp.dial(t, "srv")
			c.initialize("c", "")
			c.call("1", "sleep", `{"ms":1500}`)
			eventually(t, "the call in flight", func() bool { return len(tp.Snapshot().InFlight) == 1 })
			tc.hold(&cfg)
			if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
				t.Fatal(err)
			}
			err := tp.Restart("srv")
			if !errors.Is(err, pool.ErrDisabled) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restart: %v, want %v saying %q", err, pool.ErrDisabled, tc.want)
			}
			if m, _ := c.recvID("1"); m.Error != nil || !strings.Contains(m.raw, "slept 1500") {
				t.Fatalf("the call that was finishing: %s, want its result", m.raw)
			}
		})
	}
}
