package pool_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A child that closes its stdout after the handshake and runs on can
// answer nothing: the pool stops it and takes it for a crash. The call it
// had fails at once as may have executed, saying why; the next child is
// started with backoff, and a crash loop of such children spends the
// restart budget.
func TestChildClosingStdoutIsACrash(t *testing.T) {
	cfg := fake("srv", "-close-stdout-after-init", "-stderr", "starting up")
	cfg.RequestTimeout = time.Minute // a wait for it would outlast recv's patience
	cfg.Restart = pool.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	first := 0
	eventually(t, "a ready child", func() bool {
		s := tp.Snapshot()
		if len(s.Backends) == 1 && s.Backends[0].State == pool.StateReady {
			first = s.Backends[0].PID
		}
		return first != 0
	})
	c.call("1", "echo", `{"text":"lost"}`)
	m, _ := c.recvID("1")
	var data struct {
		Retryable       bool `json:"retryable"`
		MayHaveExecuted bool `json:"mayHaveExecuted"`
	}
	if m.Error != nil {
		_ = json.Unmarshal(m.Error.Data, &data)
	}
	if m.Error == nil || m.Error.Code != -32003 || !data.Retryable || !data.MayHaveExecuted ||
		!strings.Contains(m.Error.Message, "closed its stdout") || !strings.Contains(m.Error.Message, "switchboard status") {
		t.Fatalf("want the retryable may-have-executed error saying the child closed its stdout, got %s", m.raw)
	}
	eventually(t, "the next child", func() bool {
		s := tp.Snapshot()
		return len(s.Backends) == 1 && s.Backends[0].PID != 0 && s.Backends[0].PID != first
	})
	// Each child closes its stdout: a crash loop.
	var srv pool.ServerInfo
	eventually(t, "the server to fail", func() bool {
		srv = tp.Snapshot().Servers[0]
		return srv.State == pool.StateFailed
	})
	if !strings.Contains(srv.Error, "closed its stdout") {
		t.Errorf("failed server's error %q does not say the child closed its stdout", srv.Error)
	}
}

// A child that exits by itself closes its stdout as it goes: that is one
// ordinary exit, counted once, its reason its exit status.
func TestChildExitIsOneCrash(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	c := tp.dial(t, "srv")
	c.initialize("c", "")
	for i, id := range []string{"1", "2"} {
		c.call(id, "crash", `{}`)
		m, _ := c.recvID(id)
		if m.Error == nil || !strings.Contains(m.Error.Message, "exited (exit status 3)") {
			t.Fatalf("crash %d: %s", i+1, m.raw)
		}
		eventually(t, "the restart", func() bool {
			s := tp.Snapshot()
			return len(s.Backends) == 1 && s.Backends[0].State == pool.StateReady && s.Backends[0].Restarts == i+1
		})
		if be := tp.Snapshot().Backends[0]; be.LastError != "child exited (exit status 3)" || be.Restarts != i+1 {
			t.Fatalf("after crash %d: restarts %d, last error %q", i+1, be.Restarts, be.LastError)
		}
	}
}
