//go:build linux

package pool_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A child dies while the pool is writing it a request it stopped reading,
// and a grandchild it started holds its stdin open without reading it (a
// subprocess that inherits stdin, as Python's subprocess does by
// default). The write must not wait for ever on that pipe: the request
// gets its at-most-once answer, the orphaned grandchild is ended, and the
// backend restarts and stops as usual.
func TestChildDeadWhileAGrandchildHoldsItsStdin(t *testing.T) {
	gpidFile := filepath.Join(shortTempDir(t), "grandchild.pid")
	tp := newTestPool(t, nil, fake("srv", "-stop-reading-after", "2", "-grandchild", "-grandchild-stdin",
		"-grandchild-pidfile", gpidFile))
	c := tp.dial(t, "srv")
	c.initialize("c", "")                                            // the child reads initialize and initialized, then nothing
	c.call("1", "echo", `{"text":"`+strings.Repeat("x", 1<<20)+`"}`) // more than the pipe holds
	eventually(t, "the call in flight", func() bool { return len(tp.Snapshot().InFlight) == 1 })
	var gpid int
	eventually(t, "the grandchild's pid", func() bool {
		b, err := os.ReadFile(gpidFile)
		gpid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && gpid > 0
	})
	t.Cleanup(func() { _ = syscall.Kill(gpid, syscall.SIGKILL) })
	first := tp.Snapshot().Backends[0]
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	m, _ := c.recvID("1")
	var data struct {
		MayHaveExecuted bool `json:"mayHaveExecuted"`
	}
	if m.Error != nil {
		_ = json.Unmarshal(m.Error.Data, &data)
	}
	if m.Error == nil || m.Error.Code != -32003 || !data.MayHaveExecuted {
		t.Fatalf("the call half written to the dead child: want -32003 with mayHaveExecuted, got %s", m.raw)
	}
	eventually(t, "the orphaned grandchild ended", func() bool { return !processAlive(gpid) })
	eventually(t, "a new child", func() bool {
		b := tp.Snapshot().Backends[0]
		return b.PID != 0 && b.PID != first.PID && b.Restarts == 1
	})
}
