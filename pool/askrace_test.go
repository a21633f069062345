package pool_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// The session whose call asks a child's question closes between its
// pick and the question's record: its close has dropped its questions
// already, so the child must get the pool's error at once, not wait for
// ever (and the call that asked with it). Another session, which could
// answer, is not asked instead: the question was the closed session's.
func TestQuestionToASessionClosingAsPickedIsAnswered(t *testing.T) {
	closed, restore := pool.CloseAskedSessions(1)
	t.Cleanup(restore) // after the pool closed: cleanups run last first
	logPath := filepath.Join(t.TempDir(), "child.log")
	tp := newTestPool(t, nil, fake("srv", "-log", logPath))
	asker, other := tp.dial(t, "srv"), tp.dial(t, "srv")
	asker.initialize("asker", `{"sampling":{}}`)
	other.initialize("other", `{"sampling":{}}`)
	asker.call("1", "ask", `{"kind":"sampling"}`)
	if got := pickedAndClosed(t, closed); got != "asker" {
		t.Fatalf("the pool picked %q to ask, want asker", got)
	}
	eventually(t, "the child to get the pool's error for its question", func() bool {
		for _, line := range childLog(t, logPath) {
			if line["id"] == "srv-1" && line["error"] != nil {
				return true
			}
		}
		return false
	})
	other.call("2", "echo", `{"text":"still here"}`)
	if m, before := other.recvID("2"); m.text() != "still here" || len(before) != 0 {
		t.Fatalf("the other session: %s, after %s", m.raw, raws(before))
	}
}

// pickedAndClosed is the name of the client whose session the pool closed
// as it picked it to ask.
func pickedAndClosed(t *testing.T, closed <-chan string) string {
	t.Helper()
	select {
	case name := <-closed:
		return name
	case <-time.After(15 * time.Second):
		t.Fatal("the pool picked no session to ask within 15s")
	}
	return ""
}
