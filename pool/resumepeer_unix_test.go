//go:build unix

package pool_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// peers is the pool's word on which process is at the other end of a
// shim connection, in a test whose shims all run in its own process:
// the PID set last, for each connection the pool takes from then on.
type peers struct{ pid atomic.Int64 }

// setPeers makes pid the PID of the shims the pool takes next, until the
// test sets another; before the test's pools start, so that they close
// before it ends.
func setPeers(t *testing.T, pid int) *peers {
	t.Helper()
	p := &peers{}
	p.set(pid)
	t.Cleanup(pool.SetPeerPIDs(func(net.Conn) (int, bool) { return int(p.pid.Load()), true }))
	return p
}

func (p *peers) set(pid int) { p.pid.Store(int64(pid)) }

// owedToS1 is what the history of run "earlier" lists as unanswered in
// its session s1: a call that reached the child.
var owedToS1 = []pool.Unanswered{{OriginalID: "7", Method: "tools/call", Written: true}}

// historyOfS1 is an Options.Unanswered whose history has owedToS1, the
// requests of run "earlier"'s session s1, whose shim was pid.
func historyOfS1(pid int) func(context.Context, string, string) (pool.Owed, error) {
	return func(_ context.Context, run, session string) (pool.Owed, error) {
		if run != "earlier" || session != "s1" {
			return pool.Owed{}, nil
		}
		return pool.Owed{PeerPID: pid, Requests: owedToS1}, nil
	}
}

// resumeS1 is a relaying shim's hello resuming run "earlier"'s session
// s1, claiming to be pid.
func resumeS1(pid int) []byte {
	hello, _ := json.Marshal(wire.Hello{Server: "srv", PID: pid, Resumable: true, Resume: &wire.Resume{
		Run: "earlier", Session: "s1", Initialize: []byte(keptInitParams),
	}})
	return hello
}

// A resume names its session by the run and the session's id, both easy
// to learn (`status --json`, any Welcome), and its hello's PID is what
// the shim says: the history's requests of that session, ids, methods,
// and whether each reached a child, go only to the process that was the
// session's shim, as the socket tells it. Another process that claims
// the session, and its shim's PID, is given none of it; the session's
// shim still is. (Any process that named a session was answered its
// requests.)
func TestResumeGivesTheHistoryOnlyToTheSessionsShim(t *testing.T) {
	const shim, other = 4242, 4343
	peers := setPeers(t, other)
	tp := newTestPool(t, &pool.Options{RunID: "later", Unanswered: historyOfS1(shim)}, fake("srv"))

	got, err := resumeRelayed(tp.sock, resumeS1(shim))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("another process that claimed session s1 and its shim's PID was answered %v, want nothing of s1's", got)
	}

	peers.set(shim)
	got, err = resumeRelayed(tp.sock, resumeS1(0))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got["7"], `"mayHaveExecuted":true`) || len(got) != 1 {
		t.Errorf("the session's shim was answered %v, want request 7's at-most-once error alone", got)
	}
}

// A resume names a session of an earlier pool: one that names a session
// this pool runs is no shim coming back (that session's shim is still
// connected), and is given nothing of the history's, even from the
// session's own process.
func TestResumeOfALiveSessionIsGivenNothing(t *testing.T) {
	tp := newTestPool(t, &pool.Options{RunID: "now", Unanswered: func(_ context.Context, run, session string) (pool.Owed, error) {
		if run != "now" || session != "s1" {
			return pool.Owed{}, nil
		}
		return pool.Owed{PeerPID: os.Getpid(), Requests: owedToS1}, nil
	}}, fake("srv"))
	live := tp.attach(t, "srv")
	live.initialize()
	if ss := tp.Snapshot().Sessions; len(ss) != 1 || ss[0].ID != "s1" {
		t.Fatalf("sessions %+v, want s1 alone", ss)
	}

	hello, _ := json.Marshal(wire.Hello{Server: "srv", Resumable: true, Resume: &wire.Resume{
		Run: "now", Session: "s1", Initialize: []byte(keptInitParams),
	}})
	got, err := resumeRelayed(tp.sock, hello)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("a resume of the live session s1 was answered %v, want nothing", got)
	}
}
