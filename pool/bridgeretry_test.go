package pool

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// A legacy client's call to a 2026-07-28 child whose retry with the
// client's answers finds no time left of the call's timeout is answered
// -32001 with mayHaveExecuted true: the retry never reached the child,
// but the call's first round ran there (the tool started). Both ways the
// retry can run out: refused as it is sent (the child asked as the
// timeout ran out), and queued behind a child that took nothing more
// until its deadline; and a retry refused because the server stopped
// meanwhile says the same. On the first edition all said
// mayHaveExecuted false, as for a call no child ever saw.
func TestBridgedRetryOutOfTimeMayHaveExecuted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		left    time.Duration // of the call's timeout, as the child asked
		stopped bool          // the server stopped meanwhile
		code    int
	}{
		{"refused as sent", 0, false, jsonrpc.CodeRequestTimeout},
		{"timed out queued", 100 * time.Millisecond, false, jsonrpc.CodeRequestTimeout},
		{"refused, the server stopped", time.Second, true, jsonrpc.CodeBackendUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newEndingRig(t)
			if tc.stopped {
				r.b.mu.Lock()
				r.b.stopErr = errors.New("stopped for the test")
				r.b.mu.Unlock()
			}
			call := r.add(41, `"call"`, stWritten, false)
			call.line = []byte(`{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"t","arguments":{}}}`)
			r.b.reqs.end(call) // the child answered input_required; the session still tracks the call
			x := &inputRound{b: r.b, sess: r.s, call: call, origID: call.origID, timeout: time.Second,
				remaining: tc.left, asked: time.Now(), person: true, answer: map[string]json.RawMessage{}}
			x.retry()
			var got []string
			waitUntil(t, "the call's answer", func() bool { got = append(got, r.answers()...); return len(got) > 0 })
			var m struct {
				ID    json.RawMessage `json:"id"`
				Error *struct {
					Code int `json:"code"`
					Data struct {
						MayHaveExecuted bool `json:"mayHaveExecuted"`
					} `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(got[0]), &m); err != nil || m.Error == nil || m.Error.Code != tc.code || string(m.ID) != `"call"` {
				t.Fatalf("want %d for the call, got %s", tc.code, got)
			}
			if !m.Error.Data.MayHaveExecuted {
				t.Fatalf("a retry that never reached the child, after a round that ran there: want mayHaveExecuted true, got %s", got[0])
			}
		})
	}
}
