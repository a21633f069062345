//go:build unix

package pool

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// peerGone reports whether the other end of the session's output is gone:
// a pipe's write end polls POLLERR once no reader is left, a socket
// POLLHUP once the peer closed both directions (a shim that only shut
// down its writing side is still listening).
func peerGone(rc syscall.RawConn) bool {
	gone := false
	_ = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			gone = fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
		}
	})
	return gone
}
