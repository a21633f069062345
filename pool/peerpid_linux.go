package pool

import (
	"net"

	"golang.org/x/sys/unix"
)

// socketPeerPID is the PID of the process at the other end of a shim's
// connection, as the kernel says (SO_PEERCRED): the process that
// connected, whatever its hello claims. known is false for a connection
// that is not a Unix socket's; a socket that does not say gives 0, a PID
// no session's shim is taken to have.
func socketPeerPID(conn net.Conn) (pid int, known bool) {
	rc, ok := rawSocket(conn)
	if !ok {
		return 0, false
	}
	_ = rc.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid, true
}
