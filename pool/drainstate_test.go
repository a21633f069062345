//go:build unix

package pool_test

import (
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// While a removed server's child finishes its calls, the server's state
// is its child's (ready), with draining set: README's rule that a
// server is ready when one of its children is. It said "stopped", beside
// a backend "ready" with calls in flight. Once the child is done the
// server leaves the snapshot.
func TestRemovedServerStateWhileItDrains(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"), fake("other"))
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	c.call("2", "sleep", `{"ms":60000}`)
	eventually(t, "the call in flight", func() bool { return len(tp.Snapshot().InFlight) == 1 })
	if err := tp.Apply([]pool.ServerConfig{fake("other")}); err != nil {
		t.Fatal(err)
	}
	s := serverInfo(t, tp, "srv")
	bs := tp.Snapshot().Backends
	if s.State != pool.StateReady || !s.Draining || len(bs) != 1 || bs[0].State != pool.StateReady {
		t.Fatalf("draining: server %+v, backends %+v; want the server ready and draining, as its ready child", s, bs)
	}
	c.close() // its call is cancelled: nothing is left in flight
	eventually(t, "the removed server to leave the snapshot", func() bool {
		return !slices.ContainsFunc(tp.Snapshot().Servers, func(s pool.ServerInfo) bool { return s.Name == "srv" })
	})
}
