//go:build unix

package pool_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// A child that stops reading its stdin: the calls queued for it say why
// they wait (the one it has part of, and those behind it), and a call
// none of whose bytes it took, cancelled or timed out, did not run: its
// error says mayHaveExecuted false and history says not written. The
// call it has part of may have run. (All three went in one write, and
// counted as written, may have run, for as long as that write waited,
// with no stateReason.)
func TestChildNotReadingItsInput(t *testing.T) {
	var rec recorder
	// The child starts slowly, so that the calls wait for it together and
	// are written in one batch once it is ready; it reads its handshake
	// (server/discover, initialize) and nothing more.
	cfg := fake("stuck", "-startup-delay", "1s", "-stop-reading-after", "2")
	cfg.RequestTimeout = 5 * time.Second
	tp := newTestPool(t, &pool.Options{Record: rec.record}, cfg)
	c := tp.dial(t, "stuck")
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1.0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	pad := strings.Repeat("x", 40<<10)
	ids := []string{"1", "2", "3", "4"}
	for _, id := range ids {
		c.call(id, "echo", fmt.Sprintf(`{"text":%q}`, pad))
	}
	if m, _ := c.recvID(`"init"`); m.Error != nil {
		t.Fatalf("initialize: %s", m.raw)
	}

	// The pipe takes what it holds: some calls whole, then part of one;
	// the rest wait. (The calls time out if the snapshot never says so.)
	var reqs []pool.RequestInfo
	var state string
	writing := -1
	eventually(t, "the calls to say the child does not read, or to time out", func() bool {
		s := tp.Snapshot()
		if len(s.InFlight) < len(ids) {
			return len(reqs) > 0 // timed out, once all were in flight
		}
		reqs, state = s.InFlight, s.Backends[0].State
		slices.SortFunc(reqs, func(a, b pool.RequestInfo) int { return strings.Compare(a.OriginalID, b.OriginalID) })
		writing = slices.IndexFunc(reqs, func(r pool.RequestInfo) bool { return strings.HasPrefix(r.StateReason, "being written: ") })
		return writing >= 0 && writing < len(reqs)-1 && strings.HasPrefix(reqs[len(reqs)-1].StateReason, "waiting: ")
	})
	if writing < 0 {
		t.Errorf("no call said the child does not read its input: %+v", reqs)
	}
	if state != pool.StateReady {
		t.Errorf("the backend is %s, want ready", state)
	}
	for i, r := range reqs {
		var wantWritten bool
		var wantReason string
		switch {
		case writing < 0:
			continue
		case i < writing:
			wantWritten = true
		case i == writing:
			wantReason = "being written: the child is not reading its input (nothing taken for "
		default:
			wantReason = "waiting: the child is not reading its input (nothing taken for "
		}
		if r.WrittenToChild != wantWritten || !strings.HasPrefix(r.StateReason, wantReason) || (wantReason == "") != (r.StateReason == "") {
			t.Errorf("call %s: written %v, reason %q; want written %v, reason %q…", r.OriginalID, r.WrittenToChild, r.StateReason, wantWritten, wantReason)
		}
	}
	if writing >= 0 {
		t.Logf("%s", reqs[writing].StateReason)
	}

	// The last call is cancelled by the user, the others time out.
	last := reqs[len(reqs)-1]
	_ = tp.Cancel(last.PoolID) // (timed out already if the calls did not say why they wait)
	answers := map[string]msg{}
	for len(answers) < len(reqs) {
		m := c.recv()
		answers[string(m.ID)] = m
	}
	for i, r := range reqs {
		if writing < 0 && i < len(reqs)-1 {
			continue // which of them the child has, the snapshot did not say; the last it cannot have
		}
		m := answers[r.OriginalID]
		_, data := errorData(t, m)
		if ran := i <= writing; *data.MayHaveExecuted != ran {
			t.Errorf("call %s: %s; want mayHaveExecuted %v", r.OriginalID, m.raw, ran)
		}
		done := rec.waitFor(t, "the call's end in history", func(e pool.Event) bool {
			return e.Kind == pool.EventRequestDone && e.PoolID == r.PoolID
		})
		if ran := i <= writing; done.Written != ran {
			t.Errorf("call %s: history says written %v, want %v", r.OriginalID, done.Written, ran)
		}
		if i > writing && len(rec.find(func(e pool.Event) bool { return e.Kind == pool.EventRequestWritten && e.PoolID == r.PoolID })) != 0 {
			t.Errorf("call %s: history has it written", r.OriginalID)
		}
	}
}
