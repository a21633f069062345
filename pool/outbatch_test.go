//go:build unix

package pool

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// batchRig is an endingRig whose session writes to a pipe, as a stdio
// client's would: the batch's writes can be read back.
type batchRig struct {
	*endingRig
	client *os.File // what the client reads
	out    *os.File // the session's output
}

func newBatchRig(t *testing.T) *batchRig {
	r := &batchRig{endingRig: newEndingRig(t)}
	r.client, r.out = nonblockingPipe(t)
	r.s.startOutput(r.out)
	return r
}

// answer hands the backend's reader the child's answer to pe, as the
// reader does with more lines of the same read still to come or not.
func (r *batchRig) answer(t *testing.T, bt *outBatch, pe *pending, more bool) {
	t.Helper()
	r.answerPadded(t, bt, pe, more, "")
}

// answerPadded is answer with pad in the result, to make it long.
func (r *batchRig) answerPadded(t *testing.T, bt *outBatch, pe *pending, more bool, pad string) {
	t.Helper()
	msg, err := jsonrpc.Parse([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"n":%d%s}}`, pe.id, pe.id, pad)))
	if err != nil {
		t.Fatal(err)
	}
	bt.more = more
	r.b.onResponse(&msg, bt)
}

// fillPipeBut fills the client's pipe, through a writer of its own, but
// for room bytes, ending with a line of its own; fill is that line's
// length, without its newline.
func (r *batchRig) fillPipeBut(t *testing.T, room int) (fill int) {
	t.Helper()
	d := newDirectWriter(r.out)
	filler := bytes.Repeat([]byte("f"), 1<<20)
	capacity, err := d.writeNow(filler)
	if err != nil || capacity <= 0 || capacity > len(filler) {
		t.Fatalf("filling the pipe: %d, %v", capacity, err)
	}
	if got := r.written(t); len(got) != capacity {
		t.Fatalf("read back %d bytes of the filler, want %d", len(got), capacity)
	}
	fill = capacity - room - 1
	if n, err := d.writeNow(filler[:fill]); n != fill+1 || err != nil {
		t.Fatalf("writing the filler line: %d, %v", n, err)
	}
	return fill
}

// written is what the client can read now, without waiting.
func (r *batchRig) written(t *testing.T) string {
	t.Helper()
	rc, err := r.client.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, rerr = syscall.Read(int(fd), buf)
			return true // one try: never wait
		}); err != nil {
			t.Fatal(err)
		}
		if errors.Is(rerr, syscall.EAGAIN) {
			return string(got)
		}
		if rerr != nil || n <= 0 {
			t.Fatalf("read: %d, %v", n, rerr)
		}
		got = append(got, buf[:n]...)
	}
}

// readLines reads from the client until it has n lines, or fails at the
// deadline.
func (r *batchRig) readLines(t *testing.T, n int) []string {
	t.Helper()
	_ = r.client.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []byte
	buf := make([]byte, 64<<10)
	for bytes.Count(got, []byte{'\n'}) < n {
		k, err := r.client.Read(buf)
		got = append(got, buf[:k]...)
		if err != nil {
			t.Fatalf("after %d of %d lines: %v", bytes.Count(got, []byte{'\n'}), n, err)
		}
	}
	return strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
}

// TestBatchWritesAReadsAnswersTogether: answers that one read from the
// child brought wait until the read's last line is handled, then go to
// the client whole and in order; the session's ledger slots are free and
// its queue empty after.
func TestBatchWritesAReadsAnswersTogether(t *testing.T) {
	r := newBatchRig(t)
	bt := &outBatch{}
	var ps []*pending
	for i := range 3 {
		ps = append(ps, r.add(uint64(10+i), fmt.Sprintf(`"c%d"`, i), stWritten, true))
	}
	r.answer(t, bt, ps[0], true)
	r.answer(t, bt, ps[1], true)
	if got := r.written(t); got != "" {
		t.Fatalf("answers written before the read's last line was handled: %q", got)
	}
	r.answer(t, bt, ps[2], false) // the last line: it waits with the others
	if got := r.written(t); got != "" {
		t.Fatalf("the read's last answer went ahead of the others: %q", got)
	}
	bt.flush()
	want := `{"jsonrpc":"2.0","id":"c0","result":{"n":10}}` + "\n" +
		`{"jsonrpc":"2.0","id":"c1","result":{"n":11}}` + "\n" +
		`{"jsonrpc":"2.0","id":"c2","result":{"n":12}}` + "\n"
	if got := r.written(t); got != want {
		t.Fatalf("after the flush the client read\n%s\nwant\n%s", got, want)
	}
	if len(r.s.out) != 0 || r.s.owedCount() != 0 || len(bt.sessions) != 0 {
		t.Fatalf("after the flush: %d queued, %d slots owed, %d sessions in the batch", len(r.s.out), r.s.owedCount(), len(bt.sessions))
	}
}

// TestBatchAloneIsWrittenAtOnce: an answer that is its read's only line
// is written as it is handled, as before batching: a call at a time pays
// nothing for it.
func TestBatchAloneIsWrittenAtOnce(t *testing.T) {
	r := newBatchRig(t)
	bt := &outBatch{}
	pe := r.add(10, `1`, stWritten, true)
	r.answer(t, bt, pe, false)
	if got, want := r.written(t), `{"jsonrpc":"2.0","id":1,"result":{"n":10}}`+"\n"; got != want {
		t.Fatalf("client read %q, want %q at once", got, want)
	}
}

// TestBatchKeepsOrderWithOtherDeliverers is the attack on ordering: while
// answers wait in a batch, another goroutine's line for the same session
// (a notification, an error the pool makes) must go behind them, and
// nothing may be lost whoever writes it.
func TestBatchKeepsOrderWithOtherDeliverers(t *testing.T) {
	r := newBatchRig(t)
	bt := &outBatch{}
	a, b := r.add(10, `"a"`, stWritten, true), r.add(11, `"b"`, stWritten, true)
	r.answer(t, bt, a, true)
	done := make(chan struct{})
	go func() { // another deliverer, on its own goroutine
		defer close(done)
		r.s.deliver([]byte(`{"jsonrpc":"2.0","method":"notifications/message"}`), notice("notifications/message"))
	}()
	<-done
	r.answer(t, bt, b, false)
	bt.flush()
	got := r.readLines(t, 3)
	want := []string{
		`{"jsonrpc":"2.0","id":"a","result":{"n":10}}`,
		`{"jsonrpc":"2.0","method":"notifications/message"}`,
		`{"jsonrpc":"2.0","id":"b","result":{"n":11}}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("client read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestBatchShortWriteIsFinishedInOrder is the attack of a slow client: its
// pipe holds none, or only part, of the batch's write. The rest goes first
// when the client reads again, whole lines in order, and a line offered
// meanwhile comes after it; the child's reader never waits for the client.
func TestBatchShortWriteIsFinishedInOrder(t *testing.T) {
	page := os.Getpagesize()
	pad := `,"pad":"` + strings.Repeat("p", 3000) + `"` // four answers span pages
	for _, tc := range []struct {
		name string
		room int // bytes the pipe has room for, in whole pages or not
	}{
		{"the pipe takes none", 30},
		{"the pipe takes part", page},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newBatchRig(t)
			bt := &outBatch{}
			// Fill the client's pipe but for room, with a line of its own.
			fill := r.fillPipeBut(t, tc.room)
			var ps []*pending
			for i := range 4 {
				ps = append(ps, r.add(uint64(10+i), fmt.Sprint(i), stWritten, true))
			}
			for i, pe := range ps {
				r.answerPadded(t, bt, pe, i < len(ps)-1, pad)
			}
			bt.flush() // returns though the client is not reading
			r.s.deliver([]byte(`{"jsonrpc":"2.0","method":"last"}`), notice("last"))

			// The filler, then every answer whole and in order, then the
			// late line.
			lines := r.readLines(t, 1+len(ps)+1)
			if len(lines[0]) != fill || strings.Trim(lines[0], "f") != "" {
				t.Fatalf("the filler came back as %d bytes, want %d", len(lines[0]), fill)
			}
			var want []string
			for i := range ps {
				want = append(want, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"n":%d%s}}`, i, 10+i, pad))
			}
			want = append(want, `{"jsonrpc":"2.0","method":"last"}`)
			if got := lines[1:]; strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("client read %d lines after the filler, want %d, whole and in order", len(got), len(want))
			}
			// The drain releases the slots once it has written the answers.
			waitUntil(t, "the answers' ledger slots released", func() bool { return r.s.owedCount() == 0 })
		})
	}
}
