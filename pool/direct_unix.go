//go:build unix

package pool

import (
	"errors"
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// The hot path reads and writes non-blocking descriptors through the
// runtime's poller (syscall.RawConn): a read or write that the kernel
// cannot complete at once returns EAGAIN, so none ever blocks a thread.
// On Linux they are raw system calls (rawsys_linux.go), which skip the
// runtime's entersyscall: that one wakes the runtime's monitor thread
// (sysmon) whenever it sleeps, which it does each time the pool waits
// for the next message. At one call at a time that was one more thread
// woken, on another core, for every message the pool carried.

// directWriter writes to a pipe or socket with one non-blocking system
// call, from whichever goroutine has a line ready: delivery without a
// hand-off to a writer goroutine (see writeNow).
type directWriter struct{ rc syscall.RawConn }

// newDirectWriter returns a direct writer for w, or nil when w cannot be
// written without blocking: not a descriptor, or one in blocking mode
// (a write could then stall the goroutine that tries it).
func newDirectWriter(w any) *directWriter {
	rc := nonblockingRawConn(w)
	if rc == nil {
		return nil
	}
	return &directWriter{rc: rc}
}

// nonblockingRawConn is x's descriptor when it is one in non-blocking
// mode, else nil.
func nonblockingRawConn(x any) syscall.RawConn {
	rc := rawConn(x)
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
	return rc
}

// writeNow writes line and a newline with one writev that never waits for
// the reader. n counts the bytes taken (newline included): n below
// len(line)+1 with a nil error means the pipe or socket was full.
func (d *directWriter) writeNow(line []byte) (n int, err error) {
	cerr := d.rc.Write(func(fd uintptr) bool {
		for {
			n, err = writevLine(int(fd), line)
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

// rawReader reads a non-blocking pipe or socket with read(2) as a raw
// system call, waiting in the runtime's poller when nothing is there.
// Its errors are orig's: a read that fails (closed, deadline) is made
// again through orig, which says why in its own words.
type rawReader struct {
	rc   syscall.RawConn
	orig io.Reader
}

// newRawReader returns a raw reader of r, or r when r is not a
// non-blocking descriptor.
func newRawReader(r io.Reader) io.Reader {
	rc := nonblockingRawConn(r)
	if rc == nil {
		return r
	}
	return &rawReader{rc: rc, orig: r}
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	cerr := r.rc.Read(func(fd uintptr) bool {
		for {
			n, errno = rawRead(int(fd), p)
			if errno != unix.EINTR {
				break
			}
		}
		return errno != unix.EAGAIN
	})
	switch {
	case cerr != nil || errno != 0:
		return r.orig.Read(p)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}
