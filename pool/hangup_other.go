//go:build !unix

package pool

import "net"

// hangups is polled only on Unix, where sessions attach; elsewhere the
// caller waits on each connection itself.
type hangups struct{}

func (*hangups) watch(*Pool, *session, net.Conn, any) bool { return false }
func (*hangups) forget(*session)                           {}
