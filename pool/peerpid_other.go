//go:build !linux && !darwin

package pool

import "net"

// socketPeerPID cannot ask the socket who connected here (no
// SO_PEERCRED or LOCAL_PEERPID): the pool goes by the PID the shim's
// hello claims, which any local process can claim (see README).
func socketPeerPID(net.Conn) (pid int, known bool) { return 0, false }
