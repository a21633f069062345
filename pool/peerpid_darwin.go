package pool

import (
	"net"

	"golang.org/x/sys/unix"
)

// socketPeerPID is the PID of the process at the other end of a shim's
// connection, as the kernel says (LOCAL_PEERPID): the process that
// connected, whatever its hello claims. known is false for a connection
// that is not a Unix socket's; a socket that does not say gives 0, a PID
// no session's shim is taken to have.
func socketPeerPID(conn net.Conn) (pid int, known bool) {
	rc, ok := rawSocket(conn)
	if !ok {
		return 0, false
	}
	_ = rc.Control(func(fd uintptr) {
		if v, err := unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID); err == nil {
			pid = v
		}
	})
	return pid, true
}
