package shim

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
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

// A pool killed while its client writes a request line leaves the relay's
// write of the line's end failing (its connection can no longer be read).
// No pool took that end, so the request is not owed as possibly executed:
// the head the dead pool read and the end it did not go to the next pool,
// which reads the line whole and runs it.
func TestRelayHoldsTheEndAKilledPoolDidNotTake(t *testing.T) {
	const head, tail = `{"jsonrpc":"2.0","id":"half","method":"tools/call",`, `"params":{"name":"echo"}}` + "\n"
	shimSide, poolSide := net.Pipe()
	defer poolSide.Close()
	conn := &killableConn{Conn: shimSide, writing: make(chan []byte, 2)}
	input := make(chan []byte)
	var out bytes.Buffer
	r := &relayed{out: &out, count: newUnanswered(), fromClient: input, clientErr: make(chan error, 1)}
	served := make(chan relayEnd, 1)
	go func() {
		end, _ := r.serve(conn, bufio.NewReader(conn))
		served <- end
	}()

	input <- []byte(head)
	if _, err := io.ReadFull(poolSide, make([]byte, len(head))); err != nil {
		t.Fatalf("the pool read no head: %v", err)
	}
	<-conn.writing
	conn.kill() // the pool is killed with the head read: its connection refuses the rest
	input <- []byte(tail)
	<-conn.writing // the relay wrote the end, and the write failed
	poolSide.Close()
	if end := <-served; end != relayLost {
		t.Fatalf("the relay ended %v; want %v", end, relayLost)
	}

	if lost := r.count.lost(); len(lost) != 0 {
		t.Errorf("the next pool is told %v was lost; want nothing: no pool read the whole line", lost)
	}
	if next := string(r.count.head()) + string(r.held); next != head+tail {
		t.Errorf("the next pool reads %q first; want the whole line %q", next, head+tail)
	}
}

// killableConn is a pool connection whose writes fail once kill is
// called, as a killed pool's do, while its reads go on until the pool's
// side closes; writing has each write's bytes once it is done.
type killableConn struct {
	net.Conn
	killed  atomic.Bool
	writing chan []byte
}

func (c *killableConn) kill() { c.killed.Store(true) }

func (c *killableConn) Write(b []byte) (int, error) {
	defer func() { c.writing <- b }()
	if c.killed.Load() {
		return 0, errors.New("broken pipe")
	}
	return c.Conn.Write(b)
}
