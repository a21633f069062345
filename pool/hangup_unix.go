//go:build unix

package pool

import (
	"errors"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// hangups watches the connections of attached sessions' shims, and
// their clients' outputs. A shim sends nothing after its hello, so all
// that can happen on its connection is the hang-up its exit makes; a
// client's output can lose its reader (a pipe's read end closed, a socket
// or terminal hung up) while its input is still open, and the client is
// then gone as surely. One goroutine polls every such descriptor, instead
// of a read blocked on each (an idle attached session then costs the pool
// its reader goroutine alone).
type hangups struct {
	mu      sync.Mutex
	watched map[*session]watchedFDs // open while listed
	wake    [2]int                  // pipe: a write makes the poller list watched again
	running bool                    // the poller runs; it exits when watched empties
}

// watchedFDs are a session's descriptors the poller watches: its shim's
// connection, and its client's output (-1: not watched).
type watchedFDs struct{ conn, out int }

// watch closes s when its shim's connection conn hangs up (or, against
// the protocol, sends anything), or when its client's output out has no
// reader any more. ok is false when conn cannot be polled: the caller
// then waits on it itself (and out goes unwatched: a write to it that
// fails ends the session).
func (h *hangups) watch(p *Pool, s *session, conn net.Conn, out any) (ok bool) {
	fd := descriptor(conn)
	if fd < 0 {
		return false
	}
	outFD := descriptor(out)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		if err := wakePipe(&h.wake); err != nil {
			return false
		}
		h.running = true
		p.wg.Go(func() { h.poll(p) })
	}
	if h.watched == nil {
		h.watched = map[*session]watchedFDs{}
	}
	h.watched[s] = watchedFDs{conn: fd, out: outFD}
	h.poke()
	return true
}

// descriptor is x's descriptor, or -1.
func descriptor(x any) int {
	rc := rawConn(x)
	if rc == nil {
		return -1
	}
	fd := -1
	if rc.Control(func(d uintptr) { fd = int(d) }) != nil {
		return -1
	}
	return fd
}

// forget stops watching s. It is called before s's connection closes,
// so the poller never looks at a descriptor that is gone or reused.
func (h *hangups) forget(s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.watched[s]; ok {
		delete(h.watched, s)
		h.poke()
	}
}

// poke wakes the poller; with h.mu held (the pipe is open while running).
func (h *hangups) poke() {
	if h.running {
		_, _ = unix.Write(h.wake[1], []byte{0})
	}
}

// poll is the poller: it waits on every watched descriptor and the wake
// pipe, closes the sessions whose shims hung up or whose clients' output
// lost its reader, and exits once nothing is watched.
func (h *hangups) poll(p *Pool) {
	var (
		fds    []unix.PollFd
		owners []*session // fds[i+1]'s session
		buf    [64]byte
	)
	for {
		h.mu.Lock()
		if len(h.watched) == 0 {
			h.running = false
			unix.Close(h.wake[0])
			unix.Close(h.wake[1])
			h.mu.Unlock()
			return
		}
		fds = append(fds[:0], unix.PollFd{Fd: int32(h.wake[0]), Events: unix.POLLIN})
		owners = append(owners[:0], nil)
		for s, w := range h.watched {
			fds = append(fds, unix.PollFd{Fd: int32(w.conn), Events: unix.POLLIN})
			owners = append(owners, s)
			if w.out >= 0 {
				// No events asked: poll reports POLLERR and POLLHUP
				// all the same, and a writable output is no news.
				fds = append(fds, unix.PollFd{Fd: int32(w.out)})
				owners = append(owners, s)
			}
		}
		h.mu.Unlock()

		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			p.log.Warn("watching shims for their exit", "err", err)
		}
		if fds[0].Revents != 0 {
			for {
				if n, _ := unix.Read(int(fds[0].Fd), buf[:]); n <= 0 {
					break
				}
			}
		}
		for i, s := range owners[1:] {
			if fds[i+1].Revents == 0 {
				continue
			}
			// Still this session's descriptor (forget runs before a close)
			// and really hung up: a peek that would block, or an output
			// that has its reader, was a wake-up for a descriptor that
			// has since changed hands.
			h.mu.Lock()
			w, ok := h.watched[s]
			fd := int(fds[i+1].Fd)
			gone := ok && (fd == w.conn && hungUp(fd) || fd == w.out && readerGone(fd))
			if gone {
				delete(h.watched, s)
			}
			h.mu.Unlock()
			if gone {
				p.wg.Go(func() { s.close(nil) })
			}
		}
	}
}

// hungUp reports whether the connection fd has ended (or has data, which
// a shim never sends after its hello), without waiting.
func hungUp(fd int) bool {
	var b [1]byte
	_, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR)
}

// readerGone reports whether nobody can read what is written to fd any
// more: a pipe whose read end closed (POLLERR), a socket or terminal that
// hung up (POLLHUP).
func readerGone(fd int) bool {
	fds := [1]unix.PollFd{{Fd: int32(fd)}}
	n, err := unix.Poll(fds[:], 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
}

// wakePipe opens a non-blocking pipe that no child inherits.
func wakePipe(fds *[2]int) error {
	syscall.ForkLock.RLock() // no fork between the pipe and close-on-exec
	defer syscall.ForkLock.RUnlock()
	if err := unix.Pipe(fds[:]); err != nil {
		return err
	}
	for _, fd := range fds {
		unix.CloseOnExec(fd)
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
			return err
		}
	}
	return nil
}
