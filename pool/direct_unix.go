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
// hand-off to a writer goroutine (see writeNow). One write at a time:
// its callers serialise (backend.writing, sessionOut.mu), and the write
// under way keeps its state here, so that no write allocates a closure.
type directWriter struct {
	rc      syscall.RawConn
	writeFn func(fd uintptr) bool // write, bound once

	// The write under way.
	line []byte
	n    int
	err  error
}

// newDirectWriter returns a direct writer for w, or nil when w cannot be
// written without blocking: not a descriptor, or one in blocking mode
// (a write could then stall the goroutine that tries it).
func newDirectWriter(w any) *directWriter {
	rc := nonblockingRawConn(w)
	if rc == nil {
		return nil
	}
	d := &directWriter{rc: rc}
	d.writeFn = d.write
	return d
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
	d.line, d.n, d.err = line, 0, nil
	cerr := d.rc.Write(d.writeFn)
	n, err, d.line, d.err = d.n, d.err, nil, nil
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

// writevNow writes bufs, in order, with one writev that never waits for
// the reader. n counts the bytes taken: below their length with a nil
// error, the pipe was full (awaitRoom waits for room).
func (d *directWriter) writevNow(bufs [][]byte) (n int, err error) {
	cerr := d.rc.Write(func(fd uintptr) bool {
		for {
			n, err = unix.Writev(int(fd), bufs)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		return true // never wait: the caller decides what waits
	})
	if errors.Is(err, unix.EAGAIN) {
		n, err = 0, nil
	}
	n = max(n, 0)
	if err == nil {
		err = cerr
	}
	return n, err
}

// awaitRoom waits until the descriptor can take a write again, or its
// reader is gone (the next write says so); an error means it was closed.
// Whether it has room is asked inside the wait: the poller forgets, as
// the wait begins, the room the reader made since the last write, and
// a reader that emptied the pipe makes no more.
func (d *directWriter) awaitRoom() error {
	return d.rc.Write(func(fd uintptr) bool {
		fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds[:], 0)
		return err != nil || n > 0 // false: wait in the runtime's poller until it is writable
	})
}

// write is writeNow's system call, on the descriptor d.rc lends it.
func (d *directWriter) write(fd uintptr) bool {
	for {
		d.n, d.err = writevLine(int(fd), d.line)
		if !errors.Is(d.err, unix.EINTR) {
			break
		}
	}
	return true // never wait: a full pipe is the caller's to hand on
}

// rawReader reads a non-blocking pipe or socket with read(2) as a raw
// system call, waiting in the runtime's poller when nothing is there.
// Its errors are orig's: a read that fails (closed, deadline) is made
// again through orig, which says why in its own words. Like any
// io.Reader it has one reader at a time, and the read under way keeps
// its state here, so that no read allocates a closure.
type rawReader struct {
	rc     syscall.RawConn
	orig   io.Reader
	readFn func(fd uintptr) bool // read, bound once

	// The read under way.
	p     []byte
	n     int
	errno syscall.Errno
}

// newRawReader returns a raw reader of r, or r when r is not a
// non-blocking descriptor.
func newRawReader(r io.Reader) io.Reader {
	rc := nonblockingRawConn(r)
	if rc == nil {
		return r
	}
	rr := &rawReader{rc: rc, orig: r}
	rr.readFn = rr.read
	return rr
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.errno = p, 0, 0
	cerr := r.rc.Read(r.readFn)
	n, errno := r.n, r.errno
	r.p = nil
	switch {
	case cerr != nil || errno != 0:
		return r.orig.Read(p)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read is Read's system call, on the descriptor r.rc lends it; false asks
// the poller to wait until the descriptor is readable.
func (r *rawReader) read(fd uintptr) bool {
	for {
		r.n, r.errno = rawRead(int(fd), r.p)
		if r.errno != unix.EINTR {
			break
		}
	}
	return r.errno != unix.EAGAIN
}
