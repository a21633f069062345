//go:build !unix

package pool

import "syscall"

// peerGone cannot tell on this system; a client that goes away while its
// session drains is noticed when a write to it fails.
func peerGone(syscall.RawConn) bool { return false }
