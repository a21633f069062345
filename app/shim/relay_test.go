package shim

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// A pool that dies inside a line (while writing an answer) leaves part of
// it on the client's output: the relay ends that line, so that the next
// pool's answers are read whole, and the count takes the broken line for
// no answer, so its request is owed.
func TestRelayEndsALineThePoolLeftUnfinished(t *testing.T) {
	for _, tc := range []struct {
		name, stream, wantOut string
		wantEnd               relayEnd
	}{
		{"whole lines", `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n",
			`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n", relayLost},
		{"a line cut off", `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":2,"res`,
			`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":2,"res` + "\n", relayLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			r := &relayed{out: &out, count: newUnanswered()}
			r.count.sent([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"))
			end := r.copyFromPool(bufio.NewReader(strings.NewReader(tc.stream)), make(chan struct{}))
			if end.end != tc.wantEnd || out.String() != tc.wantOut {
				t.Fatalf("end %v, the client got %q; want end %v and %q", end.end, out.String(), tc.wantEnd, tc.wantOut)
			}
			// The next pool's answer to 2 is counted whole.
			r.count.received([]byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32003,"message":"restarted"}}` + "\n"))
			if lost := r.count.lost(); len(lost) != 0 {
				t.Errorf("after the next pool's answer, the count still owes %v", lost)
			}
		})
	}
}
