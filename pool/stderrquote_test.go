package pool_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// What session a makes a child write to its stderr: prose, and a
// credential in it. The fake logs a cancellation's reason.
const (
	aliceProse  = "alice reviews the merger draft"
	aliceSecret = "ghp_ALICEsecret0123456789abcdefABCDEF12"
	aliceReason = aliceProse + ": Authorization: Bearer " + aliceSecret
)

// crashAfterAliceLogs has a cancel with aliceReason logged by a's child,
// waits until the pool has read it, then crashes that child through a.
// The call is cancelled once the child has it: one cancelled before it
// was written never reaches the child, nor does its cancel.
func crashAfterAliceLogs(t *testing.T, tp *testPool, a *client) {
	t.Helper()
	a.call("5", "sleep", `{"ms":60000}`)
	eventually(t, "a's call written to the child", func() bool {
		return slices.ContainsFunc(tp.Snapshot().InFlight, func(r pool.RequestInfo) bool { return r.OriginalID == "5" && r.WrittenToChild })
	})
	a.sendf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":%q}}`, aliceReason)
	eventually(t, "the child logs a's cancel", func() bool {
		return slices.ContainsFunc(tp.Snapshot().Backends, func(b pool.BackendInfo) bool {
			return slices.ContainsFunc(b.StderrTail, func(l string) bool { return strings.Contains(l, aliceProse) })
		})
	})
	a.call("6", "crash", `{}`)
}

// saysAlice reports whether an error message quotes anything a's
// session made the child write.
func saysAlice(s string) bool {
	return strings.Contains(s, "alice") || strings.Contains(s, "ALICE") || strings.Contains(s, "merger")
}

// A shared child's stderr was written while it served every session: the
// error that tells another session's client its call died with the
// child, or that the server failed, does not quote it (it points to
// status, which redacts it); only a session's own child's stderr is
// quoted to it, and redacted.
func TestChildStderrIsQuotedOnlyToItsOwnSession(t *testing.T) {
	redact := func(s string) string { return strings.ReplaceAll(s, aliceSecret, "[REDACTED]") }
	for _, tc := range []struct {
		name  string
		fails bool // the crash spends the restart budget
	}{{"restarted", false}, {"failed", true}} {
		t.Run("shared/"+tc.name, func(t *testing.T) {
			cfg := fake("srv")
			if tc.fails {
				cfg.Restart = pool.RestartPolicy{MaxRestarts: 1, Window: time.Minute}
			}
			tp := newTestPool(t, &pool.Options{RedactText: redact}, cfg)
			a, b := tp.dial(t, "srv"), tp.dial(t, "srv")
			a.initialize("alice", "")
			b.initialize("bob", "")
			b.call("10", "sleep", `{"ms":60000}`)
			eventually(t, "b's call in flight", func() bool { return len(tp.Snapshot().InFlight) == 1 })
			crashAfterAliceLogs(t, tp, a)
			m, _ := b.recvID("10")
			if m.Error == nil || saysAlice(m.Error.Message) || !strings.Contains(m.Error.Message, "switchboard status") {
				t.Fatalf("b's call on the crashed shared child: want an error that quotes nothing of a's and points to status, got %s", m.raw)
			}
			if !tc.fails {
				return
			}
			eventually(t, "the server failed", func() bool { return tp.Snapshot().Servers[0].State == pool.StateFailed })
			b.call("11", "echo", `{"text":"x"}`)
			if m, _ := b.recvID("11"); m.Error == nil || saysAlice(m.Error.Message) || !strings.Contains(m.Error.Message, "switchboard status") {
				t.Fatalf("b's call to the failed server: want an error that quotes nothing of a's and points to status, got %s", m.raw)
			}
		})
		t.Run("own/"+tc.name, func(t *testing.T) {
			cfg := fake("srv")
			cfg.Share = pool.ShareSession
			if tc.fails {
				cfg.Restart = pool.RestartPolicy{MaxRestarts: 1, Window: time.Minute}
			}
			tp := newTestPool(t, &pool.Options{RedactText: redact}, cfg)
			a := tp.dial(t, "srv")
			a.initialize("alice", "")
			crashAfterAliceLogs(t, tp, a)
			m, _ := a.recvID("6")
			if m.Error == nil || !strings.Contains(m.Error.Message, aliceProse) ||
				strings.Contains(m.Error.Message, aliceSecret) || !strings.Contains(m.Error.Message, "[REDACTED]") {
				t.Fatalf("a's call on its own crashed child: want its stderr quoted, redacted, got %s", m.raw)
			}
		})
	}
}
