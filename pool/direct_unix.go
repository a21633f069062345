//go:build unix

package pool

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// directWriter writes to a pipe or socket with one non-blocking system
// call, from whichever goroutine has a line ready: delivery without a
// hand-off to a writer goroutine (see writeNow).
type directWriter struct{ rc syscall.RawConn }

// newDirectWriter returns a direct writer for w, or nil when w cannot be
// written without blocking: not a descriptor, or one in blocking mode
// (a write could then stall the goroutine that tries it).
func newDirectWriter(w any) *directWriter {
	rc := rawConn(w)
	if rc == nil {
		return nil
	}
	nonblocking := false
	if err := rc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblocking = err == nil && flags&unix.O_NONBLOCK != 0
	}); err != nil || !nonblocking {
		return nil
	}
	return &directWriter{rc: rc}
}

// writeNow writes line and a newline with one writev that never waits for
// the reader. n counts the bytes taken (newline included): n below
// len(line)+1 with a nil error means the pipe or socket was full.
func (d *directWriter) writeNow(line []byte) (n int, err error) {
	nl := []byte{'\n'}
	cerr := d.rc.Write(func(fd uintptr) bool {
		for {
			n, err = unix.Writev(int(fd), [][]byte{line, nl})
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		return true // never wait: a full pipe is the caller's to hand on
	})
	if errors.Is(err, unix.EAGAIN) {
		n, err = 0, nil
	}
	if n < 0 {
		n = 0
	}
	if err == nil {
		err = cerr
	}
	return n, err
}
