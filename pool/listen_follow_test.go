//go:build unix

package pool_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// modernPID asks c's child its PID with a 2026-07-28 tools/call.
func modernPID(c *client, id string) string {
	c.t.Helper()
	callModern(c, id, "pid", `{}`)
	m, _ := c.recvID(id)
	return m.text()
}

// listenGetsUpdates polls: from has its child say fake://counter changed
// until l's listen "L" gets the tagged resources/updated, or the deadline
// passes. Polling: the new child may not watch yet (a legacy child
// handles the subscribe it hears as it becomes ready on a goroutine of
// its own; a modern one acknowledges the pool's listen in its own time).
// A response to "L" (the listen ended) fails the test.
func listenGetsUpdates(t *testing.T, from, l *client, logPath string) {
	t.Helper()
	n := 0
	eventually(t, `resources/updated on listen "L"`, func() bool {
		n++
		id := fmt.Sprintf(`"notify-%d"`, n)
		callModern(from, id, "notify", `{"kind":"updated"}`)
		_, got := from.recvID(id)
		if from != l {
			got = nil
		}
		callModern(l, id, "echo", `{"text":"s"}`) // behind anything sent to l before from's answer
		_, more := l.recvID(id)
		got = append(got, more...)
		for _, m := range got {
			if string(m.ID) == `"L"` {
				t.Fatalf("the listen ended: %s", m.raw)
			}
		}
		return slices.Contains(notificationsIn(got), `notifications/resources/updated "L"`)
	}, func() string {
		return fmt.Sprintf("the children heard %d resources/subscribe and %d subscriptions/listen",
			countInLog(t, logPath, "resources/subscribe"), countInLog(t, logPath, "subscriptions/listen"))
	})
}

// An open subscriptions/listen follows its session to the child started
// after the user's stop, or after a config change that replaced the
// child, as the session's resources/subscribe stakes do: it stays open
// and gets the new child's changes, without being opened again. A legacy
// child is subscribed to the listen's resource as it becomes ready; a
// modern one gets the pool's upstream listen. Each child hears one.
// (Before, the listen stayed bound to the stopped child: the new child
// was never asked, and the listen silently got nothing from then on.)
func TestListenFollowsToTheChildAfterStop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		era   string
		share pool.Share
		stop  func(*testPool, pool.ServerConfig) error
	}{
		{"legacy/stop/shared", "legacy", pool.ShareShared, stopFS},
		{"legacy/stop/session", "legacy", pool.ShareSession, stopFS},
		{"legacy/reload/shared", "legacy", pool.ShareShared, reloadFS},
		{"modern/stop/shared", "modern", pool.ShareShared, stopFS},
		{"modern/stop/session", "modern", pool.ShareSession, stopFS},
		{"modern/reload/shared", "modern", pool.ShareShared, reloadFS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logPath := filepath.Join(shortTempDir(t), "child.log")
			cfg := fake("fs", "-era", tc.era, "-log", logPath)
			cfg.Share = tc.share
			tp := newTestPool(t, nil, cfg)
			l := tp.dial(t, "fs")
			openListen(t, l, `"L"`, `{"resourceSubscriptions":["fake://counter"]}`)
			// Another session's request starts a shared child; a session's
			// own child, only its own.
			starter := l
			if tc.share != pool.ShareSession {
				starter = tp.dial(t, "fs")
			}
			first := modernPID(starter, `"pid-1"`)
			if err := tc.stop(tp, cfg); err != nil {
				t.Fatal(err)
			}
			if second := modernPID(starter, `"pid-2"`); second == first {
				t.Fatalf("stopped, same child %s", second)
			}
			listenGetsUpdates(t, starter, l, logPath)
			method := map[string]string{"legacy": "resources/subscribe", "modern": "subscriptions/listen"}[tc.era]
			if n := countInLog(t, logPath, method); n != 2 {
				t.Errorf("the children heard %d %s, want 2 (one each)", n, method)
			}
		})
	}
}

// A listen that follows its session to a new child still ends when its
// client cancels it: the new child is let go of it (a legacy child hears
// the unsubscribe, a modern one the cancel of the pool's listen), and
// the listen gets nothing more.
func TestListenThatFollowedEndsAtTheNewChild(t *testing.T) {
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) {
			logPath := filepath.Join(shortTempDir(t), "child.log")
			cfg := fake("fs", "-era", era, "-log", logPath)
			tp := newTestPool(t, nil, cfg)
			l, other := tp.dial(t, "fs"), tp.dial(t, "fs")
			openListen(t, l, `"L"`, `{"resourceSubscriptions":["fake://counter"]}`)
			modernPID(other, `"pid-1"`)
			if err := stopFS(tp, cfg); err != nil {
				t.Fatal(err)
			}
			modernPID(other, `"pid-2"`)
			listenGetsUpdates(t, other, l, logPath)
			cancelsBefore := countInLog(t, logPath, "notifications/cancelled")
			l.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L"}}`)
			eventually(t, "the new child to be let go of the listen", func() bool {
				if era == "legacy" {
					return countInLog(t, logPath, "resources/unsubscribe") == 1
				}
				return countInLog(t, logPath, "notifications/cancelled") > cancelsBefore
			})
			callModern(other, `"n"`, "notify", `{"kind":"updated"}`)
			other.recvID(`"n"`)
			if got := notifiedBefore(l, `"s"`); len(got) != 0 {
				t.Errorf("a cancelled listen still got %q", got)
			}
		})
	}
}

// A modern child that takes the pool's reopened upstream listen but never
// acknowledges it (-ack-listens 1: only the first) leaves the listener
// that waited for it unacknowledged no longer than the server's request
// timeout: it is then acknowledged with what the open upstream listen
// covers, the child is told to cancel the one it sat on, and the pool
// says so in its log. The listener gets what it was promised. (Before, it
// waited for ever.)
func TestListenUnacknowledgedByTheChildIsBounded(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	logs := &logBuffer{}
	cfg := fake("srv", "-era", "modern", "-log", logPath, "-ack-listens", "1")
	tp := newTestPool(t, &pool.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}, cfg)
	a, b, other := tp.dial(t, "srv"), tp.dial(t, "srv"), tp.dial(t, "srv")
	openListen(t, a, `"a"`, `{"toolsListChanged":true}`) // starts the child, under the default timeout
	tp.applyRequestTimeout(t, &cfg, time.Second)
	b.send(`{"jsonrpc":"2.0","id":"b","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":true},` + modernMeta + `}}`)
	b.patience = 10 * time.Second
	if ack := b.recv(); ack.Method != "notifications/subscriptions/acknowledged" ||
		!strings.Contains(ack.raw, `"notifications":{"toolsListChanged":true}`) {
		t.Fatalf("b: %s, want an acknowledgement promising the tools changes the open listen covers", ack.raw)
	}
	if n := logs.count("the child did not acknowledge the pool's listen in time"); n != 1 {
		t.Errorf("the pool logged %d warnings, want 1", n)
	}
	eventually(t, "the child to be told to cancel the listen it sat on", func() bool {
		return countInLog(t, logPath, "notifications/cancelled") == 1
	})
	awaitChange(t, other, b, "tools", `"b"`)
	awaitChange(t, other, a, "tools", `"a"`)
}
