//go:build unix

package pool_test

import (
	"fmt"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// debugLevels counts the logging/setLevel debug the children were sent.
func debugLevels(t *testing.T, logPath string) int {
	t.Helper()
	n := 0
	for _, m := range childLog(t, logPath) {
		if m["method"] == "logging/setLevel" {
			if p, _ := m["params"].(map[string]any); p["level"] == "debug" {
				n++
			}
		}
	}
	return n
}

// waitDebugLevels waits until the children were sent n setLevel debug:
// the pool answers a session's setLevel itself and tells the child after.
func waitDebugLevels(t *testing.T, logPath string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d setLevel debug in the children's logs", n), func() bool { return debugLevels(t, logPath) >= n })
}

// A session's log level follows it to the child of its new roots when it
// is the first there: the child its next request starts is set to the
// level the session asked for.
func TestLogLevelFollowsToAFreshChild(t *testing.T) {
	a, logPath := movedToAFreshChild(t, func(a *client, logPath string) {
		a.send(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`)
		if m, _ := a.recvID("2"); m.Error != nil {
			t.Fatalf("setLevel: %s", m.raw)
		}
		waitDebugLevels(t, logPath, 1) // the pool answered; the first child hears it
	})
	a.pidOf("4") // what the new child was queued as it became ready is ahead of this
	if n := debugLevels(t, logPath); n < 2 {
		t.Errorf("the child of a's new roots was never set to debug: %d setLevel debug in all the children's logs, want 2", n)
	}
}

// After the user stops a server, or a config change replaces its child,
// the child a session's next request starts (its own, or its roots'
// shared one) is set to the level it asked for; so is one that declares
// no logging but took the session's level (on the first edition such a
// child was set to nothing).
func TestLogLevelFollowsToTheChildAfterStop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		share pool.Share
		stop  func(*testPool, pool.ServerConfig) error
		flags []string
	}{
		{string(pool.ShareSession), pool.ShareSession, stopFS, nil},
		{string(pool.ShareShared), pool.ShareShared, stopFS, nil},
		{"reload/shared", pool.ShareShared, reloadFS, nil},
		{"undeclared/shared", pool.ShareShared, stopFS, []string{"-logging", "undeclared"}},
		{"undeclared/session", pool.ShareSession, stopFS, []string{"-logging", "undeclared"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, logPath := newChildAfterStop(t, tc.share, tc.stop, func(a *client, logPath string) {
				a.send(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`)
				if m, _ := a.recvID("2"); m.Error != nil {
					t.Fatalf("setLevel: %s", m.raw)
				}
				waitDebugLevels(t, logPath, 1) // the pool answered; the first child hears it, before it is stopped
			}, tc.flags...)
			a.pidOf("4") // what the new child was queued as it became ready is ahead of this
			if n := debugLevels(t, logPath); n < 2 {
				t.Errorf("the child started after the stop was never set to debug: %d setLevel debug in all the children's logs, want 2", n)
			}
		})
	}
}
