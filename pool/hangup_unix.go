//go:build unix

package pool

import (
	"errors"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// hangups watches the connections of attached sessions' shims. A shim
// sends nothing after its hello, so all that can happen on its connection
// is the hang-up its exit makes: one goroutine polls every such
// connection, instead of a read blocked on each (an idle attached session
// then costs the pool its reader goroutine alone).
type hangups struct {
	mu      sync.Mutex
	watched map[*session]int // session -> its shim connection's descriptor, open while listed
	wake    [2]int           // pipe: a write makes the poller list watched again
	running bool             // the poller runs; it exits when watched empties
}

// watch closes s when its shim's connection conn hangs up (or, against
// the protocol, sends anything). ok is false when conn cannot be polled:
// the caller then waits on it itself.
func (h *hangups) watch(p *Pool, s *session, conn net.Conn) (ok bool) {
	rc := rawConn(conn)
	if rc == nil {
		return false
	}
	fd := -1
	if rc.Control(func(d uintptr) { fd = int(d) }) != nil || fd < 0 {
		return false
	}
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
		h.watched = map[*session]int{}
	}
	h.watched[s] = fd
	h.poke()
	return true
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

// poll is the poller: it waits on every watched connection and the wake
// pipe, closes the sessions whose shims hung up, and exits once nothing
// is watched.
func (h *hangups) poll(p *Pool) {
	var (
		fds    []unix.PollFd
		owners []*session
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
		for s, fd := range h.watched {
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			owners = append(owners, s)
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
			// and really readable: a peek that would block was a wake-up
			// for a connection that has since changed hands.
			h.mu.Lock()
			fd, ok := h.watched[s]
			gone := ok && fd == int(fds[i+1].Fd) && hungUp(fd)
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
