//go:build unix

package pool

import (
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

// nonblockingPipe is an os.Pipe: both ends non-blocking, in the poller.
func nonblockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// TestRawReaderReadsAndEnds: what is written is read, then EOF when the
// writer closes.
func TestRawReaderReadsAndEnds(t *testing.T) {
	r, w := nonblockingPipe(t)
	rr := newRawReader(r)
	if _, ok := rr.(*rawReader); !ok {
		t.Fatalf("newRawReader(non-blocking pipe) = %T, want a raw reader", rr)
	}
	go func() {
		_, _ = w.Write([]byte("one\n"))
		_, _ = w.Write([]byte("two\n"))
		w.Close()
	}()
	got, err := io.ReadAll(rr)
	if err != nil || string(got) != "one\ntwo\n" {
		t.Fatalf("read %q, %v", got, err)
	}
}

// TestRawReaderErrorsAreTheFiles: a deadline interrupts a read waiting in
// the poller, and a close ends the reads, with the errors os.File gives.
func TestRawReaderErrorsAreTheFiles(t *testing.T) {
	r, _ := nonblockingPipe(t)
	rr := newRawReader(r)
	_ = r.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := rr.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	_ = r.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := rr.Read(make([]byte, 16))
		done <- err
	}()
	r.Close() // before or during the read: either way it ends
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("read of a closed pipe: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the pipe did not end the read")
	}
}

// TestRawReaderLeavesBlockingDescriptors: a blocking pipe, or no
// descriptor at all, is read as it is.
func TestRawReaderLeavesBlockingDescriptors(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	defer r.Close()
	defer w.Close()
	if rr := newRawReader(r); rr != io.Reader(r) {
		t.Fatalf("newRawReader(blocking pipe) = %T, want the file itself", rr)
	}
	var b bytes.Buffer
	if rr := newRawReader(&b); rr != io.Reader(&b) {
		t.Fatalf("newRawReader(buffer) = %T", rr)
	}
}

// TestWriteNowTakesWhatThePipeHolds: a line and its newline in one
// writev; a line larger than the pipe is taken in part, without error
// and without waiting.
func TestWriteNowTakesWhatThePipeHolds(t *testing.T) {
	r, w := nonblockingPipe(t)
	d := newDirectWriter(w)
	if d == nil {
		t.Fatal("no direct writer for a non-blocking pipe")
	}
	if n, err := d.writeNow([]byte("abc")); n != 4 || err != nil {
		t.Fatalf("writeNow(abc) = %d, %v", n, err)
	}
	buf := make([]byte, 16)
	if n, err := r.Read(buf); string(buf[:n]) != "abc\n" || err != nil {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	big := bytes.Repeat([]byte("x"), 4<<20)
	n, err := d.writeNow(big)
	if err != nil || n <= 0 || n >= len(big)+1 {
		t.Fatalf("writeNow(4 MiB) into a pipe = %d, %v; want part of it", n, err)
	}
	if n, err := d.writeNow([]byte("more")); n != 0 || err != nil {
		t.Fatalf("writeNow into a full pipe = %d, %v; want 0, nil", n, err)
	}
}
