//go:build unix

package pool_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A Backends row's Restart restarts that row's child, not every child of
// its server: another session's own child (share "session"), or another
// roots partition's, runs on, and its call in flight is answered. On the
// first edition the row called Restart(server): restarting alice's child
// killed bob's and failed his call.
func TestRestartBackendRestartsThatChildOnly(t *testing.T) {
	for _, share := range []pool.Share{pool.ShareSession, pool.ShareShared} {
		t.Run(string(share), func(t *testing.T) {
			cfg := fake("srv")
			cfg.Share = share
			tp := newTestPool(t, nil, cfg)
			alice, bob := tp.dial(t, "srv"), tp.dial(t, "srv")
			if share == pool.ShareShared {
				alice.initRoots("alice", "file:///work/alice")
				bob.initRoots("bob", "file:///work/bob")
			} else {
				alice.initialize("alice", "")
				bob.initialize("bob", "")
			}
			pa, pb := alice.pidOf("1"), bob.pidOf("1")
			if pa == pb {
				t.Fatalf("alice and bob share child %s", pa)
			}
			row := func(pid string) (pool.BackendInfo, bool) {
				for _, b := range tp.Snapshot().Backends {
					if strconv.Itoa(b.PID) == pid {
						return b, true
					}
				}
				return pool.BackendInfo{}, false
			}
			aliceRow, ok := row(pa)
			if !ok || aliceRow.ID == 0 {
				t.Fatalf("no backend row with alice's PID %s (ID %d)", pa, aliceRow.ID)
			}
			bob.call("2", "sleep", `{"ms":1500}`)
			eventually(t, "bob's call to reach his child", func() bool {
				for _, r := range tp.Snapshot().InFlight {
					if strconv.Itoa(r.PID) == pb && r.WrittenToChild {
						return true
					}
				}
				return false
			})

			if err := tp.RestartBackend(aliceRow.ID); err != nil {
				t.Fatal(err)
			}
			eventually(t, "alice's child to be restarted in its slot", func() bool {
				for _, b := range tp.Snapshot().Backends {
					if b.ID == aliceRow.ID && b.PID != 0 && strconv.Itoa(b.PID) != pa && b.State == pool.StateReady {
						return true
					}
				}
				return false
			})
			if m, _ := bob.recvID("2"); m.Error != nil || m.text() != "slept 1500" {
				t.Errorf("bob's call in flight got %s", m.raw)
			}
			if again := bob.pidOf("3"); again != pb {
				t.Errorf("bob's child changed from %s to %s", pb, again)
			}
			if again := alice.pidOf("3"); again == pa {
				t.Errorf("alice's call ran on the child that was restarted (%s)", pa)
			}
			if err := tp.RestartBackend(1 << 40); !errors.Is(err, pool.ErrNotFound) {
				t.Errorf("RestartBackend of no backend: %v, want ErrNotFound", err)
			}
		})
	}
}
