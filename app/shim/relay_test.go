package shim

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// A pool that dies inside a line (while writing an answer) leaves part of
// it on the client's output: the relay ends that line before anything
// else is written to the client (the next pool's answers, or its own), so
// that those are read whole, and the count takes the broken line for no
// answer, so its request is owed. Until then the line stays as it is: a
// session the pool ended (evicted) is left with it unfinished, never
// passed off as whole.
func TestRelayEndsALineThePoolLeftUnfinished(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		wantCut      bool
	}{
		{"whole lines", `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n", false},
		{"a line cut off", `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":2,"res`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			r := &relayed{out: &out, count: newUnanswered()}
			r.count.sent([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"))
			end := r.copyFromPool(bufio.NewReader(strings.NewReader(tc.stream)), make(chan struct{}))
			if end.end != relayLost || end.cutLine != tc.wantCut || out.String() != tc.stream {
				t.Fatalf("end %v (cut line %v), the client got %q; want end %v (cut line %v) and the stream as it came",
					end.end, end.cutLine, out.String(), relayLost, tc.wantCut)
			}
			r.cutLine = end.cutLine
			r.endCutLine() // the next pool is about to write
			want := tc.stream
			if tc.wantCut {
				want += "\n"
			}
			if out.String() != want {
				t.Fatalf("before the next pool writes, the client has %q; want %q", out.String(), want)
			}
			// The next pool's answer to 2 is counted whole.
			r.count.received([]byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32003,"message":"restarted"}}` + "\n"))
			if lost := r.count.lost(); len(lost) != 0 {
				t.Errorf("after the next pool's answer, the count still owes %v", lost)
			}
		})
	}
}
