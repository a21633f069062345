package pool_test

import (
	"strings"
	"testing"
)

// samplingAnswer is the inputResponses member answering the fake child's
// sampling question under key.
func samplingAnswer(key string) string {
	return `,"inputResponses":{"` + key + `":{"role":"assistant","content":{"type":"text","text":"forty-two"},"model":"m"}}`
}

// onlyKey is the one inputRequests key of r.
func onlyKey(t *testing.T, r inputRequiredResult) string {
	t.Helper()
	if len(r.InputRequests) != 1 {
		t.Fatalf("want one question: %+v", r)
	}
	for k := range r.InputRequests {
		return k
	}
	return ""
}

// TestMRTRMismatchedRetryKeepsTheState: a retry that names a held call's
// requestState on another tool is refused with -32602, and the state
// stays good: the call's own retry still gets its result. Before, the
// refused retry spent the state, and the right one was then told the
// pool held no call for it while the call stayed held at the child.
func TestMRTRMismatchedRetryKeepsTheState(t *testing.T) {
	tp := newTestPool(t, nil, fake("srv"))
	roundTrip, _ := roundTrips(t, tp)
	for _, how := range []string{"http", "stdio"} {
		t.Run(how, func(t *testing.T) {
			send := roundTrip[how]
			first := readResult(t, send("1", askCall("1", "sampling", "")))
			if first.ResultType != "input_required" {
				t.Fatalf("first answer: %+v", first)
			}
			key := onlyKey(t, first)
			wrong := send("2", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"requestState":"`+
				first.RequestState+`"`+samplingAnswer(key)+`,`+samplingMeta+`}}`)
			if wrong.Error == nil || wrong.Error.Code != -32602 || !strings.Contains(wrong.Error.Message, "does not belong") {
				t.Fatalf("the state on another tool: %s, want -32602", wrong.raw)
			}
			done := send("3", askCall("3", "sampling", `,"requestState":"`+first.RequestState+`"`+samplingAnswer(key)))
			if r := readResult(t, done); r.ResultType != "complete" || len(r.Content) != 1 || !strings.Contains(r.Content[0].Text, "forty-two") {
				t.Fatalf("the call's own retry after a mismatched one: %s", done.raw)
			}
		})
	}
}
