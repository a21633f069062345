package app

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/mcptest"
)

// TestTrayControllerRestartsOneChild: the dashboard's per-row Restart,
// through the app's controller, restarts that row's child of a real
// pool; the other session's own child of the same server runs on.
func TestTrayControllerRestartsOneChild(t *testing.T) {
	bin, err := fakeBin()
	if err != nil {
		t.Fatal(err)
	}
	home, err := os.MkdirTemp("", "sbrs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) }) // after the instance stops
	t.Setenv("SWITCHBOARD_HOME", home)
	cfg := filepath.Join(home, "config.json")
	conf := fmt.Appendf(nil, `{"mcpServers": {"per": {"command": %q, "share": "session"}}, "history": {"disabled": true}}`, bin)
	if err := os.WriteFile(cfg, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	inst, _ := startIn(t, Options{ConfigPath: cfg})
	runInstance(t, inst)
	c := &trayController{inst: inst}
	eventually(t, 10*time.Second, "the pool to listen", func() bool {
		_, err := os.Stat(inst.Paths.PoolSocket())
		return err == nil
	})
	for range 2 { // a session's own child starts with its first call
		conn := mcptest.Open(t, inst.Paths.PoolSocket(), "per", "load")
		defer conn.Close()
		fmt.Fprintln(conn, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pid","arguments":{}}}`)
		if line, err := bufio.NewReader(conn).ReadBytes('\n'); err != nil || !strings.Contains(string(line), `"result"`) {
			t.Fatalf("a call: %s %v", line, err)
		}
	}
	var rows []pool.BackendInfo
	eventually(t, 10*time.Second, "a child for each session", func() bool {
		rows = rows[:0]
		for _, b := range c.Snapshot().Backends {
			if b.PID > 0 && b.State == pool.StateReady {
				rows = append(rows, b)
			}
		}
		return len(rows) == 2
	})
	alice, bob := rows[0], rows[1]
	if err := c.RestartBackend(alice.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "alice's child to restart", func() bool {
		for _, b := range c.Snapshot().Backends {
			if b.ID == alice.ID && b.PID > 0 && b.PID != alice.PID && b.State == pool.StateReady {
				return true
			}
		}
		return false
	})
	for _, b := range c.Snapshot().Backends {
		if b.ID == bob.ID && (b.PID != bob.PID || b.Restarts != bob.Restarts) {
			t.Errorf("bob's child was touched: PID %d (was %d), restarts %d (was %d)", b.PID, bob.PID, b.Restarts, bob.Restarts)
		}
	}
}
