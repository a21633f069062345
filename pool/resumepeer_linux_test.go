package pool_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool"
)

// TestResumeGivesTheHistoryOnlyToTheSessionsShim, with the socket's own
// word: a shim in another process (this test binary run again), claiming
// the session and its shim's PID (this process's), is given nothing of
// the session's history; this process, the session's shim, is.
func TestResumeFromAnotherProcessIsGivenNothing(t *testing.T) {
	tp := newTestPool(t, &pool.Options{RunID: "later", Unanswered: historyOfS1(os.Getpid())}, fake("srv"))

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), otherShimEnv+"="+tp.sock, otherShimHelloEnv+"="+string(resumeS1(os.Getpid())))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the other process: %v: %s", err, stderr.String())
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the other process printed %q: %v", out, err)
	}
	if len(got) != 0 {
		t.Errorf("another process that claimed session s1 and its shim's PID was answered %v, want nothing of s1's", got)
	}

	got, err = resumeRelayed(tp.sock, resumeS1(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got["7"], `"mayHaveExecuted":true`) || len(got) != 1 {
		t.Errorf("the session's shim was answered %v, want request 7's at-most-once error alone", got)
	}
}
