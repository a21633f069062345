package pool

import "net"

// SetPeerPIDs makes peer the pool's word on which process is at the other
// end of each shim connection it takes from now on, in place of the
// socket's (all of a test's shims are its own process).
func SetPeerPIDs(peer func(net.Conn) (pid int, known bool)) (restore func()) {
	old := peerPIDOf
	peerPIDOf = peer
	return func() { peerPIDOf = old }
}
