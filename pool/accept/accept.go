// Package accept says which errors of a listener's Accept pass: the
// process or the system out of descriptors, buffers or memory, or a
// connection gone before it was taken. Every listener of the pool waits
// them out and accepts again: the local socket's (pool.ServeStdio), and
// the HTTP front door's and the control API's, which net/http serves.
package accept

import (
	"errors"
	"net"
	"syscall"
)

// Temporary reports whether err, from Accept, is one the listener
// recovers from.
func Temporary(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR:
		return true
	}
	return platformTemporary(errno)
}

// Retrying is l with the errors Temporary names marked temporary for
// net/http's Server.Serve, which waits (5 ms, doubling up to 1 s) and
// accepts again only after an error whose Temporary method says so.
// syscall.Errno says so for EMFILE but not for ENOBUFS or ENOMEM: one of
// those would end the server.
func Retrying(l net.Listener) net.Listener { return retrying{l} }

type retrying struct{ net.Listener }

func (l retrying) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil && Temporary(err) {
		return nil, temporaryError{err}
	}
	return c, err
}

// temporaryError is an accept error Temporary names, as a net.Error.
type temporaryError struct{ error }

func (e temporaryError) Unwrap() error { return e.error }
func (temporaryError) Timeout() bool   { return false }
func (temporaryError) Temporary() bool { return true }
