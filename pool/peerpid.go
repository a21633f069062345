package pool

import (
	"net"
	"syscall"
)

// peerPIDOf is how the pool learns which process is at the other end of
// a shim's connection (socketPeerPID); tests replace it, for their shims
// all run in the test's own process.
var peerPIDOf = socketPeerPID

// shimPeerPID is the PID of the shim on conn: the socket's word, or,
// where the socket cannot say, what the shim's hello claims (claimed).
// A session's shim is the same process for the session's whole life,
// across pools: a resume is taken for that session's only from it.
func shimPeerPID(conn net.Conn, claimed int) int {
	if pid, known := peerPIDOf(conn); known {
		return pid
	}
	return claimed
}

// rawSocket is conn's descriptor, for a Unix socket's connection.
func rawSocket(conn net.Conn) (syscall.RawConn, bool) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, false
	}
	rc, err := uc.SyscallConn()
	return rc, err == nil
}
