package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// TestStartBackoff: a failed start is retried after 1 s, the next after
// 2 s, and the third failure gives up.
func TestStartBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b startBackoff
		if !b.ready() {
			t.Fatal("the first attempt waits")
		}
		for i, wait := range []time.Duration{time.Second, 2 * time.Second} {
			if b.failed() {
				t.Fatalf("gave up after %d failures", i+1)
			}
			time.Sleep(wait - time.Millisecond)
			if b.ready() {
				t.Fatalf("attempt %d allowed before %v", i+2, wait)
			}
			time.Sleep(time.Millisecond)
			if !b.ready() {
				t.Fatalf("attempt %d not allowed after %v", i+2, wait)
			}
		}
		if !b.failed() {
			t.Fatalf("did not give up after %d failures", maxFailedStarts)
		}
		b.succeeded()
		if !b.ready() || b.failed() {
			t.Fatal("a success does not start the count again")
		}
	})
}

// TestUserStartWait: a shim that may not start a pool waits userStartWait
// for one from its first look, and not longer.
func TestUserStartWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w userStart
		time.Sleep(time.Minute) // the clock starts at the first look, not before
		if w.over() {
			t.Fatal("over at once")
		}
		time.Sleep(userStartWait)
		if w.over() {
			t.Fatalf("over after %v", userStartWait)
		}
		time.Sleep(time.Millisecond)
		if !w.over() {
			t.Fatalf("not over after %v", userStartWait+time.Millisecond)
		}
	})
}

// TestGiveUpAnswers: a shim giving up answers each request its client
// waits for once, with the cause, saying whether it may have run: what a
// dead pool took (written to a child or not) and what no pool read
// (requests only, a line cut short at the end is none yet).
func TestGiveUpAnswers(t *testing.T) {
	cause := errors.New("the pool it started exited: no space left on device")
	lost := []wire.Lost{{ID: `"a"`, Written: true}, {ID: "7"}}
	out := answerLost(nil, lost, "mem", cause)
	input := `{"jsonrpc":"2.0","id":"a","method":"tools/call"}` + "\n" + // answered already, as lost
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}` + "\n" +
		`{"jsonrpc":"2.0","id":9,"result":{}}` + "\n" + // the client's answer to a server's request
		`{"jsonrpc":"2.0","id":1.0,"method":"tools/list"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"meth`
	out = answerInput(out, []byte(input), "mem", cause, lostIDs(lost))
	type answer struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				MayHaveExecuted bool   `json:"mayHaveExecuted"`
				Server          string `json:"server"`
			} `json:"data"`
		} `json:"error"`
	}
	var got []string
	for _, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		var a answer
		if err := json.Unmarshal(line, &a); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if !strings.Contains(a.Error.Message, cause.Error()) || a.Error.Data.Server != "mem" {
			t.Errorf("answer %s does not name the cause and the server", line)
		}
		got = append(got, fmt.Sprint(string(a.ID), " ", a.Error.Code, " ", map[bool]string{true: "may have run", false: "did not run"}[a.Error.Data.MayHaveExecuted]))
	}
	// What a pool took is owed: -32003, as a pool answers it.
	want := []string{`"a" -32003 may have run`, "7 -32003 did not run", "1.0 -32000 did not run"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("answers %q, want %q", got, want)
	}
}
