package pool_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A config change, or a restart whose package resolves to another
// version, can give a server a child of the other era while legacy
// clients' sessions are attached. These tests change the era under a
// session that initialized against the first child.

// initializeAs performs a legacy handshake with protocol version and
// returns the capabilities the pool answered.
func initializeAs(t *testing.T, c *client, version string) map[string]json.RawMessage {
	t.Helper()
	c.sendf(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"old","version":"1.0"}}}`, version)
	m, _ := c.recvID(`"init"`)
	if m.Error != nil {
		t.Fatalf("initialize: %s", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	var r struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatalf("initialize result: %v: %s", err, m.raw)
	}
	return r.Capabilities
}

// toolsListChanged says whether initialize's capabilities promise tool
// list changes.
func toolsListChanged(caps map[string]json.RawMessage) bool {
	var tools struct {
		ListChanged bool `json:"listChanged"`
	}
	_ = json.Unmarshal(caps["tools"], &tools)
	return tools.ListChanged
}

// echoes has a legacy client c call the echo tool under id and checks the
// answer, and which protocol version the child saw in the request's
// _meta: the pool's 2026-07-28 for a modern child, none for a legacy one.
func echoes(t *testing.T, c *client, id, text, era string) {
	t.Helper()
	c.call(id, "echo", `{"text":"`+text+`"}`)
	m, _ := c.recvID(id)
	var r struct {
		StructuredContent struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"structuredContent"`
	}
	_ = json.Unmarshal(m.Result, &r)
	want := map[string]string{"legacy": "", "modern": "2026-07-28"}[era]
	if m.Error != nil || m.text() != text || r.StructuredContent.ProtocolVersion != want {
		t.Fatalf("echo %s through a %s child: got %s, want the text %q and _meta's version %q", id, era, m.raw, text, want)
	}
}

// legacyPID is the pid of the child a legacy client's call reaches.
func legacyPID(t *testing.T, c *client, id string) string {
	t.Helper()
	c.call(id, "pid", `{}`)
	m, _ := c.recvID(id)
	if m.Error != nil || m.text() == "" {
		t.Fatalf("pid %s: %s", id, m.raw)
	}
	return m.text()
}

// A legacy client's session outlives a change of its child's era: each
// request carries the _meta a 2026-07-28 child needs exactly when the
// child it goes to is one, with the log level the session set, whatever
// the child the session met at its initialize. The first call after the
// change is made while the new child starts (its era not known yet).
// (Before, a session that initialized against a legacy child sent the
// new modern child its requests without _meta, each refused with -32602
// for good; one that initialized against a modern child sent a legacy
// one the pool's 2026-07-28 _meta.)
func TestLegacySessionFollowsItsChildAcrossAnEraChange(t *testing.T) {
	for _, change := range []string{"reload", "restart"} {
		for _, tc := range []struct{ from, to string }{{"legacy", "modern"}, {"modern", "legacy"}} {
			t.Run(change+"/"+tc.from+"-to-"+tc.to, func(t *testing.T) {
				var cfg pool.ServerConfig
				eraFile := filepath.Join(shortTempDir(t), "era")
				if change == "reload" {
					cfg = fake("srv", "-era", tc.from)
				} else {
					// The same config started again: the era the command
					// resolves to changed, as an npx package's new version's.
					if err := os.WriteFile(eraFile, []byte(tc.from), 0o600); err != nil {
						t.Fatal(err)
					}
					cfg = pool.ServerConfig{Name: "srv", Command: "/bin/sh",
						Args: []string{"-c", `exec "$0" -era "$(cat "$1")" -startup-delay 300ms`, fakeBin, eraFile}}
				}
				tp := newTestPool(t, nil, cfg)
				c := tp.dial(t, "srv")
				initializeAs(t, c, "2025-06-18")
				echoes(t, c, "1", "before", tc.from)
				c.send(`{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"info"}}`)
				if m, _ := c.recvID(`"lvl"`); m.Error != nil {
					t.Fatalf("setLevel: %s", m.raw)
				}
				first := legacyPID(t, c, "2")

				if change == "reload" {
					cfg.Args = []string{"-era", tc.to}
					if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
						t.Fatal(err)
					}
				} else {
					if err := os.WriteFile(eraFile, []byte(tc.to), 0o600); err != nil {
						t.Fatal(err)
					}
					if err := tp.Restart("srv"); err != nil {
						t.Fatal(err)
					}
					eventually(t, "the child restarting", func() bool {
						bs := tp.Snapshot().Backends
						return len(bs) == 1 && strconv.Itoa(bs[0].PID) != first && bs[0].State != pool.StateReady
					})
				}
				c.call("3", "log", `{"level":"warning","data":"after"}`)
				m, before := c.recvID("3")
				if m.Error != nil {
					t.Fatalf("the first call after the change: %s", m.raw)
				}
				if !slices.Contains(notificationsIn(before), "notifications/message ") {
					t.Errorf("the log message of the first call after the change did not come: %v", notificationsIn(before))
				}
				echoes(t, c, "4", "after", tc.to)
				if second := legacyPID(t, c, "5"); second == first {
					t.Fatalf("the calls after the change went to the old child %s", first)
				}
				echoes(t, c, "6", "again", tc.to)
			})
		}
	}
}

// What the pool answered a legacy client's initialize holds for the
// session's life: the list changes it declared are the ones the client
// gets, whichever era the session's child speaks later. One that met a
// modern child was promised none (listChanged is left out for a legacy
// client of one) and gets none from a legacy child that replaces it; one
// that met a legacy child that declared them gets a modern successor's,
// untagged, through the pool's listen on that child. (Before, the first
// got the legacy child's broadcasts it was told not to expect, and the
// second nothing.)
func TestLegacySessionKeepsTheListChangesItWasPromised(t *testing.T) {
	for _, tc := range []struct{ from, to string }{{"modern", "legacy"}, {"legacy", "modern"}} {
		t.Run(tc.from+"-to-"+tc.to, func(t *testing.T) {
			cfg := fake("srv", "-era", tc.from)
			tp := newTestPool(t, nil, cfg)
			old := tp.dial(t, "srv")
			promised := toolsListChanged(initializeAs(t, old, "2025-06-18"))
			if promised != (tc.from == "legacy") {
				t.Fatalf("a legacy client of a %s child was promised tool list changes: %v", tc.from, promised)
			}
			cfg.Args = []string{"-era", tc.to}
			if err := tp.Apply([]pool.ServerConfig{cfg}); err != nil {
				t.Fatal(err)
			}
			echoes(t, old, "1", "after", tc.to) // (starts the new child)
			fresh := tp.dial(t, "srv")
			if got := toolsListChanged(initializeAs(t, fresh, "2025-06-18")); got != (tc.to == "legacy") {
				t.Fatalf("a legacy client of a %s child was promised tool list changes: %v", tc.to, got)
			}
			// The one promised them gets the change before the answer to
			// the call that made it; the other none.
			to, other := old, fresh
			if !promised {
				to, other = fresh, old
			}
			n := 0
			eventually(t, "the promised list change", func() bool {
				n++
				id := `"notify` + strconv.Itoa(n) + `"`
				to.call(id, "notify", `{"kind":"tools"}`)
				m, before := to.recvID(id)
				if m.Error != nil {
					t.Fatalf("notify: %s", m.raw)
				}
				return slices.Contains(notificationsIn(before), "notifications/tools/list_changed ")
			})
			other.call(`"notify"`, "notify", `{"kind":"tools"}`)
			if _, before := other.recvID(`"notify"`); len(notificationsIn(before)) != 0 {
				t.Errorf("a session not promised list changes got %v", notificationsIn(before))
			}
		})
	}
}
